"""Level and power of `cloudbench diurnal` on simulated campaigns.

Campaigns come from :mod:`cloudbench.testing.timeofday` (a model that is not the
estimator's: per-run t3 effects as large as the repetition noise, shared day effects,
regime switches, a continuous-time slow component, heavy-tailed repetitions with
RTO-like outliers, jittered and missed slots, values rounded to 1 µs). Each series
goes through :func:`cloudbench.analysis.diurnal.diurnal_series` with its run labels;
a campaign's verdict is Holm over its series of the sinusoid test, as
`cloudbench diurnal` does.

* null, one week of hourly runs (2-3 repetitions), 8 series per campaign: the
  rejection rate of each printed test per series, and the share of campaigns with a
  positive verdict (targets: <= 7 % and <= 10 %);
* null, two weeks with day-level effects: weekday vs weekend on whole days;
* a true 24 h sine of 1.5x the per-run SD: found (Holm) and its period within ±10 %.

For comparison, Kruskal-Wallis on every repetition (the old unit) on the same data.

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/bench_diurnal.py [--campaigns 1000] [--seed 1]``.
Prints nominal, achieved and the Monte Carlo SE of each rate; exits 1 when one misses.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

from cloudbench.analysis.diurnal import diurnal_series
from cloudbench.testing.timeofday import DAY, CampaignModel, simulate_campaign

ALPHA = 0.05
SERIES_LEVEL = 0.07  # the bound on each printed test's rejection rate per series
CAMPAIGN_LEVEL = 0.10  # and on the share of campaigns with a positive verdict


def rate_row(name: str, hits: int, n: int, nominal: float, bound: float | None, upper: bool = True) -> bool:
    """Print one rate. A rejection rate passes when it is at most ``bound`` and at most 3 Monte
    Carlo SEs over nominal; a detection rate when it is at least ``bound``; None: shown only."""
    rate = hits / n
    se = math.sqrt(max(nominal * (1 - nominal), 1e-12) / n)
    if bound is None:
        print(f"{name:<52} {n:>6} {nominal:>8.3f} {rate:>9.4f} {se:>7.4f}")
        return True
    limit = min(bound, nominal + 3 * se) if upper else bound
    ok = rate <= limit if upper else rate >= limit
    print(f"{name:<52} {n:>6} {nominal:>8.3f} {rate:>9.4f} {se:>7.4f}  {'ok' if ok else 'FAIL'}"
          f" ({'<=' if upper else '>='} {limit:.4f})")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--campaigns", type=int, default=1000, help="null campaigns of 8 series (one week)")
    ap.add_argument("--weekday-series", type=int, default=1000, help="two-week series for weekday/weekend")
    ap.add_argument("--power-series", type=int, default=1000, help="series with a true sine")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    ok = True
    print(f"{'rate':<52} {'sets':>6} {'nominal':>8} {'achieved':>9} {'MC SE':>7}")

    sine = kw = kw_reps = series = positive = 0
    for _ in range(args.campaigns):
        ps = []
        for s in simulate_campaign(rng, CampaignModel(), series=8):
            r = diurnal_series(s.t, s.values, DAY, run=s.run)
            assert r.p_at_period is not None and r.kruskal_p is not None
            sine += r.p_at_period < ALPHA
            kw += r.kruskal_p < ALPHA
            ps.append(r.p_at_period)
            hours = np.floor(np.mod(s.t, DAY) / 3600).astype(int)
            kw_reps += stats.kruskal(*[s.values[hours == h] for h in np.unique(hours)]).pvalue < ALPHA
            series += 1
        positive += bool(multipletests(ps, alpha=ALPHA, method="holm")[0].any())
    ok &= rate_row("null 1 week: sinusoid at 24 h (per series)", sine, series, ALPHA, SERIES_LEVEL)
    ok &= rate_row("null 1 week: Kruskal-Wallis on runs (per series)", kw, series, ALPHA, SERIES_LEVEL)
    ok &= rate_row("null 1 week: campaigns with a positive verdict", positive, args.campaigns, ALPHA,
                   CAMPAIGN_LEVEL)
    rate_row("  for comparison, Kruskal-Wallis on repetitions", kw_reps, series, ALPHA, None)

    mw = tested = 0
    model = CampaignModel(days=14, day_sd=20.0)
    while tested < args.weekday_series:
        for s in simulate_campaign(rng, model, series=2):
            r = diurnal_series(s.t, s.values, DAY, run=s.run)
            if r.mw_p is not None:
                tested += 1
                mw += r.mw_p < ALPHA
    ok &= rate_row("null 2 weeks, day effects: weekday vs weekend (days)", mw, tested, ALPHA, SERIES_LEVEL)

    found = period_ok = n = 0
    while n < args.power_series:
        for s in simulate_campaign(rng, CampaignModel(amplitude=1.5), series=8):
            r = diurnal_series(s.t, s.values, DAY, run=s.run)
            n += 1
            found += r.p_at_period is not None and r.p_at_period < ALPHA / 8  # Holm's strictest step
            period_ok += r.fit is not None and abs(r.fit.period_s - DAY) <= 0.1 * DAY
    ok &= rate_row("sine 1.5 run SD: found at Holm's strictest step", found, n, 0.95, 0.95, upper=False)
    ok &= rate_row("sine 1.5 run SD: fitted period within ±10 %", period_ok, n, 0.95, 0.95, upper=False)
    print(f"{time.perf_counter() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
