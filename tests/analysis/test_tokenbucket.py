"""Token-bucket drain analysis: a simulated bucket with known parameters, and a real drain."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from cloudbench.analysis.tokenbucket import (
    MIN_DEPENDENCE_N,
    PRIOR_RHO,
    adapt_window,
    dependence_factor,
    drained_at,
    estimate_drain,
    estimate_refill,
    finite_factor,
    level_error,
    level_interval,
    uta_drained,
    volume_error,
    volume_sd,
)
from cloudbench.spec.vmtypes import BUILTIN_VM_TYPES, expected_goodput
from cloudbench.workers import throughput as throughput_worker
from cloudbench.workloads.throughput.reader import data_start_ns, parse_throughput_record, parse_tool
from tests.paths import DATA as TESTS_DATA

DATA = TESTS_DATA / "tput"


def simulate(high: float, low: float, tokens: float, seconds: float, dt: float,
             noise: float = 0.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fluid token bucket: send at ``high`` while ``tokens`` (bits) last, drained at
    high − low, then at ``low``. Returns interval starts, ends and bytes."""
    tau = tokens / (high - low)
    n = round(seconds / dt)
    t0 = np.arange(n) * dt
    t1 = t0 + dt
    h = np.clip(np.minimum(t1, tau) - t0, 0.0, dt)  # time at high rate in each interval
    bits = high * h + low * (dt - h)
    if noise:
        bits = bits * np.random.default_rng(seed).normal(1.0, noise, n)
    return t0, t1, bits / 8.0


def test_uta_rule_and_window_adaptation() -> None:
    assert uta_drained([200.0] * 10 + [50.0] * 10, 10)
    assert drained_at([200.0] * 10 + [50.0] * 10, 10) == 20
    assert not uta_drained([200.0] * 10 + [170.0] * 10, 10)  # 170 > 0.75 × 200
    assert not uta_drained([100.0] * 20, 10)
    assert adapt_window(60, 10) == 10 and adapt_window(12, 10) == 4 and adapt_window(2, 10) == 1
    # 12 intervals with windows of 10 would overlap; adapted to 4 they see the drop
    assert uta_drained([200.0] * 5 + [50.0] * 7, 10)
    assert not uta_drained([200.0] * 9 + [50.0] * 3, 10)  # the drop is not held long enough
    # a budget shorter than the window: drained once 10 low intervals follow 4 high ones
    assert drained_at([200.0] * 4 + [50.0] * 26, 10) == 14
    # the low level must hold for the whole last window
    assert not uta_drained([200.0] * 4 + [50.0] * 8 + [200.0] + [50.0] * 8 + [200.0] * 10, 10)


def test_worker_applies_the_same_rule_online() -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):
        n_high = int(rng.integers(1, 15))
        rates = list(rng.normal(200.0, 20.0, n_high)) + list(rng.normal(60.0, 15.0, 20))
        online = next((m for m in range(1, len(rates) + 1)
                       if throughput_worker.drained(rates[:m], 10, 0.75)), None)
        assert online == drained_at(rates, 10, 0.75)


@pytest.mark.parametrize(("dt", "budget_mib"), [(1.0, 75), (0.5, 75), (1.0, 300)])
def test_drain_recovers_the_bucket_exactly_without_noise(dt: float, budget_mib: int) -> None:
    high, low, tokens = 200e6, 50e6, budget_mib * 2**20 * 8
    est = estimate_drain(*simulate(high, low, tokens, 40.0, dt), window_intervals=round(10 / dt))
    assert est.drained
    assert est.high is not None and est.low is not None
    assert est.time_to_empty is not None and est.budget is not None
    assert est.high.value == pytest.approx(high)
    assert est.low.value == pytest.approx(low)
    assert est.time_to_empty.value == pytest.approx(tokens / (high - low))
    assert est.budget.value == pytest.approx(tokens)
    assert est.volume_before_bits == pytest.approx(high * tokens / (high - low))


