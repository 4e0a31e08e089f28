"""The words of the repetition analysis: notes, warnings, reasons and the pooling refusal.

:mod:`cloudbench.analysis.confirm` gives numbers and codes (:class:`.confirm.Outcome`,
:class:`.prediction.Unreliable`, :class:`.confirm.MetadataMismatch`); this module words them
for the table, ``confirm.json`` and the errors, and names the CLI's flags where a remedy
needs one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cloudbench.analysis.checks import warning_messages
from cloudbench.analysis.confirm import (
    MetadataMismatch,
    Outcome,
    RepetitionRef,
    SeriesKey,
    SeriesResult,
    Target,
    pooling_mismatches,
)
from cloudbench.analysis.prediction import MIN_SPAN, SLOPE_BAND, SLOPE_LEVEL, Prediction, Unreliable
from cloudbench.errors import AnalysisError

ALLOW_MIXED_FLAG = "--allow-mixed"
"""The CLI flag that pools repetitions whose key metadata differ."""

def _compress(indices: Iterable[int]) -> str:
    xs = sorted(set(indices))
    spans: list[str] = []
    start = prev = xs[0]
    for x in [*xs[1:], None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ",".join(spans)


def describe_refs(refs: Sequence[RepetitionRef]) -> str:
    """``run R repetition(s) 1-3,5; ...`` (at most three runs named; repetitions counted from 1, as
    printed everywhere: on-disk index 0 is repetition 1)."""
    by_run: dict[str, list[int]] = defaultdict(list)
    for r in refs:
        by_run[r.run_id].append(r.repetition + 1)
    parts = [f"run {run} repetition(s) {_compress(reps)}" for run, reps in by_run.items()]
    if len(parts) > 3:
        parts = [*parts[:3], f"{len(parts) - 3} more run(s)"]
    return "; ".join(parts)


# Pooling keys whose values are JSON documents: (what they are, root of a field's path).
JSON_KEYS = {
    "workloads": ("workload parameters", "workloads"),
    "vm_type_definitions": ("vm_type definitions", "vm_types"),
    "wan": ("wan settings", "wan"),
    "sweeps": ("swept values", "sweeps"),
}


def json_difference(a: str, b: str, root: str = "workloads") -> str:
    """First differing field of two JSON documents, as ``path: a vs b``."""
    try:
        ja, jb = json.loads(a), json.loads(b)
    except json.JSONDecodeError:
        return f"{a!r} vs {b!r}"

    def walk(x: Any, y: Any, path: str) -> str | None:
        if isinstance(x, list) and isinstance(y, list):
            named = all(isinstance(i, dict) and "name" in i for i in [*x, *y])
            if named:
                dx = {i["name"]: i for i in x}
                dy = {i["name"]: i for i in y}
                for name in sorted(set(dx) | set(dy)):
                    if name not in dx or name not in dy:
                        here = ("present" if name in dx else "absent",
                                "present" if name in dy else "absent")
                        return f"{path}[{name}]: {here[0]} vs {here[1]}"
                    found = walk(dx[name], dy[name], f"{path}[{name}]")
                    if found:
                        return found
                return None
            if len(x) != len(y):
                return f"{path}: {len(x)} vs {len(y)} entries"
            for i, (xi, yi) in enumerate(zip(x, y, strict=True)):
                found = walk(xi, yi, f"{path}[{i}]")
                if found:
                    return found
            return None
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                if (k in x) != (k in y):
                    return f"{path}.{k}: {'present' if k in x else 'absent'} vs " \
                           f"{'present' if k in y else 'absent'}"
                found = walk(x[k], y[k], f"{path}.{k}")
                if found:
                    return found
            return None
        return None if x == y else f"{path}: {x!r} vs {y!r}"

    return walk(ja, jb, root) or f"{root} differ"

def describe_mismatch(m: MetadataMismatch) -> str:
    """One metadata difference in words: the key (or a JSON document's first differing field),
    its first two values and where each occurs."""
    items = list(m.values.items())
    (v1, refs1), (v2, refs2) = items[0], items[1]
    if m.key in JSON_KEYS:
        what, root = JSON_KEYS[m.key]
        text = (f"{what} differ ({json_difference(v1, v2, root)}): "
                f"{describe_refs(refs1)} vs {describe_refs(refs2)}")
    else:
        text = (f"{m.key} differs: {v1!r} in {describe_refs(refs1)} vs {v2!r} in "
                f"{describe_refs(refs2)}")
    if len(items) > 2:
        text += f" (and {len(items) - 2} more value(s))"
    return text


def mismatch_descriptions(mismatches: Mapping[SeriesKey, Sequence[MetadataMismatch]]) -> list[str]:
    """Every distinct metadata difference of the series, in words, first seen first."""
    return list(dict.fromkeys(describe_mismatch(m) for ms in mismatches.values() for m in ms))


def check_pooling(path: Path | str, series_refs: Mapping[SeriesKey, Iterable[RepetitionRef]],
                  metas: Mapping[RepetitionRef, Mapping[str, str]],
                  allow_mixed: bool) -> dict[SeriesKey, list[MetadataMismatch]]:
    """The pooling guard: the series' metadata differences
    (:func:`cloudbench.analysis.confirm.pooling_mismatches`); raises AnalysisError naming every
    differing key unless ``allow_mixed``."""
    found = pooling_mismatches(series_refs, metas)
    if found and not allow_mixed:
        texts = mismatch_descriptions(found)
        names = ", ".join(f"{k.metric}/{k.group}" for k in list(found)[:4])
        more = f" and {len(found) - 4} more" if len(found) > 4 else ""
        raise AnalysisError(
            f"{path}: refusing to pool repetitions whose key metadata differ "
            f"(series {names}{more}):\n  " + "\n  ".join(texts) + "\n"
            f"Analyse the runs separately (pass one run directory), or pass {ALLOW_MIXED_FLAG} "
            "to pool them anyway."
        )
    return found


def unreliable_reason(pred: Prediction) -> str:
    """Why a 1/√n prediction is only a rough guess ("" when it is reliable)."""
    fit, rel = pred.fit, pred.reliability
    lo, hi = pred.slope_low, pred.slope_high
    band = f"[{SLOPE_BAND[0]:g}, {SLOPE_BAND[1]:g}]"
    words = {
        Unreliable.SHORT_FIT: f"the fit spans only n={fit.slope_n_lo}..{fit.slope_n_hi} "
                              f"(less than {MIN_SPAN:g}× in n)",
        Unreliable.NO_SLOPE: "the CI half-width has no log-log slope",
        Unreliable.NO_SLOPE_INTERVAL: f"the slope n^{fit.slope:.2f} has no interval (too few "
                                      "repetitions)",
        Unreliable.SLOPE_OUTSIDE_BAND: (
            f"the CI half-width scales as n^{fit.slope:.2f}, {SLOPE_LEVEL:.0%} interval "
            f"{lo:.2f}..{hi:.2f}, not inside {band} around n^-0.5 (too few repetitions to "
            "show the law, a tail-quantile CI still ending at the sample max or min, a gap "
            "between modes, or dependent data)"),
        Unreliable.CHECKS_WARNED: f"the {', '.join(rel.warned)} check(s) warn (see the warnings)",
        Unreliable.CHECKS_NOT_RUN: f"the {', '.join(rel.unchecked)} check(s) did not run (too few "
                                   "repetitions for them)",
    }
    return "; ".join(words[r] for r in rel.reasons)


def target_note(t: Target) -> str:
    """What a target's outcome means: reached from n on, a labelled prediction, or why neither."""
    e = t.error
    if t.outcome is Outcome.NO_CI:
        return (f"no CI below n={t.n_for_ci}; run at least {t.n_for_ci - t.n} more "
                "repetition(s) first")
    if t.outcome is Outcome.REACHED:
        return f"within ±{e * 100:.3g}% from n={t.n_needed} on, and at every larger size"
    if t.outcome is Outcome.NO_FIT or t.prediction is None:
        return (f"±{e * 100:.3g}% not reached by the {t.n} repetitions measured, and too few sizes "
                f"with a CI (n={t.n_for_ci}..{t.n}) to predict how many would reach it: run more "
                "repetitions")
    pred, fit, n = t.prediction, t.prediction.fit, t.n
    if pred.reliable:
        span = f", 95 % range {pred.n_low}..{pred.n_high}" if pred.n_high > 0 else ""
        return (f"PREDICTED from the 1/√n law (fit on n={fit.n_lo}..{fit.n_hi}, slope "
                f"{fit.slope:.2f}, {SLOPE_LEVEL:.0%} interval {pred.slope_low:.2f}.."
                f"{pred.slope_high:.2f} inside [{SLOPE_BAND[0]:g}, {SLOPE_BAND[1]:g}]; checks "
                f"pass): about {pred.n} repetitions{span}, {pred.more} more than the {n} measured")
    return (f"ROUGH GUESS from the 1/√n law: about {pred.n} repetitions, "
            f"{pred.more} more than the {n} measured; not reliable: {unreliable_reason(pred)}")


MIXED_WORDS = "pooled despite differing metadata: "
"""How a warning about pooled metadata differences begins."""


def rough_note(targets: Sequence[Target], reason: str) -> str:
    """Several bounds' rough guesses with the same reason, in one line: ``ROUGH GUESS from the 1/√n
    law: ±1% after about 17524 repetitions, ±5% after about 701 (17504 and 681 more than the 20
    measured); not reliable: …``."""
    preds = [(t.error, t.prediction) for t in targets if t.prediction is not None]
    after = ", ".join(f"±{e * 100:.3g}% after about {p.n}{' repetitions' if i == 0 else ''}"
                      for i, (e, p) in enumerate(preds))
    more = " and ".join(str(p.more) for _, p in preds)
    return (f"ROUGH GUESS from the 1/√n law: {after} ({more} more than the {targets[0].n} measured); "
            f"not reliable: {reason}")


def series_warnings(r: SeriesResult, no_fit: bool = True) -> list[str]:
    """Everything a reader of a series should doubt, in words: pooled metadata differences, no
    CI, dropped values, the checks' warnings, rough predictions, bounds neither reached nor
    predicted (unless ``no_fit`` is False: the terminal says those once for all series), a zero
    estimate."""
    s, ci = r.series, r.ci
    warns = [f"{MIXED_WORDS}{describe_mismatch(m)}" for m in s.mismatches]
    if not ci.exists:
        warns.append(ci.note)
    if s.dropped:
        warns.append(f"{len(s.dropped)} non-finite value(s) dropped "
                     f"({', '.join(map(str, s.dropped[:5]))})")
    warns += warning_messages(list(r.checks))
    # the rough guesses of one series share their reason: one line for them, not the reason per bound
    rough: dict[str, list[Target]] = defaultdict(list)
    for t in r.targets:
        if t.prediction is not None and not t.prediction.reliable:
            rough[unreliable_reason(t.prediction)].append(t)
    warns += [target_note(ts[0]) if len(ts) == 1 else rough_note(ts, reason) for reason, ts in rough.items()]
    warns += [target_note(t) for t in r.targets if no_fit and t.outcome is Outcome.NO_FIT]
    if ci.exists and ci.estimate == 0:
        if ci.lower == 0 and ci.upper == 0:  # the row shows its bounds reached: say on what terms
            warns.append("the estimate is 0 and so is its CI (0–0): every relative error bound holds trivially, "
                         "from the first n with a CI")
        else:
            warns.append("the estimate is 0: a relative error bound is undefined")
    return warns


def too_few_line(n: int, n_for_ci: int, level: float, quantile_name: str, count: int) -> str:
    """The one line for every series with fewer repetitions than an exact CI of the quantile needs:
    ``n = 2: no exact 95 % CI of the median before n = 6; run 4 more repetitions (36 series)``."""
    return (f"n = {n}: no exact {level * 100:.3g} % CI of the {quantile_name} before n = {n_for_ci}; "
            f"run {n_for_ci - n} more repetition{'s' if n_for_ci - n != 1 else ''} "
            f"({count} series)")


def no_fit_line(n: int, n_for_ci: int, missed: Mapping[float, int]) -> str:
    """The one line for the series of ``n`` repetitions whose bounds are neither reached nor
    predicted (``missed``: error bound -> number of series):
    ``n = 6: ±1% not reached in 6 series, ±5% in 5; ...``."""
    parts = [f"±{e * 100:.3g}% {'not reached in ' if i == 0 else 'in '}{count} series"
             for i, (e, count) in enumerate(sorted(missed.items()))]
    sizes = f"n = {n}" if n == n_for_ci else f"n = {n_for_ci}..{n}"
    return (f"n = {n}: {', '.join(parts)} (-); a CI exists only at {sizes}, too few sizes to "
            "predict from the 1/√n law how many repetitions would reach it: run more repetitions")
