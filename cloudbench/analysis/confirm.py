"""Repetition analysis in the style of CONFIRM (Maricq et al., OSDI'18), done exactly.

Repetitions are the unit of confidence. Every workload reduces a repetition to
rows of ``summaries.parquet`` (one value per metric and group), which
:mod:`cloudbench.report.confirm` loads with each repetition's key metadata; this module

1. finds the pooled repetitions whose metadata differ (:func:`pooling_mismatches`; the
   report refuses them unless told to),
2. gives the exact order-statistic CI of any quantile (:mod:`.stats`),
3. runs the convergence analysis (:mod:`.convergence`): the smallest ``n`` whose mean CI
   over random subsets lies within ±e of the mean estimate *and stays there* for every
   larger size; and when the data never get there, a labelled prediction from the 1/√n
   law (:mod:`.prediction`),
4. runs the assumption checks (:mod:`.checks`) in repetition order.

Differences from CONFIRM: exact binomial ranks with coverage >= level (CONFIRM's
``n/2 ∓ 1.96√n/2`` ranks cover as little as 92 % at n = 12), any quantile, "and
stays inside" instead of the first size that fits, a prediction past the data.

Numbers and dataclasses only: the words for them (notes, warnings, reasons, the pooling
refusal) are in :mod:`cloudbench.report.confirm_text`. Each result serializes its own
numbers (``to_json``/``from_json``); the report adds the words to make ``confirm.json``.
"""

from __future__ import annotations

import enum
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.checks import CheckResult, run_checks
from cloudbench.analysis.convergence import (
    Convergence,
    ConvergenceJSON,
    convergence,
    finite_or_none,
    size_grid,
    smallest_stable_n,
)
from cloudbench.analysis.prediction import (
    SLOPE_BOOT_SIZES,
    SLOPE_BOOT_SUBSETS,
    Prediction,
    PredictionJSON,
    SlopeBootstrap,
    law_reliability,
    prediction_from_json,
    slope_bootstrap,
)
from cloudbench.analysis.quantiles import quantile_name
from cloudbench.analysis.stats import QuantileCI, QuantileRanks, fit_sqrt_law, min_n_for_ci, quantile_ci
from cloudbench.errors import AnalysisError

FloatArray = NDArray[np.float64]
ProgressFn = Callable[[int, int], None]
"""Called as ``progress(done, total)``; a unit is one convergence size or one
series' assumption checks."""


# --------------------------------------------------------------------------- data

@dataclass(frozen=True, order=True)
class RepetitionRef:
    """One repetition of one run."""

    run_id: str
    repetition: int

    def __str__(self) -> str:
        return f"{self.run_id}#{self.repetition}"


@dataclass(frozen=True)
class RepetitionValue:
    """One value of one (metric, group) for one repetition, with its key metadata."""

    ref: RepetitionRef
    workload: str
    metric: str
    group: str
    value: float
    unit: str
    n_obs: int
    metadata: Mapping[str, str]


@dataclass(frozen=True, order=True)
class SeriesKey:
    """What a series is: a workload's metric in one group."""

    workload: str
    metric: str
    group: str


@dataclass(frozen=True)
class Series:
    """The values of one (workload, metric, group), one per repetition, in run order."""

    key: SeriesKey
    unit: str
    refs: tuple[RepetitionRef, ...]
    values: FloatArray
    dropped: tuple[RepetitionRef, ...] = ()
    mismatches: tuple[MetadataMismatch, ...] = ()

    @property
    def n(self) -> int:
        """The number of (finite) values."""
        return len(self.values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Series):
            return NotImplemented
        return ((self.key, self.unit, self.refs, self.dropped, self.mismatches)
                == (other.key, other.unit, other.refs, other.dropped, other.mismatches)
                and np.array_equal(self.values, other.values, equal_nan=True))

    __hash__ = None  # type: ignore[assignment]



@dataclass(frozen=True)
class MetadataMismatch:
    """A metadata key whose value differs between repetitions (values in first-seen order)."""

    key: str
    values: dict[str, tuple[RepetitionRef, ...]]


