"""Assumption checks reported beside every repetition CI: warnings, never vetoes.

The exact quantile CI assumes i.i.d. repetitions; Uta et al. (NSDI'20, F5.4)
ask that samples be tested for normality, independence and stationarity, and
show (their Fig. 19) how a hidden token bucket makes CIs *widen* with more
repetitions. Each check here uses a library test (scipy / statsmodels) on the
values in repetition order, is skipped with a note when ``n`` is too small for
it, and never raises on constant or tiny inputs.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import diptest
import numpy as np
from numpy.typing import NDArray
from scipy import stats as sps

# statsmodels (0.4 s to import, pandas with it) is imported by the checks that use it, so that
# what imports this module (the report's page, `cloudbench compare`) does not pay for it

Status = Literal["ok", "warning", "skipped"]
T = TypeVar("T")

# Below these sizes a test has too little power or its asymptotics are off
# (ADF/KPSS tables start around n = 25; ACF bands need a dozen points).
MIN_N_NORMALITY = 3
MIN_N_INDEPENDENCE = 10
MIN_N_STATIONARITY = 20
MIN_N_TREND = 8
MIN_N_MODES = 10  # the dip test's p-value table starts at n = 4; a KDE needs more
# Theil–Sen takes all n(n-1)/2 pairwise slopes; past this size (0.5 s, 16 MB)
# the drift is measured by least squares instead. The test itself is Kendall's.
THEIL_SEN_MAX_N = 2000


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one assumption check."""

    name: str
    method: str
    status: Status
    message: str
    values: dict[str, float] = field(default_factory=dict)

    @property
    def warned(self) -> bool:
        return self.status == "warning"


def _skip(name: str, method: str, why: str) -> CheckResult:
    return CheckResult(name, method, "skipped", why)


def _quiet(fn: Callable[[], T]) -> tuple[T, list[str]]:
    """Run a statsmodels call, turning its warnings into notes.

    KPSS warns when its statistic falls outside the p-value table (the p-value
    is then a bound) and statsmodels announces API changes with FutureWarning;
    neither must reach the user's terminal as a Python warning.
    """
    from statsmodels.tools.sm_exceptions import InterpolationWarning  # noqa: PLC0415 - see the imports

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    notes = [str(w.message) for w in caught if issubclass(w.category, InterpolationWarning)]
    return result, notes


def _stat_p(result: Any) -> tuple[float, float]:
    # statsmodels >= 0.16 returns result objects; older ones return tuples.
    if hasattr(result, "pvalue"):
        return float(result.statistic), float(result.pvalue)
    return float(result[0]), float(result[1])


def check_normality(x: NDArray[np.float64], alpha: float = 0.05) -> CheckResult:
    """Shapiro–Wilk test (scipy.stats.shapiro); warns when normality is rejected."""
    name, method = "normality", "Shapiro–Wilk"
    if len(x) < MIN_N_NORMALITY:
        return _skip(name, method, f"needs n >= {MIN_N_NORMALITY}")
    w, p = (float(v) for v in sps.shapiro(x))
    vals = {"W": w, "p": p}
    if p < alpha:
        return CheckResult(
            name, method, "warning",
            f"not normal (Shapiro–Wilk W={w:.3f}, p={p:.3g}); the quantile CI is "
            "nonparametric and stays valid, mean ± sd summaries would not",
            vals,
        )
    return CheckResult(name, method, "ok", f"normality not rejected (p={p:.3g})", vals)