def test_drain_with_noise_and_its_intervals() -> None:
    high, low, tokens = 1e9, 250e6, 4 * 2**30 * 8  # ≈ 45.8 s at high rate
    covered = {"high": 0, "low": 0}
    for seed in range(20):
        est = estimate_drain(*simulate(high, low, tokens, 120.0, 1.0, noise=0.03, seed=seed),
                             window_intervals=10, n_boot=400, seed=seed)
        assert est.drained and est.time_to_empty and est.budget and est.high and est.low
        assert est.time_to_empty.value == pytest.approx(tokens / (high - low), rel=0.05)
        assert est.budget.value == pytest.approx(tokens, rel=0.05)
        assert est.high.sd > 0 and est.high.low < est.high.value < est.high.high
        covered["high"] += est.high.low <= high <= est.high.high
        covered["low"] += est.low.low <= low <= est.low.high
        assert est.high_rate_sd == pytest.approx(0.03 * high, rel=0.4)
    # Student-t intervals of i.i.d. intervals: 95 %; 17 of 20 has probability 0.98
    assert covered["high"] >= 17 and covered["low"] >= 17


def test_no_drain_under_a_plain_cap() -> None:
    rng = np.random.default_rng(1)
    rates = rng.normal(95e6, 1e6, 30)
    t0 = np.arange(30.0)
    est = estimate_drain(t0, t0 + 1, rates / 8, window_intervals=10)
    assert not est.drained and est.high is None and est.time_to_empty is None


def test_refill_from_a_second_drain() -> None:
    high, low, tokens = 200e6, 50e6, 75 * 2**20 * 8
    first = estimate_drain(*simulate(high, low, tokens, 20.0, 0.5), window_intervals=4)
    rest = 6.0  # refills low × rest = 300 Mbit, 2 s of high rate
    second = simulate(high, low, low * rest, 8.0, 0.5)
    rf = estimate_refill(first, *second, rest_s=rest)
    assert rf.refill is not None and rf.budget is not None
    assert rf.refill.value == pytest.approx(low)
    assert rf.high_time == pytest.approx(low * rest / (high - low))
    assert not rf.saturated


def test_refill_of_a_full_bucket_is_flagged_as_a_lower_bound() -> None:
    high, low, tokens = 200e6, 50e6, 100e6 * 8
    first = estimate_drain(*simulate(high, low, tokens, 20.0, 0.5), window_intervals=4)
    second = simulate(high, low, tokens, 20.0, 0.5)  # a rest long enough to refill it all
    rf = estimate_refill(first, *second, rest_s=60.0)
    assert rf.saturated and any("lower bound" in n for n in rf.notes)
    assert rf.refill is not None and rf.refill.value == pytest.approx(tokens / 60.0)


def test_refill_needs_a_first_drain() -> None:
    t0 = np.arange(10.0)
    flat = estimate_drain(t0, t0 + 1, np.full(10, 1e6), window_intervals=3)
    rf = estimate_refill(flat, t0, t0 + 1, np.full(10, 1e6), rest_s=5.0)
    assert rf.refill is None and rf.notes


def test_real_drain_behind_tbf_matches_the_configured_bucket() -> None:
    """Recorded on the testbed behind TBF 200/50 Mbit, 75 MiB, with a 5 s rest."""
    rec = parse_throughput_record((DATA / "record_nuttcp_drain_tb_small.jsonl").read_text())
    parts = []
    for b in rec.bursts:
        run = parse_tool("nuttcp", b.text)
        base = data_start_ns(b, run) / 1e9
        parts.append((np.array([base + iv.start_s for iv in run.intervals]),
                      np.array([base + iv.end_s for iv in run.intervals]),
                      np.array([float(iv.bytes) for iv in run.intervals])))
    exp = expected_goodput(BUILTIN_VM_TYPES["local.tb-small"])
    est = estimate_drain(*parts[0], window_intervals=4)
    assert est.drained and est.high and est.low and est.time_to_empty and est.budget
    assert est.high.value == pytest.approx(exp["high_rate"], rel=0.02)
    assert est.low.value == pytest.approx(exp["low_rate"], rel=0.02)
    assert est.time_to_empty.value == pytest.approx(exp["time_to_empty"], rel=0.02)
    assert est.budget.value == pytest.approx(exp["budget_bits"], rel=0.02)
    rest = float(parts[1][0][0] - parts[0][1][-1])
    rf = estimate_refill(est, *parts[1], rest_s=rest)
    assert rf.refill is not None
    assert rf.refill.value == pytest.approx(exp["refill_rate"], rel=0.05)


