"""Which hosts share a physical NIC, inferred from who loses bandwidth when sending together.

The observations are *probes*: a set S of hosts sends at full speed at once,
and each sender's rate is measured. Model (the colocation audit's): hosts on one
physical host share its NIC; a host whose partners in S push the NIC past its
capacity gets less than it gets without them (a *drop*: rate below
``(1 − threshold) ×`` its baseline); hosts on different physical hosts do not
affect each other. A host's baseline is its rate sending alone when it did,
else the highest rate it reached in any probe, or its nominal rate if higher;
without a nominal rate, the best rate any host of its class (its vm_type) reached
stands in for it (hosts of one type get one allowance). The per-host answer is what makes
this group testing cheap: one probe tells every sender whether *some* partner
was present.

Inference (:func:`infer`) — exact logic, no fitting:

* a sender that did not drop has no partner among the other senders of that
  probe (a *non-edge* to each of them, both ways);
* a sender that dropped has at least one partner in the probe; when all other
  senders but one are excluded (non-edges, or already known to be in another
  group), that one is its partner (an *edge*); groups are the connected
  components of the edges (colocation is an equivalence), and a non-edge
  between two members of different components separates the components;
* repeated until nothing changes. Component pairs with neither an edge nor a
  non-edge are *undetermined*; a drop that nothing in its probe can explain is
  *unexplained* (noise, or the model does not hold).

Probe design (:func:`plan_batch`), adaptive in batches:

1. everyone at once (the audit's full-load phase): hosts that do not drop have
   no contended partner at all;
2. *split*: number the m components still undetermined 0…m−1 and, for each bit
   b of that number, probe one representative of every component whose bit b
   is 0, then those whose bit b is 1: 2⌈log₂ m⌉ probes in which every
   representative meets every other in some probe and is apart from each in
   another. A partner pair (groups of two) is then resolved in that one batch,
   because its two numbers differ in some bit: in that probe each is alone, so
   its non-drop excludes everyone present, and in the probes of the bits where
   they agree the drop has a single candidate left;
   (when a host has no nominal rate, the first split batch takes every host,
   since under full load alone it cannot be seen losing anything — all hosts of
   its class may be losing; a host with neither a nominal rate nor a class is
   found less reliably, as it may never send apart from all its partners);
3. when a split batch resolves less than half the undetermined pairs (large
   groups, where most probes hold two partners of everyone): *pairs*, probes
   packing as many undetermined component pairs as can share a probe without
   another possible partner present, so each drop or non-drop decides its pair;
4. *verify*, once no pair is undetermined: probe v holds member v (cyclically)
   of every group, g probes for a largest group of g hosts; nobody should drop,
   every host sends once apart from its inferred partners (its baseline), and
   every pair of groups is tested apart at once;
5. *solo*, for each host with an unexplained drop: it sends alone, and that rate
   becomes its baseline (a host that never sent apart from all its partners has
   too low a best rate, or one that cannot reach its nominal rate too high a one);
   then back to 2.

Probes needed: 1 + 2⌈log₂ d⌉ + g when no group exceeds two hosts, d being the
hosts that lost bandwidth under full load; larger groups may need another batch
(split or pairs), and noisy drops solo probes. For 8 hosts with groups of 3 and
2, d = 5: at most 1 + 6 + 3 = 10 when one split batch settles them (on the
testbed it did: 9 to 12 probes, with 0 to 3 solo probes for noise); 1,000 hosts
in pairs need 1 + 20 + 2 = 23. The count grows with log₂ of the contended hosts
because each probe answers for every sender at once (a pairwise design would
need d(d−1)/2). Colocation that costs no bandwidth for the load sent (two hosts
whose rates fit the NIC together) is invisible to any throughput probe, and
harmless for that load.

Confidence (:func:`group_confidence`): the rate noise σ is the robust spread
(1.4826 × MAD) of the relative rates rate/baseline of the observations that did
not drop (floored at 0.5 %). An observation ρ is evidence for its side of the
threshold with probability Φ(|ρ − (1 − threshold)| / σ) under that Gaussian
noise. A group's verdicts are pairs (two members share a NIC; a member and an
outsider do not); each is judged by its strongest evidence (a probe where only
those two of the group sent and one dropped; a probe where one of them sent
beside the other and did not drop), pairs inside a group also through chains of
members; the group's confidence is its weakest verdict. So one noisy probe
lowers no confidence that another probe settles, and a group that rests on a
single marginal drop gets that drop's confidence.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

DEFAULT_THRESHOLD = 0.15
MIN_SIGMA = 0.005


@dataclass(frozen=True)
class Probe:
    """One probe: the hosts that sent together and the rate each reached (bit/s)."""

    senders: frozenset[str]
    rates: Mapping[str, float]
    phase: str = "probe"  # full | split | pairs | verify (how it was chosen; not used to infer)


@dataclass
class Inference:
    """What the probes say: the groups, what is still open, and each observation's verdict."""

    hosts: list[str]
    groups: list[tuple[str, ...]]  # every host in exactly one group (singletons included)
    undetermined: list[tuple[str, str]]  # representatives of component pairs still open
    unexplained: list[tuple[int, str]]  # (probe index, host): a drop nothing present explains
    baseline: dict[str, float]
    dropped: list[dict[str, bool]]  # per probe, per sender
    relative: list[dict[str, float]]  # per probe, per sender: rate / baseline
    threshold: float
    separated: set[frozenset[str]] = field(default_factory=set)  # component pairs known apart

    def group_of(self, host: str) -> tuple[str, ...]:
        return next(g for g in self.groups if host in g)


