"""The adversarial generators put in what they say (cloudbench.testing.adversarial)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cloudbench.testing import adversarial as gen


@pytest.mark.parametrize("df", [None, 4.0])
def test_ar1_has_its_coefficient_and_marginal_sd(df: float | None) -> None:
    x = gen.ar1(np.random.default_rng(0), (400, 500), 0.7, 3.0, df=df)
    lag1 = np.mean([np.corrcoef(v[:-1], v[1:])[0, 1] for v in x])
    assert lag1 == pytest.approx(0.7, abs=0.02)
    assert np.std(x[:, 0]) == pytest.approx(3.0, rel=0.1)  # stationary from the first value
    assert np.std(x) == pytest.approx(3.0, rel=0.05)


def test_repetition_truths() -> None:
    rng = np.random.default_rng(1)
    for kind in ("iid", "heavy", "run_effects", "ar1", "two_regimes"):
        r = gen.repetitions(rng, 2000, 200, kind)
        emp = float(np.median(r.values))
        assert emp == pytest.approx(float(r.median[0]), rel=0.01), kind
    h = gen.repetitions(rng, 10, 20, "halves")
    assert np.all(np.abs(h.values[:, 10:].mean(axis=1) - 130.0) < 10)
    d = gen.repetitions(rng, 10, 20, "drift")
    assert math.isnan(d.median[0])
    # run effects: repetitions of one run correlate (ICC 1/2), of different runs not
    r = gen.repetitions(rng, 4000, 6, "run_effects")
    assert np.corrcoef(r.values[:, 0], r.values[:, 1])[0, 1] == pytest.approx(0.5, abs=0.05)
    assert abs(np.corrcoef(r.values[:, 2], r.values[:, 3])[0, 1]) < 0.05


def test_hourly_campaign_runs_days_and_repetitions() -> None:
    c = gen.hourly_campaign(np.random.default_rng(2), 3000, run_sd=5.0, rep_sd=5.0, day_sd=0.0)
    assert c.run.max() == 7 * 24 - 1 and c.day.max() == 6
    assert np.all(c.present.reshape(3000, 168, 3).sum(axis=2) >= 2)
    assert set(np.unique(c.present.reshape(3000, 168, 3).sum(axis=2))) == {2, 3}
    # the first run is on a Monday (weekday = day index % 7)
    assert (c.t[0] - gen.MONDAY) < 3600
    # two repetitions of one run share its effect: correlation 1/2
    assert np.corrcoef(c.values[:, 0], c.values[:, 1])[0, 1] == pytest.approx(0.5, abs=0.06)
    assert abs(np.corrcoef(c.values[:, 0], c.values[:, 3])[0, 1]) < 0.06


def test_rtt_series_outliers_and_rounding() -> None:
    t, y = gen.rtt_series(np.random.default_rng(3), 20, 1000.0, 100.0)
    assert len(t) == 100_000 and np.all(np.diff(t) > 0)
    assert np.all(y == np.round(y)) and y.min() >= 100.0
    rto = int((y > 100_000).sum())  # 2e6 echoes at 1e-4: 200 ± 14
    assert 150 < rto < 250


@pytest.mark.parametrize("noise", ["iid", "ar1"])
def test_drain_counters_hold_the_bucket(noise: str) -> None:
    rng = np.random.default_rng(4)
    high = np.array([200e6, 300e6])
    low = np.array([50e6, 30e6])
    tokens = np.array([3.0, 4.0]) * (high - low)
    seconds = np.array([9.3, 10.7])
    for dt in (0.25, 1.0):
        ds = gen.drain_counters(rng, high, low, tokens, seconds, dt, noise=noise)  # type: ignore[arg-type]
        for i, d in enumerate(ds):
            length = d.t_end - d.t_start
            assert d.t_end[-1] == pytest.approx(seconds[i])
            assert length[-1] == pytest.approx(seconds[i] % dt)  # the partial last interval ...
            assert np.all(length[:-1] == pytest.approx(dt))
            rates = d.nbytes * 8 / length
            # ... holds its own length of data: its rate is the low rate, not a fraction of it
            assert rates[-1] == pytest.approx(low[i], rel=0.1)
            # after the 0.3 s ramp, before the bucket empties: the high rate
            assert np.median(rates[math.ceil(0.5 / dt): int(2.5 / dt)]) == pytest.approx(high[i], rel=0.05)
            # the bucket empties later than tokens / (high - low) by the slow-start ramp
            ideal = tokens[i] / (high[i] - low[i])
            assert ideal < d.empty_s < ideal + 0.3
            assert d.nbytes.sum() * 8 == pytest.approx(tokens[i] + low[i] * seconds[i] - d.tokens_left, rel=0.02)