def test_level_interval_is_students_t_of_the_interval_rates() -> None:
    """Three intervals (no drift term under four, no dependence under eight): the
    interval is scipy's t interval of their mean, far wider than their range."""
    x = np.array([200e6, 203e6, 198e6])
    err = level_error(x, float(x.mean()))
    assert err.df == 2 and err.se == pytest.approx(float(np.std(x, ddof=1)) / np.sqrt(3))
    est = level_interval(float(x.mean()), err)
    lo, hi = sps.t.interval(0.95, 2, loc=x.mean(), scale=sps.sem(x))
    assert (est.low, est.high) == pytest.approx((lo, hi))
    assert est.high - est.low > 2 * np.ptp(x)  # a percentile bootstrap gives at most the range


def test_dependence_factor_reads_ar1_and_not_iid() -> None:
    rng = np.random.default_rng(4)
    phi = 0.6
    e = rng.normal(0.0, 1.0, 4000)
    ar = np.empty_like(e)
    ar[0] = e[0]
    for i in range(1, len(e)):
        ar[i] = phi * ar[i - 1] + e[i]
    assert dependence_factor(100.0 + ar) == pytest.approx((1 + phi) / (1 - phi), rel=0.15)
    # i.i.d.: about 1; the lag-2 reading (√ρ̂₂, see below) errs a little wide, never narrow
    assert 1.0 <= dependence_factor(100.0 + e) < 1.4
    assert dependence_factor(100.0 + ar[: MIN_DEPENDENCE_N - 1]) == 1.0  # too few to tell
    # pooled over two levels: each relative to its own mean
    assert dependence_factor(100.0 + ar[:30], 1000.0 + 10.0 * ar[30:60]) > 1.5
    # larger intervals scale the relative noise of a sum of volumes
    err = level_error(100.0 + e[:20], 100.0)
    assert volume_sd(np.full(4, 100.0), err) == pytest.approx(err.rel_sd * 200.0)


def test_a_level_of_one_interval_has_no_interval() -> None:
    """Emptied 1.5 s into a drain sampled every second: one clean high interval."""
    high, low = 200e6, 50e6
    est = estimate_drain(*simulate(high, low, 1.5 * (high - low), 12.0, 1.0, noise=0.02, seed=3),
                         window_intervals=2)
    assert est.n_high == 1 and est.high is not None and est.low is not None
    assert np.isnan(est.high.low) and np.isnan(est.high.high)
    assert np.isfinite(est.low.low) and any("no interval" in n for n in est.notes)
    # the budget (V(t_b) − low·t_b) still has its interval
    assert est.budget is not None and est.budget.low < 1.5 * (high - low) < est.budget.high



def test_a_level_of_one_interval_borrows_one_intervals_error_not_a_means() -> None:
    """A single interval is as noisy as one interval of the other level (its relative
    SD), not as the mean of that level's n intervals (its relative standard error,
    √n smaller): the draws of the time to empty and budget rest on it."""
    rng = np.random.default_rng(7)
    low = 50e6 * (1.0 + 0.03 * rng.standard_normal(12))
    other = level_error(low, float(low.mean()))
    one = level_error(np.array([201e6]), 201e6, other=other)
    assert one.se == pytest.approx(other.rel_sd * 201e6)
    assert one.se > 1.5 * other.rel_se * 201e6  # a mean of 12 (with its drift term) is ~2x narrower
    assert one.df == other.df
    # and so in a drain: the high level of one interval
    high, lo = 200e6, 50e6
    est = estimate_drain(*simulate(high, lo, 1.5 * (high - lo), 12.0, 1.0, noise=0.02, seed=3),
                         window_intervals=2)
    assert est.n_high == 1 and est.high_error is not None and est.low_error is not None
    assert est.high_error.se == pytest.approx(est.low_error.rel_sd * est.high.value)


