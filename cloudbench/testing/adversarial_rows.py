"""What every adversarial row is (:class:`Row`: an estimator on a generator, how often it held)
and the adapters shared by the suites (:mod:`cloudbench.testing.adversarial_suite`,
:mod:`cloudbench.testing.adversarial_drift`): the per-pair event detector as the echo report
runs it, and the echo workload's default window."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy import stats as sps

from cloudbench.analysis.events import detect_pair_events
from cloudbench.workloads.echo.params import window_of

FloatArray = NDArray[np.float64]
Kind = Literal["interval", "test", "power", "rate"]


@dataclass(frozen=True)
class Row:
    """One estimator on one generator: how often it held (interval, power) or rejected (test)."""

    estimator: str
    generator: str
    kind: Kind
    nominal: float  # level (interval), α (test), target power, or events per series-hour (rate)
    hits: int  # covered / rejected / found / events
    trials: float  # data sets (series-hours for a rate)
    width: float = math.nan  # median interval width (intervals)
    unit: str = ""  # the unit of variation the estimator must respect
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.estimator} | {self.generator}"

    @property
    def achieved(self) -> float:
        return self.hits / self.trials if self.trials else math.nan

    @property
    def se(self) -> float:
        """Monte Carlo SE at the nominal value (binomial; Poisson for a rate)."""
        if self.kind == "rate":
            return math.sqrt(max(self.hits, 1)) / self.trials if self.trials else math.nan
        return math.sqrt(self.nominal * (1.0 - self.nominal) / max(self.trials, 1.0))

    @property
    def upper95(self) -> float:
        """Rates: the exact one-sided 95 % Poisson upper bound of the events per unit."""
        return float(sps.chi2.ppf(0.95, 2 * (self.hits + 1)) / 2.0 / self.trials) if self.trials else math.inf

    @property
    def passed(self) -> bool:
        if not self.trials:
            return False
        if self.kind == "test":
            return self.achieved <= self.nominal + 3.0 * self.se
        if self.kind == "rate":
            return self.upper95 <= self.nominal
        return self.achieved >= self.nominal - 3.0 * self.se

    def as_dict(self) -> dict[str, Any]:
        return {"estimator": self.estimator, "generator": self.generator, "kind": self.kind,
                "nominal": self.nominal, "achieved": self.achieved, "mc_se": self.se,
                "hits": self.hits, "trials": self.trials, "median_width": self.width,
                "unit": self.unit, "passed": self.passed, "note": self.note,
                **({"upper95": self.upper95} if self.kind == "rate" else {})}


def n_of(base: int, scale: float, least: int = 20) -> int:
    """A row's number of data sets: ``base`` scaled, at least ``least``."""
    return max(least, round(base * scale))


def adapt_pair_events(t_s: FloatArray, rtt_us: FloatArray, round_s: float, window_s: float) -> list[Any]:
    """The echo report's per-pair events (kind, size, size_low, size_high, p_value, time_s)."""
    return list(detect_pair_events(t_s, rtt_us, round_s, window_s, round_index=np.arange(len(t_s))))


def default_window_s(duration_s: float) -> float:
    """The echo workload's default window for a trial of ``duration_s``."""
    return window_of({"duration": duration_s})


def link_event_counts(draw: Callable[[int], tuple[FloatArray, FloatArray]], series: int, rate_hz: float,
                      window_s: float, chunk: int = 50) -> tuple[int, int, int]:
    """Link spikes, link steps and link events with a NaN size interval on ``series`` series,
    drawn ``chunk`` at a time by ``draw(k)`` (send times, RTTs ``(k, n)``), each through
    :func:`adapt_pair_events`."""
    spikes = steps = nan = 0
    for start in range(0, series, chunk):
        t, y = draw(min(chunk, series - start))
        for v in y:
            for e in adapt_pair_events(t, v, 1.0 / rate_hz, window_s):
                if e.origin != "link":
                    continue
                spikes += e.kind == "spike"
                steps += e.kind == "step"
                nan += not (math.isfinite(e.size_low) and math.isfinite(e.size_high))
    return spikes, steps, nan
