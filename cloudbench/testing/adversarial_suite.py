"""The adversarial coverage suite: every printed p-value and interval
of cloudbench on data from :mod:`cloudbench.testing.adversarial`.

Inventory — what cloudbench prints, where, and the unit that really varies:

=====================================  ============================================  ==========================
printed                                code                                          unit of variation
=====================================  ============================================  ==========================
confirm "CI" of a quantile             analysis.stats.quantile_ci via confirm         repetitions (runs when
(also echo sweeps' median CI)          analyse_series; echo/sweeps.py                 repetitions share a run)
confirm PREDICTED / reliable label     analysis.confirm.evaluate_target               repetitions in time order
confirm check warnings (p-values)      analysis.checks.run_checks                     repetitions
diurnal Kruskal–Wallis p               analysis.diurnal.diurnal_series, report         runs (hour of a run)
diurnal Lomb–Scargle p at the period   same; Holm over series in report.diurnal        runs
diurnal weekday vs weekend p           same                                          days
diurnal fit ± SE                       same                                          runs
diurnal verdict ("time-of-day effect") report.diurnal.diurnal                        campaigns
event spike p (run test), size CI      analysis.events.detect_pair_events            rounds (echoes), AR jitter
event step p (AR(1) bootstrap), CI     same                                          windows / rounds
level shifts (group and pair)          analysis.levelshift.level_shift_rows          windows
drain high/low/time to empty/budget    analysis.tokenbucket.estimate_drain           sampling intervals
refill                                 analysis.tokenbucket.estimate_refill          sampling intervals
capacity ≥ (95 %)                      analysis.throughput.capacity_lower_bound_95   sampling intervals
falling trend (Kendall p)              analysis.throughput.falling_trend             trials
=====================================  ============================================  ==========================

Rules: an interval fails when its coverage is more than 3 Monte Carlo SEs
under nominal; a test fails when its rejection rate is more than 3 SEs over α; a
power row (a real effect found) fails more than 3 SEs under its target; a false-alarm
*rate* (events per series-hour) fails when its 95 % Poisson upper bound exceeds the
target. Every interval row carries its median width, so coverage bought by widening
shows.

The adapters (section "adapters") are the one place that knows each estimator's API:
when an estimator's signature changes, its adapter is the one line to fix. Each suite
function takes ``scale`` (1.0: the full sizes of ``bench/bench_adversarial.py``, at
least 1,000 data sets per row; the tests run 0.1–0.2) and a seed.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.checks import run_checks
from cloudbench.analysis.confirm import ConfirmParams, RepetitionRef, Series, SeriesKey, analyse_series
from cloudbench.analysis.levelshift import detect, level_shift_rows
from cloudbench.analysis.throughput import capacity_lower_bound_95, falling_trend
from cloudbench.analysis.tokenbucket import estimate_drain, estimate_refill, interval_seconds
from cloudbench.report.diurnal import diurnal
from cloudbench.testing import adversarial as gen
from cloudbench.testing import adversarial_drift
from cloudbench.testing.adversarial_rows import Row, adapt_pair_events, default_window_s, link_event_counts, n_of
from cloudbench.testing.fake_results import _BASE_TIME, FakeRun, make_campaign

FloatArray = NDArray[np.float64]


def _cover(lo: FloatArray, hi: FloatArray, truth: FloatArray | float) -> tuple[int, float]:
    """Hits (NaN bounds never cover) and the median width of the finite intervals."""
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = (lo <= truth) & (truth <= hi)
    w = (hi - lo)[np.isfinite(hi - lo)]
    return int(ok.sum()), float(np.median(w)) if len(w) else math.nan


# =========================================================================== adapters
# One small function per estimator: the only code here that calls cloudbench's API.


@dataclass(frozen=True)
class ConfirmOut:
    """What one confirm run on simulated repetitions gave: the interval and the prediction labels."""
    ci_low: float
    ci_high: float
    reliable: bool  # any target's prediction labelled reliable
    predicted: bool  # any target predicted (not reached)


def adapt_confirm(values: FloatArray, p: float = 0.5) -> list[ConfirmOut]:
    """``cloudbench confirm`` on series of repetitions ``(datasets, n)`` (run order)."""
    n = values.shape[1]
    refs = tuple(RepetitionRef("run", i) for i in range(n))
    series = [Series(SeriesKey("echo", "rtt_p50_us", f"g{d}"), "us", refs, np.asarray(v)) for d, v in
              enumerate(values)]
    out = []
    for r in analyse_series(series, ConfirmParams(quantile=p)):
        preds = [t.prediction for t in r.targets if t.prediction is not None]
        out.append(ConfirmOut(r.ci.lower if r.ci.lower is not None else math.nan,
                              r.ci.upper if r.ci.upper is not None else math.nan,
                              any(pr.reliable for pr in preds), bool(preds)))
    return out


def adapt_checks(values: FloatArray) -> dict[str, bool]:
    """The assumption checks beside every repetition CI: check name -> warned."""
    return {c.name: c.warned for c in run_checks(values)}


def adapt_diurnal(c: gen.Campaign, series: int, period: str = "24h") -> list[dict[str, Any]]:
    """``cloudbench diurnal`` (the report function, on campaign directories written by
    :mod:`cloudbench.testing.fake_results`): one result per campaign of ``series``
    series; ``c`` must come from :func:`campaign_for_fake_runs` (its times are the fake
    runs' times)."""
    n_runs = int(c.run.max()) + 1
    reps = int(np.bincount(c.run).max())
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(c.values.shape[0] // series):
            block = slice(k * series, (k + 1) * series)
            vals = c.values[block].reshape(series, n_runs, reps)
            have = c.present[block].reshape(series, n_runs, reps)
            runs = [FakeRun({(f"rtt_p50_us_{s}", "same_zone"):
                             [float(vals[s, r, i]) if have[s, r, i] else None for i in range(reps)]
                             for s in range(series)}) for r in range(n_runs)]
            out.append(cast(dict[str, Any], diurnal(make_campaign(Path(tmp), f"c{k}", runs), period)))
    return out


def adapt_level_shifts(window_s: float, means: FloatArray, medians: FloatArray) -> list[dict[str, Any]]:
    """The echo report's level shifts of one group's window series: the group's series is built
    by the analysis from its pairs' window series (here one pair; ``means`` are what a window
    also has, for estimators that would use them)."""
    t = np.arange(len(medians)) * window_s
    rows = level_shift_rows([(0, "t", "a>b", "same_zone", t, np.asarray(medians))])
    return [r for r in rows if str(r.get("series", "")).startswith("group:")]


def adapt_pair_shifts(window_s: float, medians: FloatArray) -> list[dict[str, Any]]:
    """The window-median detector (the group series' search) on one pair's window medians: the
    report's pair rows now come from the per-pair events (rows "events: ..."), so this row
    checks the same step test on one pair's series."""
    t = np.arange(len(medians)) * window_s
    return [s.to_row() for s in detect(t, np.asarray(medians))]


def adapt_drain(d: gen.Drain, window_s: float = 2.0) -> Any:
    """The drain report's first-drain estimate (``high``, ``low``, ``time_to_empty``,
    ``budget``: each with ``low``/``high`` bounds, bit/s, s from the series start, bits)."""
    dt = interval_seconds(d.t_start, d.t_end)
    return estimate_drain(d.t_start, d.t_end, d.nbytes, window_intervals=max(1, round(window_s / dt)))


def adapt_refill(first: Any, d: gen.Drain, rest_s: float) -> Any:
    """The drain report's refill estimate (``refill`` with bounds, bit/s of tokens)."""
    return estimate_refill(first, d.t_start, d.t_end, d.nbytes, rest_s)


def adapt_capacity(t0: FloatArray, t1: FloatArray, nbytes: FloatArray) -> float | None:
    """The throughput report's "cap ≥ (95 %)" (bit/s)."""
    return capacity_lower_bound_95(t0, t1, nbytes)


def adapt_falling_trend(values: FloatArray) -> bool:
    """The throughput report's "falls over successive trials" warning."""
    tr = falling_trend(values)
    return tr is not None and tr.falling


# ============================================================================ suites


def confirm_rows(scale: float = 1.0, seed: int = 10, n: int = 20) -> list[Row]:
    """The CI of the median over repetitions, and the "reliable" prediction label."""
    rng = np.random.default_rng(seed)
    m = n_of(1000, scale)
    rows = []
    for kind in ("iid", "heavy", "run_effects", "two_regimes", "ar1"):
        reps = gen.repetitions(rng, m, n, kind, phi=0.5)
        res = adapt_confirm(reps.values)
        hit, width = _cover(np.array([r.ci_low for r in res]), np.array([r.ci_high for r in res]), reps.median)
        label = "AR(1) φ=0.5" if kind == "ar1" else kind.replace("_", " ")
        rows.append(Row("confirm: 95 % CI of the median", f"{label}, n={n}", "interval", 0.95, hit, m, width,
                        "repetitions", "runs of 3 share a run effect" if kind == "run_effects" else ""))
    for kind, note in (("halves", "half at 100, half at 130"), ("two_regimes", "Markov, stay 0.9"),
                       ("drift", "-1 %/repetition"), ("ar1", "AR(1) φ=0.9")):
        reps = gen.repetitions(rng, m, n, kind)  # type: ignore[arg-type]
        res = adapt_confirm(reps.values)
        pred = sum(r.predicted for r in res)
        rows.append(Row("confirm: reliable label (wrongly)", f"{kind.replace('_', ' ')}, n={n}", "test", 0.05,
                        sum(r.reliable for r in res), m, unit="repetitions in time order",
                        note=f"{note}; {pred} predicted"))
    reps = gen.repetitions(rng, n_of(300, scale), 60, "iid")
    res = adapt_confirm(reps.values)
    rows.append(Row("confirm: reliable label (rightly)", "iid, CV 10 %, n=60", "power", 0.5,
                    sum(r.reliable for r in res), len(res), unit="repetitions",
                    note="'most series' read as at least half"))
    return rows


def check_rows(scale: float = 1.0, seed: int = 11, n: int = 20) -> list[Row]:
    """Each assumption check's warning rate on i.i.d. normal repetitions (its null)."""
    rng = np.random.default_rng(seed)
    m = n_of(1000, scale)
    x = rng.normal(100.0, 10.0, (m, n))
    counts: dict[str, int] = {}
    for v in x:
        for name, warned in adapt_checks(v).items():
            counts[name] = counts.get(name, 0) + warned
    return [Row(f"confirm check: {name} warning", f"iid normal, n={n}", "test", 0.05, c, m, unit="repetitions")
            for name, c in sorted(counts.items())]


def campaign_for_fake_runs(rng: np.random.Generator, datasets: int, **kw: Any) -> gen.Campaign:
    """:func:`~cloudbench.testing.adversarial.hourly_campaign` on the clock of
    :func:`cloudbench.testing.fake_results.make_campaign` (a run an hour from its start time,
    repetitions 5 minutes apart), so that :func:`adapt_diurnal` can write it."""
    return gen.hourly_campaign(rng, datasets, start=_BASE_TIME.timestamp(), start_jitter=0.0, rep_gap_s=300.0,
                               **kw)


def weekday_row(rng: np.random.Generator, scale: float, series: int) -> Row:
    """The weekday-vs-weekend p-value under run and day effects without a weekly one: it needs two
    weeks of whole days (one week gives no p-value), so a campaign of its own, 15 days of runs from
    10:15 UTC (14 whole days)."""
    c = campaign_for_fake_runs(rng, n_of(4, scale, least=1) * series, days=15, run_sd=5.0, rep_sd=5.0, day_sd=5.0)
    ps = [s["mw_p"] for r in adapt_diurnal(c, series) for s in r["series"]]
    have = [p for p in ps if p is not None]
    if len(have) < len(ps):
        raise AssertionError(f"{len(ps) - len(have)} of {len(ps)} two-week series have no weekday p-value")
    return Row("diurnal: weekday vs weekend p", "15 days hourly, 2-3 reps, run + day effects", "test", 0.05,
               sum(p < 0.05 for p in have), len(have), unit="days")


def diurnal_rows(scale: float = 1.0, seed: int = 12, series: int = 50, day_effects: bool = True) -> list[Row]:
    """Every p-value ``cloudbench diurnal`` prints, under per-run (and, with ``day_effects``,
    day-level) effects with no time-of-day effect, and a real 24 h sine. Campaigns of
    ``series`` series each: 20 per null and 6 with the sine at ``scale`` 1."""
    rng = np.random.default_rng(seed)
    rows = []
    nulls = [("run effects = repetition noise", {"run_sd": 5.0, "rep_sd": 5.0})]
    if day_effects:
        nulls.append(("run + day effects", {"run_sd": 5.0, "rep_sd": 5.0, "day_sd": 5.0}))
    for name, kw in nulls:
        camps = n_of(20, scale, least=2)
        c = campaign_for_fake_runs(rng, camps * series, **kw)
        res = adapt_diurnal(c, series)
        ser = [s for r in res for s in r["series"]]
        tot = len(ser)
        g = f"1 week hourly, 2-3 reps, {name}"

        def rej(k: str, ser: list[dict[str, Any]] = ser) -> int:
            return sum(1 for s in ser if s.get(k) is not None and s[k] < 0.05)

        rows += [Row("diurnal: Kruskal-Wallis p", g, "test", 0.05, rej("kruskal_p"), tot, unit="runs"),
                 Row("diurnal: Lomb-Scargle p at period", g, "test", 0.05, rej("p_at_period"), tot, unit="runs"),
                 Row("diurnal: Holm-adjusted p (series)", g, "test", 0.05, rej("p_holm"), tot, unit="runs"),
                 Row("diurnal: verdict 'time-of-day effect'", f"{g}, {series} series/campaign", "test", 0.10,
                     sum(r["verdict"].startswith("time-of-day effect") for r in res), len(res), unit="campaigns",
                     note="the target: at most 1 in 10 campaigns")]
    rows.append(weekday_row(rng, scale, 2 * series))
    # a real effect: a 24 h sine of 1.5x the per-run SD
    camps = n_of(6, scale, least=1)
    amp = 1.5 * 5.0
    c = campaign_for_fake_runs(rng, camps * series, run_sd=5.0, rep_sd=5.0, amplitude=amp)
    res = adapt_diurnal(c, series)
    ser = [s for r in res for s in r["series"]]
    fits = [s.get("fit") for s in ser]
    found = sum(1 for s, f in zip(ser, fits, strict=True)
                if s.get("significant") and f and abs(f["period_s"] / 86400.0 - 1.0) <= 0.10)
    g = f"24 h sine, amplitude {amp:g} = 1.5x run SD"
    rows.append(Row("diurnal: effect found, period ±10 %", g, "power", 0.8, found, len(ser), unit="runs"))
    ok = [f for f in fits if f]
    for name, key, truth in (("period", "period_s", 86400.0), ("amplitude", "amplitude", amp)):
        lo = np.array([f[key] - 1.96 * f[f"{key.split('_')[0]}_se" + ("_s" if key == "period_s" else "")]
                       for f in ok])
        hi = np.array([f[key] + 1.96 * f[f"{key.split('_')[0]}_se" + ("_s" if key == "period_s" else "")]
                       for f in ok])
        tr = np.abs(truth) if name == "amplitude" else truth
        hit, width = _cover(np.minimum(np.abs(lo), np.abs(hi)) if name == "amplitude" else lo,
                            np.maximum(np.abs(lo), np.abs(hi)) if name == "amplitude" else hi, tr)
        rows.append(Row(f"diurnal: fit {name} ± 1.96 SE", g, "interval", 0.95, hit, len(ok), width, "runs",
                        "the printed ± SE read as a 95 % interval"))
    return rows


def _quiet_rate(rng: np.random.Generator, series: int, seconds: float, rate_hz: float, window_s: float,
                chunk: int = 50) -> tuple[int, int, int]:
    """Link events (spikes, steps) and NaN intervals on quiet series."""
    return link_event_counts(lambda k: gen.rtt_series(rng, k, seconds, rate_hz), series, rate_hz, window_s, chunk)


def event_rows(scale: float = 1.0, seed: int = 13, quiet_hours: float = 1000.0, quiet_hz: float = 10.0,
               quiet_series_s: float = 600.0) -> list[Row]:
    """False link events on quiet links (AR(1) Student-t jitter, 1-in-10,000 RTO outliers,
    1 µs rounding); spike and step size intervals on the same jitter. The false-alarm
    rate is measured over ``quiet_hours`` series-hours (1,000 in the bench: at a true rate of
    0.003 the 95 % upper bound from 300 can exceed 0.01; not scaled: fewer cannot show
    an upper bound of 0.01) of series of ``quiet_series_s`` at ``quiet_hz`` rounds/s."""
    rng = np.random.default_rng(seed)
    rows = []
    n_series = math.ceil(quiet_hours * 3600.0 / quiet_series_s)
    w = default_window_s(quiet_series_s)
    sp, st, _ = _quiet_rate(rng, n_series, quiet_series_s, quiet_hz, w)
    hours = n_series * quiet_series_s / 3600.0
    g = f"quiet, AR(1) t4 jitter + RTO, {quiet_hz:g} rounds/s, {w:g} s window"
    rows.append(Row("events: link events per series-hour", g, "rate", 0.01, sp + st, hours, unit="rounds",
                    note=f"{sp} spikes, {st} steps in {hours:.0f} series-hours; pass: 95 % upper bound ≤ 0.01"))
    # the quickstart: 20 s at 100 rounds/s, the default window
    q = n_of(200, scale, least=10)
    w = default_window_s(20.0)
    sp, st, nan = _quiet_rate(rng, q, 20.0, 100.0, w)
    rows.append(Row("events: link events per quickstart", f"quiet 20 s at 100 rounds/s, {w:g} s window", "test", 0.01,
                    min(sp + st, q), q, unit="rounds",
                    note=f"{sp} spikes, {st} steps, {nan} with a NaN interval; 0.01 per series-hour is "
                         "0.00006 per 20 s, so any event here is over the bar"))
    m = n_of(1000, scale)
    # spike and step size intervals: known spikes / steps on the same jitter
    for label, n_echo in (("spike of 30 echoes", 30), ("spike of 4 echoes", 4)):
        hit = found = 0
        widths = []
        for _ in range(m // 50 + (m % 50 > 0)):
            t, y = gen.rtt_series(rng, 50, 20.0, 100.0)
            size = rng.uniform(200.0, 2000.0, 50)
            at = rng.integers(500, 1500, 50)
            for i in range(50):
                v = y[i].copy()
                v[at[i]:at[i] + n_echo] += np.round(size[i])
                ev = [e for e in adapt_pair_events(t, v, 0.01, 2.0)
                      if e.kind == "spike" and abs(e.time_s - t[at[i]]) < 0.1]
                if ev:
                    found += 1
                    e = ev[0]
                    hit += bool(e.size_low <= round(size[i]) <= e.size_high)
                    if math.isfinite(e.size_high - e.size_low):
                        widths.append(e.size_high - e.size_low)
        rows.append(Row("events: spike size 95 % CI", f"{label}, AR(1) t4 jitter, 2 s window", "interval", 0.95,
                        hit, found, float(np.median(widths)) if widths else math.nan, "rounds",
                        f"{found} of {m} spikes found; a NaN interval counts as a miss"))
    hit = found = crashed = 0
    widths = []
    for _ in range(m // 50 + (m % 50 > 0)):
        t, y = gen.rtt_series(rng, 50, 60.0, 100.0)
        size = rng.choice([-1.0, 1.0], 50) * rng.uniform(30.0, 200.0, 50)
        at = rng.integers(2000, 4000, 50)
        for i in range(50):
            v = y[i].copy()
            v[at[i]:] += np.round(size[i])
            try:
                ev = [e for e in adapt_pair_events(t, v, 0.01, 2.0) if e.kind == "step"]
            except IndexError:  # events._steps placing a change after its two windows (see the tests)
                crashed += 1
                continue
            if len(ev) == 1:
                found += 1
                e = ev[0]
                hit += bool(e.size_low <= round(size[i]) <= e.size_high)
                widths.append(e.size_high - e.size_low)
    rows.append(Row("events: step size 95 % CI", "step 30-200 µs, AR(1) t4 jitter, 2 s window", "interval", 0.95,
                    hit, found, float(np.median(widths)) if widths else math.nan, "rounds",
                    f"{found} of {m} steps found alone; the detector raised IndexError on {crashed}"))
    return rows


def levelshift_rows(scale: float = 1.0, seed: int = 14, chunk: int = 50) -> list[Row]:
    """Spurious level shifts on quiet series with RTO outliers: 300 windows of 1 s, 1,000
    echoes each (a group of ten pairs at 100 rounds/s, or one LAN pair at 1,000/s)."""
    rng = np.random.default_rng(seed)
    m = n_of(1000, scale)
    grp = pair = 0
    for start in range(0, m, chunk):
        k = min(chunk, m - start)
        means, medians = gen.window_stats(rng, k, 300, 1000)
        grp += sum(any(r["kind"] == "step" for r in adapt_level_shifts(1.0, means[i], medians[i]))
                   for i in range(k))
        pair += sum(any(r["kind"] == "step" for r in adapt_pair_shifts(1.0, medians[i])) for i in range(k))
    g = "quiet 300 x 1 s windows of 1,000 echoes, RTO 1e-4 +200 ms"
    return [Row("level shifts: group series with a step", g, "test", 0.05, grp, m, unit="windows",
                note="no p-value printed: a step is a claim; 0.05 as its bar"),
            Row("level shifts: pair series with a step", g, "test", 0.05, pair, m, unit="windows",
                note="window medians")]


DRAIN_QUANTITIES = ("high rate", "low rate", "time to empty", "budget", "refill")


def drain_rows(scale: float = 1.0, seed: int = 15, chunk: int = 100,
               noises: Sequence[Literal["iid", "ar1"]] = ("iid", "ar1"),
               dts: Sequence[float] = (0.25, 0.5, 1.0)) -> list[Row]:
    """The five drain intervals at 0.25, 0.5 and 1 s sampling with i.i.d. and AR(1) noise."""
    rng = np.random.default_rng(seed)
    m = n_of(1000, scale)
    rows = []
    for noise in noises:
        for dt in dts:
            hits = dict.fromkeys(DRAIN_QUANTITIES, 0)
            widths: dict[str, list[float]] = {q: [] for q in DRAIN_QUANTITIES}
            for start in range(0, m, chunk):
                k = min(chunk, m - start)
                high = rng.uniform(100e6, 400e6, k)
                low = high * rng.uniform(0.1, 0.45, k)
                tau = rng.uniform(1.5, 6.0, k)
                tokens = tau * (high - low)
                first = gen.drain_counters(rng, high, low, tokens, tau + rng.uniform(5.0, 7.0, k), dt,
                                           noise=noise)
                rest = rng.uniform(0.2, 0.8, k) * tokens / low
                ends = np.array([d.t_end[-1] for d in first])
                left = np.array([d.tokens_left for d in first])
                tok2 = np.minimum(left + low * rest, tokens)
                second = gen.drain_counters(rng, high, low, tok2, tok2 / (high - low) + rng.uniform(3.0, 5.0, k),
                                            dt, noise=noise, t_offset=ends + rest)
                for i in range(k):
                    est = adapt_drain(first[i])
                    ref = adapt_refill(est, second[i], rest[i])
                    truths = {"high rate": (est.high, high[i]), "low rate": (est.low, low[i]),
                              "time to empty": (est.time_to_empty, first[i].empty_s),
                              "budget": (est.budget, tokens[i]),
                              "refill": (ref.refill, (tok2[i] - left[i]) / rest[i])}
                    for q, (e, truth) in truths.items():
                        if e is not None and e.low <= truth <= e.high:
                            hits[q] += 1
                        if e is not None and math.isfinite(e.high - e.low):
                            widths[q].append((e.high - e.low) / abs(truth))
            for q in DRAIN_QUANTITIES:
                rows.append(Row(f"drain: {q} 95 % interval", f"{noise} noise, read every {dt:g} s", "interval",
                                0.95, hits[q], m, float(np.median(widths[q])) if widths[q] else math.nan,
                                "sampling intervals", "width relative to the truth"))
    return rows


def throughput_rows(scale: float = 1.0, seed: int = 16) -> list[Row]:
    """cap ≥ (95 %) on a link at capacity with AR(1) byte noise; the falling-trend warning
    under no trend with AR(1) trials."""
    rng = np.random.default_rng(seed)
    m = n_of(1000, scale)
    rows = []
    cap = 100e6
    for noise in ("iid", "ar1"):
        for dt in (0.5, 1.0):
            n = round(20.0 / dt)
            mult = (1.0 + gen.ar1(rng, (m, n), 0.7, 0.01)) if noise == "ar1" else rng.normal(1.0, 0.01, (m, n))
            read = np.clip(rng.normal(0.0, 0.02 * dt, (m, n + 1)), 0.0, None)
            read[:, 0] = 0.0
            bits = cap * dt * mult + cap * (read[:, 1:] - read[:, :-1])
            t0 = np.arange(n, dtype=np.float64) * dt
            hit = 0
            for i in range(m):
                b = adapt_capacity(t0, t0 + dt, np.asarray(bits[i] / 8.0, dtype=np.float64))
                hit += b is not None and b <= cap
            rows.append(Row("throughput: cap ≥ (95 %)", f"{noise} noise, read every {dt:g} s", "interval", 0.95,
                            hit, m, unit="sampling intervals", note="one-sided: at or under the capacity"))
    for noise, phi in (("iid", 0.0), ("AR(1) φ=0.7", 0.7)):
        x = 100.0 * (1.0 + (gen.ar1(rng, (m, 10), phi, 0.1) if phi else rng.normal(0.0, 0.1, (m, 10))))
        rows.append(Row("throughput: falling-trend warning", f"10 trials, no trend, {noise}", "test", 0.05,
                        sum(adapt_falling_trend(v) for v in x), m, unit="trials"))
    return rows


@dataclass(frozen=True)
class Suite:
    """A named group of rows of the adversarial suite and the function that computes them."""
    name: str
    run: Callable[..., list[Row]]
    doc: str = field(default="")


SUITES: tuple[Suite, ...] = (
    Suite("confirm", confirm_rows), Suite("checks", check_rows), Suite("diurnal", diurnal_rows),
    Suite("events", event_rows), Suite("drift", adversarial_drift.drift_rows),
    Suite("drift-hour", adversarial_drift.drift_hour_rows),
    Suite("levelshift", levelshift_rows),
    Suite("drains", drain_rows), Suite("throughput", throughput_rows),
)


def run_all(scale: float = 1.0, only: Sequence[str] = ()) -> list[Row]:
    """Every row of the suites (or of those named in ``only``), at ``scale`` times the full sizes."""
    return [r for s in SUITES if not only or s.name in only for r in s.run(scale=scale)]