def test_dependence_reads_ar1_behind_counter_read_noise() -> None:
    """AR(1) rates (φ = 0.7) read through a counter read late at random: each read's
    error leaves one interval and lands in the next (a difference of read errors, lag-1
    correlation −½), which cancels in a level's mean. The mean's variance is the AR
    part's long-run one; ρ̂₁ alone read it as a factor of 1.5 (the old estimator: the
    high-rate interval covered 91-93 % on the adversarial drains), ρ₂ = φ² reads it."""
    rng = np.random.default_rng(7)
    n, phi, late_sd = 20000, 0.7, 0.6
    e = rng.normal(0.0, 1.0, n)
    ar = np.empty(n)
    ar[0] = e[0]
    for i in range(1, n):
        ar[i] = phi * ar[i - 1] + np.sqrt(1 - phi * phi) * e[i]
    late = rng.normal(0.0, late_sd, n + 1)
    x = 100.0 + ar + np.diff(late)
    # long-run variance of the mean (AR only) over the marginal variance of one interval
    truth = ((1 + phi) / (1 - phi)) / (1.0 + 2.0 * late_sd**2)
    assert dependence_factor(x) == pytest.approx(truth, rel=0.2)


def test_finite_factor_is_the_ar1_covariance_sum() -> None:
    """n·Var(mean)/σ² of n AR(1) values: 1ᵀΣ1/n with Σ = ρ^|i−j| (scipy's Toeplitz)."""
    from scipy.linalg import toeplitz

    for rho in (0.0, 0.35, 0.7):
        for n in (2, 3, 10, 40):
            sigma = toeplitz(rho ** np.arange(n))
            assert finite_factor(rho, n) == pytest.approx(float(sigma.sum()) / n)


def test_level_interval_covers_the_mean_of_ar1_intervals() -> None:
    """Ten AR(1) intervals (φ = 0.6) with ρ known: the interval (σ² from s² corrected for its
    bias under dependence, Satterthwaite's degrees of freedom) covers the level in ≥ 95 %
    − 3 MC SEs of 2,000 series; without the dependence it covers far less."""
    rng = np.random.default_rng(11)
    m, n, phi = 2000, 10, 0.6
    e = rng.normal(0.0, 1.0, (m, n))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0]
    for i in range(1, n):
        x[:, i] = phi * x[:, i - 1] + np.sqrt(1 - phi * phi) * e[:, i]
    x = 100.0 + x
    hits = {0.0: 0, phi: 0}
    for row in x:
        for rho in hits:
            iv = level_interval(float(row.mean()), level_error(row, float(row.mean()), rho))
            hits[rho] += iv.low <= 100.0 <= iv.high
    se = np.sqrt(0.95 * 0.05 / m)
    assert hits[phi] / m >= 0.95 - 3 * se
    assert hits[0.0] / m < 0.95 - 3 * se


def test_too_few_intervals_take_the_prior_dependence_and_say_so() -> None:
    """A drain sampled every second has a handful of clean intervals: too few to estimate
    their dependence, so ρ is taken as ``PRIOR_RHO`` and the notes say by how much the
    interval widened; sampled every 0.1 s (enough intervals) there is no such note."""
    high, low = 200e6, 50e6
    coarse = estimate_drain(*simulate(high, low, 3.0 * (high - low), 9.0, 1.0, noise=0.01, seed=5),
                            window_intervals=2)
    assert coarse.high_error is not None
    assert coarse.high_error.factor >= (1 + PRIOR_RHO) / (1 - PRIOR_RHO) - 1e-9
    (note,) = [n for n in coarse.notes if n.startswith("dependence not estimable")]
    assert "widened by ×" in note and float(note.split("×")[1].split()[0]) > 1.0
    fine = estimate_drain(*simulate(high, low, 3.0 * (high - low), 9.0, 0.1, noise=0.01, seed=5),
                          window_intervals=20)
    assert not any(n.startswith("dependence not estimable") for n in fine.notes)


def test_the_volume_noise_pools_both_levels() -> None:
    """V's relative noise per interval comes from both levels (each relative to its mean):
    two high intervals and eight low ones give it eight degrees of freedom, not one, and
    the pooled relative SD of the twelve deviations."""
    rng = np.random.default_rng(2)
    hi = 200e6 * (1 + 0.01 * rng.standard_normal(2))
    lo = 50e6 * (1 + 0.01 * rng.standard_normal(8))
    he = level_error(hi, float(hi.mean()))
    ve = volume_error(hi, lo, 0.0, he)
    assert he.df == 1 and ve.df == 8
    devs = np.concatenate([hi / hi.mean() - 1, lo / lo.mean() - 1])
    assert ve.rel_sd == pytest.approx(np.sqrt(np.sum(devs**2) / 8))
    assert volume_error(hi[:1], lo[:2], 0.0, he) is he  # one degree of freedom: the fallback