@dataclass
class Dataset:
    """Per-repetition values of a campaign (or one run), pooled under the guard.

    ``path``: where they were read (as given); ``allow_mixed``: whether repetitions with
    differing key metadata were pooled anyway (their differences in ``mismatches``)."""

    path: str
    campaign: str
    runs: list[str]
    values: list[RepetitionValue]
    metadata: dict[str, str]
    mismatches: dict[SeriesKey, list[MetadataMismatch]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    allow_mixed: bool = False

    def series(self) -> list[Series]:
        """Values grouped per (workload, metric, group), ordered by run then repetition.

        Non-finite values are dropped (and listed), never silently pooled.
        """
        by_key: dict[SeriesKey, list[RepetitionValue]] = defaultdict(list)
        for v in self.values:
            by_key[SeriesKey(v.workload, v.metric, v.group)].append(v)
        run_pos = {run: i for i, run in enumerate(self.runs)}
        out = []
        for key in sorted(by_key):
            rows = sorted(by_key[key], key=lambda r: (run_pos[r.ref.run_id], r.ref.repetition))
            keep = [r for r in rows if math.isfinite(r.value)]
            dropped = tuple(r.ref for r in rows if not math.isfinite(r.value))
            units = sorted({r.unit for r in keep}) or [""]
            out.append(
                Series(
                    key=key,
                    unit=units[0] if len(units) == 1 else "/".join(units),
                    refs=tuple(r.ref for r in keep),
                    values=np.array([r.value for r in keep], dtype=np.float64),
                    dropped=dropped,
                    mismatches=tuple(self.mismatches.get(key, ())),
                )
            )
        return out


def find_mismatches(metas: Mapping[RepetitionRef, Mapping[str, str]]) -> list[MetadataMismatch]:
    """Key metadata values that differ between repetitions (first seen value first).

    Keys are reported in the order of the metadata mappings (the store's
    ``POOLING_METADATA`` order). A key is compared among the repetitions that
    have it: a repetition without it (a manifest that predates the key) is not
    evidence of a difference; the caller says so in a note.
    """
    out = []
    refs = sorted(metas)
    keys = list(dict.fromkeys(k for ref in refs for k in metas[ref]))
    for key in keys:
        groups: dict[str, list[RepetitionRef]] = {}
        for ref in refs:
            if key in metas[ref]:
                groups.setdefault(metas[ref][key], []).append(ref)
        if len(groups) > 1:
            out.append(MetadataMismatch(key, {v: tuple(r) for v, r in groups.items()}))
    return out


def pooling_mismatches(series_refs: Mapping[SeriesKey, Iterable[RepetitionRef]],
                       metas: Mapping[RepetitionRef, Mapping[str, str]]
                       ) -> dict[SeriesKey, list[MetadataMismatch]]:
    """Per series, the key metadata its pooled repetitions differ in (series without any left out).

    Checked metadata as pyperf checks its benchmarks' metadata before it joins them: the
    repetitions pooled into one series are exchangeable only when every key of the store's
    ``POOLING_METADATA`` matches (names, the vm_type definitions, ``wan:`` settings, workload
    parameters with defaults, swept values, worker versions). Each series is checked on the
    repetitions it pools, so a run that adds only other metrics does not block it.
    """
    found: dict[SeriesKey, list[MetadataMismatch]] = {}
    for key, refs in series_refs.items():
        ms = find_mismatches({r: metas[r] for r in refs})
        if ms:
            found[key] = ms
    return found


# ------------------------------------------------------------------------ targets


class Outcome(enum.Enum):
    """How a target was settled (:func:`evaluate_target`)."""

    NO_CI = "no_ci"  # the series is too short for any CI
    REACHED = "reached"  # within ±e from ``n_needed`` on
    NO_FIT = "no_fit"  # not reached, and too few sizes to fit the 1/√n law
    PREDICTED = "predicted"  # not reached: ``prediction`` from the 1/√n law


class TargetJSON(TypedDict):
    """A target in ``confirm.json`` (its ``note`` and its prediction's ``reason`` are worded by
    the report)."""

    error: float
    reached: bool
    n_needed: int | None
    prediction: PredictionJSON | None


@dataclass(frozen=True)
class Target:
    """Outcome for one error bound ``e`` on a series of ``n`` repetitions (``n_for_ci``: the
    fewest with which the quantile has a CI at all)."""

    error: float
    n_needed: int | None
    prediction: Prediction | None
    outcome: Outcome
    n: int
    n_for_ci: int

    @property
    def reached(self) -> bool:
        """Whether the measured repetitions reach the bound."""
        return self.n_needed is not None

    def to_json(self) -> TargetJSON:
        """The target's numbers as ``confirm.json`` holds them."""
        return {"error": self.error, "reached": self.reached, "n_needed": self.n_needed,
                "prediction": None if self.prediction is None else self.prediction.to_json()}


def evaluate_target(conv: Convergence | None, n: int, rel_error: float, p: float,
                    level: float, boot: SlopeBootstrap | None = None,
                    checks: Sequence[CheckResult] = ()) -> Target:
    """n needed for ``rel_error``, or a labelled 1/√n-law prediction."""
    n_ci = min_n_for_ci(p, level)
    if conv is None or len(conv.sizes) == 0:
        return Target(rel_error, None, None, Outcome.NO_CI, n, n_ci)
    found = smallest_stable_n(conv, rel_error)
    if found is not None:
        return Target(rel_error, found, None, Outcome.REACHED, n, n_ci)
    fit = fit_sqrt_law(conv.sizes, conv.relative_half_width)
    if fit is None:
        return Target(rel_error, None, None, Outcome.NO_FIT, n, n_ci)
    need = fit.required_n(rel_error)
    slope_sd = boot.slope_sd if boot is not None else math.nan
    n_low, n_high = boot.n_range(rel_error) if boot is not None else (0, 0)
    slope_lo, slope_hi = boot.slope_interval() if boot is not None else (math.nan, math.nan)
    reliability = law_reliability(fit, (slope_lo, slope_hi), checks)
    pred = Prediction(need, max(0, need - n), fit, reliability, slope_sd, n_low, n_high,
                      slope_lo, slope_hi)
    return Target(rel_error, None, pred, Outcome.PREDICTED, n, n_ci)


def target_from_json(doc: TargetJSON, conv: Convergence | None, n: int, n_for_ci: int,
                     checks: Sequence[CheckResult]) -> Target:
    """A target back from :meth:`Target.to_json`, given its series' curve, length and checks."""
    if doc["n_needed"] is not None:
        return Target(doc["error"], doc["n_needed"], None, Outcome.REACHED, n, n_for_ci)
    if conv is None or len(conv.sizes) == 0:
        return Target(doc["error"], None, None, Outcome.NO_CI, n, n_for_ci)
    fit = fit_sqrt_law(conv.sizes, conv.relative_half_width)
    if doc["prediction"] is None or fit is None:
        return Target(doc["error"], None, None, Outcome.NO_FIT, n, n_for_ci)
    pred = prediction_from_json(doc["prediction"], fit, checks)
    return Target(doc["error"], None, pred, Outcome.PREDICTED, n, n_for_ci)


# ----------------------------------------------------------------------- analysis


class ParamsJSON(TypedDict):
    """``params`` of ``confirm.json`` (the random subsets per size under ``trials``)."""

    quantile: float
    quantile_name: str
    level: float
    errors: list[float]
    trials: int
    seed: int
    max_sizes: int
    alpha: float
    allow_mixed: bool


@dataclass(frozen=True)
class ConfirmParams:
    """What to estimate (a quantile at a level), the error bounds, and how many random subsets
    per size (``subsets``)."""

    quantile: float = 0.5
    level: float = 0.95
    errors: tuple[float, ...] = (0.01, 0.05)
    subsets: int = 200
    seed: int = 0
    max_sizes: int = 1000
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if not 0 < self.quantile < 1:
            raise AnalysisError(f"quantile must be in (0, 1), got {self.quantile}")
        if not 0 < self.level < 1:
            raise AnalysisError(f"confidence level must be in (0, 1), got {self.level}")
        if not self.errors or any(not 0 < e < 1 for e in self.errors):
            raise AnalysisError(f"error bounds must be in (0, 1), got {list(self.errors)}")
        if self.subsets < 1:
            raise AnalysisError(f"subsets must be >= 1, got {self.subsets}")
        if self.seed < 0:
            raise AnalysisError(f"seed must be >= 0, got {self.seed}")
        if self.max_sizes < 2:
            raise AnalysisError(f"max_sizes must be >= 2, got {self.max_sizes}")

    def to_json(self, allow_mixed: bool) -> ParamsJSON:
        """The parameters as ``confirm.json`` holds them, with the pooling guard's setting."""
        return {"quantile": self.quantile, "quantile_name": quantile_name(self.quantile),
                "level": self.level, "errors": list(self.errors), "trials": self.subsets,
                "seed": self.seed, "max_sizes": self.max_sizes, "alpha": self.alpha,
                "allow_mixed": allow_mixed}

    @classmethod
    def from_json(cls, doc: ParamsJSON) -> ConfirmParams:
        """The parameters back from :meth:`to_json`."""
        return cls(doc["quantile"], doc["level"], tuple(doc["errors"]), doc["trials"], doc["seed"],
                   doc["max_sizes"], doc["alpha"])


class CIJSON(TypedDict):
    """``ci`` of a series in ``confirm.json``: the bounds and their 1-based ranks."""

    lower: float | None
    upper: float | None
    j: int
    k: int
    coverage: float


class RepetitionJSON(TypedDict):
    """One repetition's value of a series in ``confirm.json``."""

    run_id: str
    repetition: int
    value: float | None


class CheckJSON(TypedDict):
    """One assumption check of a series in ``confirm.json``."""

    name: str
    method: str
    status: str
    message: str
    values: dict[str, float | None]


class SeriesJSON(TypedDict):
    """A series' numbers in ``confirm.json`` (the report adds ``warnings`` and ``figure``)."""

    workload: str
    metric: str
    group: str
    unit: str
    n: int
    estimate: float | None
    ci: CIJSON | None
    ci_note: str
    n_required_for_ci: int
    relative_half_width: float | None
    targets: list[TargetJSON]
    checks: list[CheckJSON]
    dropped: list[str]
    repetitions: list[RepetitionJSON]
    convergence: ConvergenceJSON | None


@dataclass(frozen=True)
class SeriesResult:
    """One series analysed: its exact CI, convergence curve, targets and checks."""

    series: Series
    ci: QuantileCI
    convergence: Convergence | None
    targets: tuple[Target, ...]
    checks: tuple[CheckResult, ...]

    def to_json(self) -> SeriesJSON:
        """The series' numbers as ``confirm.json`` holds them."""
        s, ci = self.series, self.ci
        return {
            "workload": s.key.workload, "metric": s.key.metric, "group": s.key.group,
            "unit": s.unit, "n": s.n, "estimate": finite_or_none(ci.estimate),
            "ci": None if ci.ranks is None else {
                "lower": ci.lower, "upper": ci.upper, "j": ci.ranks.j, "k": ci.ranks.k,
                "coverage": ci.ranks.coverage},
            "ci_note": ci.note, "n_required_for_ci": ci.n_required,
            "relative_half_width": finite_or_none(ci.relative_half_width),
            "targets": [t.to_json() for t in self.targets],
            "checks": [{"name": c.name, "method": c.method, "status": c.status, "message": c.message,
                        "values": {k: finite_or_none(v) for k, v in c.values.items()}}
                       for c in self.checks],
            "dropped": [str(ref) for ref in s.dropped],
            "repetitions": [{"run_id": ref.run_id, "repetition": ref.repetition,
                             "value": finite_or_none(float(v))}
                            for ref, v in zip(s.refs, s.values, strict=True)],
            "convergence": None if self.convergence is None else self.convergence.to_json(),
        }

    @classmethod
    def from_json(cls, doc: SeriesJSON, params: ConfirmParams) -> SeriesResult:
        """The series back from :meth:`to_json` (metadata mismatches are not stored as data)."""
        refs = tuple(RepetitionRef(r["run_id"], r["repetition"]) for r in doc["repetitions"])
        dropped = tuple(RepetitionRef(*_split_ref(d)) for d in doc["dropped"])
        values = np.array([math.nan if r["value"] is None else r["value"] for r in doc["repetitions"]],
                          dtype=np.float64)
        series = Series(SeriesKey(doc["workload"], doc["metric"], doc["group"]), doc["unit"], refs,
                        values, dropped)
        c = doc["ci"]
        ci = QuantileCI(doc["n"], params.quantile, params.level,
                        math.nan if doc["estimate"] is None else doc["estimate"],
                        None if c is None else c["lower"], None if c is None else c["upper"],
                        None if c is None else QuantileRanks(doc["n"], params.quantile, params.level,
                                                           c["j"], c["k"], c["coverage"]),
                        doc["n_required_for_ci"], doc["ci_note"])
        conv = None if doc["convergence"] is None else Convergence.from_json(doc["convergence"])
        checks = tuple(CheckResult(x["name"], x["method"], x["status"], x["message"],  # type: ignore[arg-type]
                                   {k: math.nan if v is None else v for k, v in x["values"].items()})
                       for x in doc["checks"])
        n_ci = min_n_for_ci(params.quantile, params.level)
        targets = tuple(target_from_json(t, conv, series.n, n_ci, checks) for t in doc["targets"])
        return cls(series, ci, conv, targets, checks)


def _split_ref(text: str) -> tuple[str, int]:
    run_id, _, rep = text.rpartition("#")
    return run_id, int(rep)


@dataclass(frozen=True)
class ConfirmResult:
    """The analysis of a campaign: its dataset, the parameters, one result per series."""

    dataset: Dataset
    params: ConfirmParams
    series: tuple[SeriesResult, ...]

    @property
    def quantile_name(self) -> str:
        """``median``, ``p90`` ... (:func:`.quantiles.quantile_name`)."""
        return quantile_name(self.params.quantile)


def _convergence_by_length(series: Sequence[Series], params: ConfirmParams,
                           progress: ProgressFn | None) -> tuple[dict[int, Convergence], int, int]:
    """Curves of every series long enough for a CI, series of one length in one vectorised call;
    with the progress units done and in all."""
    p, level = params.quantile, params.level
    n_min = min_n_for_ci(p, level)
    by_len: dict[int, list[int]] = defaultdict(list)
    for i, s in enumerate(series):
        if s.n >= n_min:
            by_len[s.n].append(i)
    # Progress units: one per convergence size, one per series' checks.
    total = sum(len(size_grid(n_min, n, params.max_sizes)) for n in by_len) + len(series)
    done = 0
    convs: dict[int, Convergence] = {}
    for _, members in sorted(by_len.items()):
        stacked = np.sort(np.stack([series[i].values for i in members]), axis=1)

        def tick(k: int, base: int = done) -> None:
            if progress is not None:
                progress(base + k, total)

        curves = convergence(stacked, p, level, subsets=params.subsets, seed=params.seed,
                             max_sizes=params.max_sizes, progress=tick)
        done += len(curves[0].sizes)
        convs.update(zip(members, curves, strict=True))
    return convs, done, total


def analyse_series(series: Sequence[Series], params: ConfirmParams, *,
                   progress: ProgressFn | None = None) -> list[SeriesResult]:
    """CI, convergence, targets and checks for each series (see module docstring)."""
    p, level = params.quantile, params.level
    convs, done, total = _convergence_by_length(series, params, progress)
    out = []
    for i, s in enumerate(series):
        ci = quantile_ci(s.values, p, level)
        conv = convs.get(i)
        boot = None
        if conv is not None and any(smallest_stable_n(conv, e) is None for e in params.errors):
            boot = slope_bootstrap(s.values, p, level, seed=params.seed,
                                   subsets=min(params.subsets, SLOPE_BOOT_SUBSETS),
                                   max_sizes=min(params.max_sizes, SLOPE_BOOT_SIZES))
        checks = tuple(run_checks(s.values, params.alpha))
        targets = tuple(evaluate_target(conv, s.n, e, p, level, boot, checks)
                        for e in params.errors)
        done += 1
        if progress is not None:
            progress(done, total)
        out.append(SeriesResult(s, ci, conv, targets, checks))
    return out


def analyse(dataset: Dataset, params: ConfirmParams,
            progress: ProgressFn | None = None) -> ConfirmResult:
    """The whole repetition analysis of a loaded campaign."""
    results = analyse_series(dataset.series(), params, progress=progress)
    return ConfirmResult(dataset, params, tuple(results))