def baselines(probes: Sequence[Probe], hosts: Iterable[str],
              nominal: Mapping[str, float | None] | None = None,
              classes: Mapping[str, str] | None = None) -> dict[str, float]:
    """Each host's rate without interference: what it reached sending alone if it did; else the
    best it reached in any probe, or its nominal rate if higher. A host without a nominal
    rate takes the best rate of its class (``classes``: host -> e.g. its vm_type) instead."""
    hosts = list(hosts)
    best = {h: max([p.rates[h] for p in probes if h in p.rates and math.isfinite(p.rates[h])],
                   default=0.0) for h in hosts}
    cls = classes or {}
    class_best: dict[str, float] = {}
    for h in hosts:
        if h in cls:
            class_best[cls[h]] = max(class_best.get(cls[h], 0.0), best[h])
    out: dict[str, float] = {}
    for h in hosts:
        solo = [p.rates[h] for p in probes if p.senders == {h} and math.isfinite(p.rates[h])]
        nom = (nominal or {}).get(h) or (class_best.get(cls[h], 0.0) if h in cls else 0.0)
        out[h] = max(solo) if solo else max(best[h], nom)
    return out


class _Components:
    """Union-find over hosts (the groups found so far)."""

    def __init__(self, hosts: Iterable[str]) -> None:
        self.parent = {h: h for h in hosts}

    def find(self, h: str) -> str:
        while self.parent[h] != h:
            self.parent[h] = self.parent[self.parent[h]]
            h = self.parent[h]
        return h

    def union(self, a: str, b: str) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        lo, hi = sorted((ra, rb))
        self.parent[hi] = lo
        return True

    def members(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for h in self.parent:
            out.setdefault(self.find(h), []).append(h)
        return out


def infer(probes: Sequence[Probe], hosts: Sequence[str],
          nominal: Mapping[str, float | None] | None = None,
          threshold: float = DEFAULT_THRESHOLD,
          classes: Mapping[str, str] | None = None) -> Inference:
    """Groups of hosts sharing a NIC, from ``probes`` (see the module doc for the method)."""
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be in (0, 1), not {threshold}")
    base = baselines(probes, hosts, nominal, classes)
    relative = [{h: (p.rates[h] / base[h] if base[h] > 0 else 1.0) for h in p.senders}
                for p in probes]
    dropped = [{h: r < 1 - threshold for h, r in rel.items()} for rel in relative]
    apart: set[frozenset[str]] = set()  # host pairs known not to share a NIC
    for p, drop in zip(probes, dropped, strict=True):
        for h in p.senders:
            if not drop[h]:
                apart |= {frozenset((h, q)) for q in p.senders if q != h}
    comps = _Components(hosts)
    unexplained: list[tuple[int, str]] = []
    changed = True
    while changed:
        changed = False
        sep = {frozenset((comps.find(a), comps.find(b))) for a, b in map(tuple, apart)}
        unexplained = []
        for i, (p, drop) in enumerate(zip(probes, dropped, strict=True)):
            for h in sorted(p.senders):
                if not drop[h]:
                    continue
                ch = comps.find(h)
                if any(comps.find(q) == ch for q in p.senders if q != h):
                    continue  # a known partner is present: explained
                cands = {comps.find(q) for q in p.senders if q != h} - {
                    c for c in {comps.find(q) for q in p.senders} if frozenset((ch, c)) in sep}
                if not cands:
                    unexplained.append((i, h))
                elif len(cands) == 1:
                    changed |= comps.union(h, cands.pop())
                    if changed:
                        break
            if changed:
                break
    sep = {frozenset((comps.find(a), comps.find(b))) for a, b in map(tuple, apart)}
    members = comps.members()
    roots = sorted(members)
    undetermined = [(a, b) for a, b in combinations(roots, 2) if frozenset((a, b)) not in sep]
    groups = sorted((tuple(sorted(m)) for m in members.values()), key=lambda g: (-len(g), g))
    return Inference(list(hosts), groups, undetermined, unexplained, base, dropped, relative,
                     threshold, sep)


def noise_sigma(inf: Inference) -> float:
    """Robust spread of rate/baseline over the observations that did not drop."""
    vals = [r for rel, drop in zip(inf.relative, inf.dropped, strict=True)
            for h, r in rel.items() if not drop[h]]
    if len(vals) < 2:
        return MIN_SIGMA
    med = statistics.median(vals)
    mad = statistics.median(abs(v - med) for v in vals)
    return max(MIN_SIGMA, 1.4826 * mad)


def group_confidence(inf: Inference, probes: Sequence[Probe]) -> dict[tuple[str, ...], float]:
    """Each group's confidence: its weakest verdict, each judged by its strongest evidence.

    Verdicts are pairs: two members share a NIC, a member and an outsider do not.
    Evidence that h and q share one: a probe holding both and no other member of
    their group, in which h (or q) dropped — Φ((1 − threshold − ρ)/σ), the
    probability that the drop was not noise. Evidence that they do not: a probe
    holding both in which h (or q) did not drop — Φ((ρ − 1 + threshold)/σ).
    A pair without direct evidence takes the best chain through other hosts
    (h ~ m ~ q, or h ~ m ⊥ q), a chain being as strong as its weakest link. A
    group with an undetermined pair has confidence 0.
    """
    from scipy.stats import norm  # noqa: PLC0415 - 0.6 s to import; every command imports this module

    sigma = noise_sigma(inf)
    cut = 1 - inf.threshold
    hosts = inf.hosts
    group = {h: inf.group_of(h) for h in hosts}
    same: dict[frozenset[str], float] = {}
    apart: dict[frozenset[str], float] = {}
    for p, rel in zip(probes, inf.relative, strict=True):
        for h, r in rel.items():
            for q in p.senders:
                if q == h:
                    continue
                key = frozenset((h, q))
                if group[h] == group[q]:
                    if sum(x in p.senders for x in group[h]) == 2:
                        same[key] = max(same.get(key, 0.0), float(norm.cdf((cut - r) / sigma)))
                else:
                    apart[key] = max(apart.get(key, 0.0), float(norm.cdf((r - cut) / sigma)))
    out: dict[tuple[str, ...], float] = {}
    open_hosts = {x for pair in _undetermined_hosts(inf) for x in pair}
    for g in inf.groups:
        if open_hosts & set(g):
            out[g] = 0.0
            continue
        inside = _widest_paths(g, same)
        worst = min((inside[frozenset((a, b))] for a, b in combinations(g, 2)), default=1.0)
        for other in inf.groups:
            if other == g:
                continue
            # the best member pair's direct evidence, through each side's own links
            best = 0.0
            for a in g:
                for b in other:
                    ev = apart.get(frozenset((a, b)), 0.0)
                    if ev > best:
                        best = ev
            worst = min(worst, best)
        out[g] = worst
    return out


def _widest_paths(g: Sequence[str], direct: Mapping[frozenset[str], float]) -> dict[frozenset[str], float]:
    """Within ``g``: for each pair, the best over chains of the weakest link (Floyd–Warshall)."""
    w = {frozenset((a, b)): direct.get(frozenset((a, b)), 0.0) for a, b in combinations(g, 2)}
    for m in g:
        for a, b in combinations(g, 2):
            if m in (a, b):
                continue
            via = min(w[frozenset((a, m))], w[frozenset((m, b))])
            if via > w[frozenset((a, b))]:
                w[frozenset((a, b))] = via
    return w


def _undetermined_hosts(inf: Inference) -> list[tuple[str, str]]:
    return [(x, y) for a, b in inf.undetermined for x in inf.group_of(a) for y in inf.group_of(b)]


def _representatives(inf: Inference) -> dict[str, tuple[str, ...]]:
    """Root (first host) -> group, for groups involved in an undetermined pair."""
    open_roots = sorted({r for pair in inf.undetermined for r in pair})
    return {r: inf.group_of(r) for r in open_roots}


def split_batch(inf: Inference) -> list[frozenset[str]]:
    """Two probes per bit of the open components' numbers (one representative each)."""
    return split_probes(sorted(_representatives(inf)))


def split_probes(reps: Sequence[str]) -> list[frozenset[str]]:
    """Two probes per bit of each representative's position in ``reps`` (module doc, step 2)."""
    m = len(reps)
    if m < 2:
        return []
    batch = []
    for bit in range(max(1, math.ceil(math.log2(m)))):
        for value in (0, 1):
            s = frozenset(r for i, r in enumerate(reps) if (i >> bit) & 1 == value)
            if len(s) >= 2:  # a lone sender learns nothing about pairs
                batch.append(s)
    return list(dict.fromkeys(batch))


def pairs_batch(inf: Inference) -> list[frozenset[str]]:
    """Probes each packing undetermined pairs that no other possible partner can disturb."""
    todo = list(inf.undetermined)
    open_with: dict[str, set[str]] = {}
    for a, b in todo:
        open_with.setdefault(a, set()).add(b)
        open_with.setdefault(b, set()).add(a)
    batch: list[frozenset[str]] = []
    while todo:
        probe: set[str] = set()
        rest = []
        for a, b in todo:
            # a newcomer may not be open with anyone already in the probe, nor the reverse
            clash = any(x in probe or (open_with[x] & probe) for x in (a, b))
            if clash:
                rest.append((a, b))
            else:
                probe |= {a, b}
        batch.append(frozenset(probe))
        todo = rest
    return batch


def verify_batch(inf: Inference) -> list[frozenset[str]]:
    """Probe v: member v (cyclically) of every group; g probes for a largest group of g."""
    g = max((len(x) for x in inf.groups), default=0)
    if len(inf.groups) < 2 and g < 2:
        return []
    return [frozenset(grp[v % len(grp)] for grp in inf.groups) for v in range(g)]


def plan_batch(inf: Inference, probes: Sequence[Probe], stalled: bool = False) -> tuple[str, list[frozenset[str]]]:
    """The next batch of probes (phase name, sender sets); ``("done", [])`` when settled.

    ``stalled``: the previous split batch resolved less than half the open pairs
    (then pairs are probed one by one, packed). Verification runs once per
    partition; if it changes nothing the audit is done.
    """
    if inf.undetermined:
        if not stalled:
            split = split_batch(inf)
            if split:
                return "split", split
        return "pairs", pairs_batch(inf)
    verify = verify_batch(inf)
    done = {p.senders for p in probes}
    if verify and not all(s in done for s in verify):
        return "verify", verify
    solo = sorted({h for _, h in inf.unexplained} - {h for p in probes for h in p.senders
                                                      if p.senders == {h}})
    if solo:
        return "solo", [frozenset((h,)) for h in solo]
    return "done", []


def probe_count_bound(contended: int, largest_group: int) -> int:
    """Probes the plan needs when no group has more than two hosts (module doc)."""
    split = 2 * math.ceil(math.log2(contended)) if contended >= 2 else 0
    return 1 + split + max(1, largest_group)


@dataclass(frozen=True)
class SizeLoss:
    """Bandwidth lost under full load by the hosts of groups of one size."""

    size: int
    groups: int
    hosts: int
    mean_rate: float  # bit/s under full load
    mean_baseline: float  # bit/s without interference
    loss: float  # 1 − mean_rate / mean_baseline


def loss_by_group_size(groups: Sequence[Sequence[str]], full_rates: Mapping[str, float],
                       baseline: Mapping[str, float]) -> list[SizeLoss]:
    """Per group size: the mean full-load rate of its hosts against their baseline (the blog's table)."""
    by_size: dict[int, list[Sequence[str]]] = {}
    for g in groups:
        by_size.setdefault(len(g), []).append(g)
    out = []
    for size in sorted(by_size):
        hosts = [h for g in by_size[size] for h in g if h in full_rates]
        if not hosts:
            continue
        rate = statistics.fmean(full_rates[h] for h in hosts)
        base = statistics.fmean(baseline[h] for h in hosts)
        out.append(SizeLoss(size, len(by_size[size]), len(hosts), rate, base,
                            1 - rate / base if base > 0 else math.nan))
    return out


class AdaptiveAudit:
    """The probe plan as a state machine: ask :meth:`next_probe`, measure, :meth:`record`.

    The first probe is every host at once (full load); then batches from
    :func:`plan_batch` until it says done or ``max_probes`` were measured.
    Pure: the caller measures (the colocation workload over SSH, or a model in tests).
    """

    def __init__(self, hosts: Sequence[str], nominal: Mapping[str, float | None] | None = None,
                 threshold: float = DEFAULT_THRESHOLD, max_probes: int = 40,
                 classes: Mapping[str, str] | None = None) -> None:
        if len(set(hosts)) != len(hosts) or len(hosts) < 2:
            raise ValueError("the audit needs at least two distinct hosts")
        self.hosts = list(hosts)
        self.nominal = dict(nominal or {})
        self.threshold = threshold
        self.max_probes = max_probes
        self.classes = dict(classes or {})
        self.probes: list[Probe] = []
        self._queue: list[tuple[str, frozenset[str]]] = []
        self._split_open: int | None = None  # open pairs when the last split batch was planned

    def record(self, senders: Iterable[str], rates: Mapping[str, float], phase: str) -> None:
        s = frozenset(senders)
        missing = s - set(rates)
        if missing:
            raise ValueError(f"no rate for {', '.join(sorted(missing))}")
        self.probes.append(Probe(s, {h: float(rates[h]) for h in s}, phase))

    def inference(self) -> Inference:
        return infer(self.probes, self.hosts, self.nominal, self.threshold, self.classes)

    def next_probe(self) -> tuple[str, frozenset[str]] | None:
        """(phase, senders) of the next probe, or None when the groups are settled."""
        if len(self.probes) >= self.max_probes:
            return None
        if not self.probes:
            return "full", frozenset(self.hosts)
        if len(self.probes) == 1 and not self._queue and not all(
                self.nominal.get(h) for h in self.hosts):
            # Without a nominal rate the full-load probe is every host's only rate, so
            # nobody can be seen losing bandwidth yet: split everyone once first.
            self._queue = [("split", s) for s in split_probes(self.hosts)]
        if not self._queue:
            inf = self.inference()
            opened = len(inf.undetermined)
            stalled = self._split_open is not None and opened > self._split_open / 2
            phase, batch = plan_batch(inf, self.probes, stalled)
            self._split_open = opened if phase == "split" else None
            self._queue = [(phase, s) for s in batch]
        return self._queue.pop(0) if self._queue else None