def check_independence(x: NDArray[np.float64], alpha: float = 0.05) -> CheckResult:
    """Autocorrelation (statsmodels acf, band ±1.96/√n) and Ljung–Box (acorr_ljungbox).

    Warns when Ljung–Box rejects "no autocorrelation up to lag L" or the lag-1
    autocorrelation leaves the band. Only lag 1 is tested against the band: with
    ten lags, one of them leaves a 95 % band by chance about 40 % of the time.
    """
    name, method = "independence", "ACF band ±1.96/√n + Ljung–Box"
    n = len(x)
    if n < MIN_N_INDEPENDENCE:
        return _skip(name, method, f"needs n >= {MIN_N_INDEPENDENCE}")
    from statsmodels.stats.diagnostic import acorr_ljungbox  # noqa: PLC0415 - see the imports
    from statsmodels.tsa.stattools import acf  # noqa: PLC0415

    lags = max(1, min(10, n // 5))
    r, _ = _quiet(lambda: acf(x, nlags=lags, fft=False))
    band = 1.96 / math.sqrt(n)
    outside = [lag for lag in range(1, lags + 1) if abs(r[lag]) > band]
    lb, _ = _quiet(lambda: acorr_ljungbox(x, lags=[lags]))
    q, p = float(lb["lb_stat"].iloc[0]), float(lb["lb_pvalue"].iloc[0])
    vals = {"lag1": float(r[1]), "band": band, "lags": float(lags), "Q": q, "p": p}
    problems = []
    if abs(r[1]) > band:
        problems.append(f"lag-1 autocorrelation {r[1]:+.2f} outside ±{band:.2f}")
    if p < alpha:
        problems.append(f"Ljung–Box Q={q:.1f} up to lag {lags}, p={p:.3g}")
    if problems:
        return CheckResult(
            name, method, "warning",
            "repetitions look dependent (" + "; ".join(problems)
            + "); the CI assumes independent repetitions",
            vals,
        )
    extra = f"; lags {outside} outside the band" if outside else ""
    return CheckResult(name, method, "ok", f"no autocorrelation detected (Ljung–Box p={p:.3g}{extra})",
                       vals)


def check_stationarity(x: NDArray[np.float64], alpha: float = 0.05) -> CheckResult:
    """ADF (statsmodels adfuller, H0 unit root) and KPSS (kpss, H0 level-stationary).

    Read together: a warning when KPSS rejects a stable level, saying whether
    ADF agrees (not stationary) or not (unclear).
    """
    name, method = "stationarity", "ADF + KPSS"
    n = len(x)
    if n < MIN_N_STATIONARITY:
        return _skip(name, method, f"needs n >= {MIN_N_STATIONARITY}")
    from statsmodels.tsa.stattools import adfuller, kpss  # noqa: PLC0415 - see the imports

    adf_res, _ = _quiet(lambda: adfuller(x, autolag="AIC"))
    adf_stat, adf_p = _stat_p(adf_res)
    kpss_res, kpss_notes = _quiet(lambda: kpss(x, regression="c", nlags="auto"))
    kpss_stat, kpss_p = _stat_p(kpss_res)
    vals = {"adf_stat": adf_stat, "adf_p": adf_p, "kpss_stat": kpss_stat, "kpss_p": kpss_p}
    # KPSS p-values come from a table clipped to [0.01, 0.1].
    kpss_txt = f"p={kpss_p:.3g}"
    if kpss_notes:
        kpss_txt = "p<=0.01" if kpss_p <= 0.01 else "p>=0.1"
    adf_rejects, kpss_rejects = adf_p < alpha, kpss_p < alpha
    detail = f"ADF p={adf_p:.3g}, KPSS {kpss_txt}"
    if not kpss_rejects:
        # ADF alone has little power at small n (it fails to reject for about half
        # of i.i.d. samples of 20), so without KPSS's evidence there is no warning.
        verdict = "stationary" if adf_rejects else "no evidence against stationarity"
        return CheckResult(name, method, "ok", f"{verdict} ({detail})", vals)
    if adf_rejects:
        verdict = "stationarity unclear: KPSS rejects a stable level, ADF rejects a unit root"
    else:
        verdict = "not stationary: the level drifts over repetitions"
    return CheckResult(name, method, "warning", f"{verdict} ({detail})", vals)


def check_trend(x: NDArray[np.float64], alpha: float = 0.05) -> CheckResult:
    """Mann–Kendall trend test as Kendall's tau of value vs repetition order
    (scipy.stats.kendalltau), with the Theil–Sen slope (scipy.stats.theilslopes;
    least squares, scipy.stats.linregress, beyond THEIL_SEN_MAX_N values)."""
    name, method = "trend", "Mann–Kendall (Kendall tau vs order) + Theil–Sen"
    n = len(x)
    if n < MIN_N_TREND:
        return _skip(name, method, f"needs n >= {MIN_N_TREND}")
    order = np.arange(n, dtype=np.float64)
    res = sps.kendalltau(order, x)
    tau, p = float(res.statistic), float(res.pvalue)
    fit = sps.theilslopes(x, order) if n <= THEIL_SEN_MAX_N else sps.linregress(order, x)
    slope = float(fit.slope)
    med = float(np.median(x))
    drift = slope * (n - 1) / abs(med) if med != 0 else math.nan
    vals = {"tau": tau, "p": p, "slope": slope, "relative_drift": drift}
    if p < alpha:
        drift_txt = f", {drift:+.1%} of the median across the run" if math.isfinite(drift) else ""
        return CheckResult(
            name, method, "warning",
            f"trend over repetition order (Kendall tau={tau:+.2f}, p={p:.3g}; Theil–Sen "
            f"slope {slope:+.3g}/repetition{drift_txt})",
            vals,
        )
    return CheckResult(name, method, "ok", f"no trend (Kendall tau={tau:+.2f}, p={p:.3g})", vals)


def check_modes(x: NDArray[np.float64], alpha: float = 0.05) -> CheckResult:
    """Hartigan's dip test of unimodality (``diptest`` package) on the values.

    Two regimes (half the repetitions at one level, half at another) put the
    median in the gap between them, where its CI cannot shrink like 1/√n.
    The values themselves are tested (not their logs: a summary can be <= 0).
    """
    name, method = "modes", "Hartigan dip test"
    n = len(x)
    if n < MIN_N_MODES:
        return _skip(name, method, f"needs n >= {MIN_N_MODES}")
    dip, p = (float(v) for v in diptest.diptest(x))
    vals = {"dip": dip, "p": p}
    if p < alpha:
        return CheckResult(
            name, method, "warning",
            f"more than one mode (dip={dip:.3f}, p={p:.3g}): the repetitions look like a mix "
            "of regimes; a quantile between them converges slowly or not at all",
            vals,
        )
    return CheckResult(name, method, "ok", f"one mode (dip test p={p:.3g})", vals)


CHECKS: tuple[Callable[[NDArray[np.float64], float], CheckResult], ...] = (
    check_normality,
    check_independence,
    check_stationarity,
    check_trend,
    check_modes,
)


def run_checks(values: NDArray[np.floating] | list[float], alpha: float = 0.05) -> list[CheckResult]:
    """All assumption checks on ``values`` given in repetition order."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) >= 2 and np.ptp(x) == 0:
        return [
            _skip(name, "-", f"all {len(x)} values are equal; nothing to test")
            for name in ("normality", "independence", "stationarity", "trend", "modes")
        ]
    return [check(x, alpha) for check in CHECKS]


def warning_messages(results: list[CheckResult]) -> list[str]:
    """The messages of the checks that warned, each prefixed with the check's name."""
    return [f"{r.name}: {r.message}" for r in results if r.warned]
