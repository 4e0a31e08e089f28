"""scamper tracelb parsing (real outputs in tests/data), MDA graph analysis, IP→AS, inflation."""

from __future__ import annotations

import ipaddress
import random
from pathlib import Path

import pytest
from geographiclib.geodesic import Geodesic

from cloudbench.analysis.paths import (
    PathGraph,
    PrefixTable,
    anonymous_hops,
    as_path,
    diamonds,
    inflation,
    path_change,
)
from cloudbench.errors import ResultError
from cloudbench.workloads.traceroute.data import load_prefix_table, trace_tables
from cloudbench.workloads.traceroute.reader import Trace, parse_output
from tests.paths import DATA


def load(name: str) -> Trace:
    traces = parse_output((DATA / name).read_text().splitlines())
    assert len(traces) == 1
    return traces[0]


def graph(t: Trace) -> PathGraph:
    return PathGraph.from_rows(t.src, t.dst, [
        (e.src, e.dst, e.ttl, None if e.rtt_min_ms is None else e.rtt_min_ms * 1000) for e in t.edges])


@pytest.mark.parametrize(("name", "width", "hops"), [
    ("scamper_tracelb_2way.json", 2, 7),
    ("scamper_tracelb_3way.json", 3, 7),
])
def test_real_tracelb_outputs(name: str, width: int, hops: int) -> None:
    t = load(name)
    assert t.method == "udp-dport" and t.confidence == 95 and t.reached
    g = graph(t)
    assert g.hop_count() == hops
    ds = diamonds(g)
    assert len(ds) == 1
    d = ds[0]
    assert (d.width, d.length) == (width, 2)
    assert d.divergence.startswith("198.19.128.") and d.convergence is not None
    widths = [len(h) for h in g.hops()]
    assert max(widths) == width and widths.count(width) == 1
    assert anonymous_hops(g) == 0
    assert g.rtt_min_us[g.dst] == pytest.approx(t.dst_rtt_min_ms * 1000)  # type: ignore[operator]


def test_anonymous_hops_chain_form() -> None:
    """scamper's single-link shape: unanswered hops as [{"addr": "*"}] before the next node."""
    obj = ('{"type":"tracelb","src":"10.0.0.1","dst":"10.0.9.9","method":"icmp-echo","confidence":99,'
           '"probec":9,"firsthop":1,"nodes":[{"addr":"10.0.1.1","q_ttl":1,"linkc":1,"links":['
           '[{"addr":"*"}],[{"addr":"*"}],[{"addr":"10.0.4.1","probes":[{"ttl":4,"replies":[{"rtt":1.5}]}]}]]},'
           '{"addr":"10.0.4.1","q_ttl":1,"linkc":1,"links":[[{"addr":"10.0.9.9","probes":'
           '[{"ttl":5,"replies":[{"rtt":2.0}]}]}]]}]}')
    (t,) = parse_output([obj])
    g = graph(t)
    assert anonymous_hops(g) == 2
    assert g.hop_count() == 5
    assert [len(h) for h in g.hops()] == [1, 1, 1, 1, 1]
    assert diamonds(g) == []
    assert t.dst_rtt_min_ms == 2.0


def test_path_change_between_repetitions() -> None:
    a, b = graph(load("scamper_tracelb_2way.json")), graph(load("scamper_tracelb_2way.json"))
    assert path_change(a, b)["changed"] is False
    b.edges.discard(next(e for e in sorted(b.edges) if e[1] == "198.19.128.14"))
    c = path_change(a, b)
    assert c["changed"] and 0 < c["jaccard_distance"] < 1


def test_prefix_table_longest_match_against_brute_force() -> None:
    rng = random.Random(7)
    prefixes = [("198.18.0.0/15", 1), ("198.19.0.0/16", 2), ("198.19.128.0/17", 3),
                ("198.19.128.4/30", 4), ("198.19.128.6/32", 5), ("10.0.0.0/8", 6)]
    table = PrefixTable.from_rows([(p, a, f"as{a}") for p, a in prefixes])
    nets = [(ipaddress.ip_network(p), a) for p, a in prefixes]
    for _ in range(2000):
        ip = ipaddress.ip_address(rng.choice([0xC6120000, 0xC6138000, 0x0A000000, 0x08080808])
                                  + rng.randrange(1 << 16))
        best = max((n for n in nets if ip in n[0]), key=lambda n: n[0].prefixlen, default=None)
        hit = table.lookup(str(ip))
        assert (hit[0] if hit else None) == (best[1] if best else None), ip
    assert table.lookup("*x") is None


def test_as_path_and_table_csv(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("prefix,asn,name\n198.18.1.0/24,64513,a\n198.19.0.0/30,64513,a\n"
                   "198.19.128.0/17,64512,transit\n198.19.0.4/30,64514,b\n198.18.2.0/24,64514,b\n")
    g = graph(load("scamper_tracelb_2way.json"))
    assert as_path(g, load_prefix_table(csv)) == [64513, 64512, 64514]
    bad = tmp_path / "bad.csv"
    bad.write_text("198.18.0.0/15,notanumber\n")
    with pytest.raises(ResultError, match=r"bad\.csv:1"):
        load_prefix_table(bad)


def test_inflation_against_geodesic() -> None:
    a, b = (40.71, -74.01), (51.51, -0.13)
    d = Geodesic.WGS84.Inverse(*a, *b)["s12"]
    r = inflation(80_000.0, a, b)
    assert r["distance_km"] == pytest.approx(d / 1000)
    assert r["bound_c_us"] == pytest.approx(2 * d / 299_792_458.0 * 1e6)
    assert r["inflation_c"] == pytest.approx(80_000.0 / r["bound_c_us"])
    assert r["inflation_fibre"] == pytest.approx(r["inflation_c"] * 2 / 3)


def test_trace_tables_schema() -> None:
    t = load("scamper_tracelb_3way.json")
    links, traces = trace_tables([("a-1", t)], {t.dst: "c-1"}, 2)
    assert links.num_rows == len(t.edges)
    assert traces.num_rows == 1
    row = traces.to_pylist()[0]
    assert row["dst"] == "c-1" and row["repetition"] == 2 and row["reached"]
    assert row["rtt_min_us"] == pytest.approx(t.dst_rtt_min_ms * 1000)  # type: ignore[operator]


def test_workload_output_with_two_traces_and_a_long_diamond() -> None:
    """Raw output of the traceroute workload (one source, two destinations; hops: 2 on one link)."""
    traces = parse_output((DATA / "scamper_tracelb_workload_sb.json").read_text().splitlines())
    assert len(traces) == 2 and len({t.dst for t in traces}) == 2
    shapes = sorted((d.width, d.length) for t in traces for d in diamonds(graph(t)))
    assert shapes == [(2, 2), (2, 3)]
