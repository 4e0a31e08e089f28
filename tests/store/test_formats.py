"""Every versioned format of :mod:`cloudbench.store.formats`, through its own reader and writer.

For each format that cloudbench reads back: the current version survives its
writer and its reader; a version from a newer cloudbench is refused with an
error that names the file and says to upgrade; and every version in the
format's history is still read from a fixture kept in ``tests/data/formats/``
(named ``<stem>-v<version>[-<variant>].<ext>``; its README says where each came
from). Also: one place for version numbers, and report.json survives a crash
while it is written.
"""

from __future__ import annotations

import ast
import errno
import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cloudbench.core.topology import Topology
from cloudbench.errors import ProvisionError, RecordError, ResultError
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds.provider import cluster_from_outputs
from cloudbench.report import files as report_files
from cloudbench.report.files import MIGRATIONS, REPORT_DIR, REPORT_JSON, read_report, to_json, write_report
from cloudbench.store import formats
from cloudbench.store.formats import Format
from cloudbench.store.manifest import (
    FailureRecord,
    HostRecord,
    Manifest,
    RepetitionRecord,
    TrialRecord,
    load_manifest,
    pooling_key,
    save_manifest,
)
from cloudbench.store.parquet import SCHEMA_KEY, read_parquet, write_parquet
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SUMMARY_KIND, SUMMARY_SCHEMA
from cloudbench.workers import echo as echo_worker
from cloudbench.workers import echo_protocol
from cloudbench.workers import throughput as throughput_worker
from cloudbench.workloads import parse_spec
from cloudbench.workloads.echo.reader import FLAG_TIMEOUT, read_echo_file
from cloudbench.workloads.throughput.reader import parse_throughput_record
from cloudbench.workloads.traceroute.reader import parse_output
from tests.paths import DATA, ROOT

FIXTURES = DATA / "formats"


def set_json_version(path: Path, version: int) -> None:
    data = json.loads(path.read_text())
    data["schema"] = version
    path.write_text(json.dumps(data))


# -- manifest.json --------------------------------------------------------------------------
def a_manifest() -> Manifest:
    host = HostRecord(name="a-1", labels={"provider": "netns", "region": "r1", "zone": "r1-a", "subnet": "a",
                                          "vm_type": "local"}, address="198.18.1.10", facts={"mtu": 1500})
    sha = "ab" * 32
    return Manifest.model_validate({
        "schema": formats.MANIFEST.current, "campaign": "camp", "run_id": "20260101T000000Z-abcd",
        "status": "partial", "spec": {"workloads": [{"kind": "echo", "name": "echo"}]}, "seed": 7,
        "repetitions": [RepetitionRecord(index=0, provider="netns", hosts=[host], status="ok")],
        "trials": [TrialRecord(id="r000-t000-echo", repetition=0, workload="echo", kind="echo", status="partial",
                               rows=3, files={"echo/r000-t000-echo.parquet": sha},
                               failures=[FailureRecord(host="a-1", command="echo.py run", exit_code=1,
                                                       stderr_tail="boom")],
                               stats={"a-1": {"schema": 1, "rows": 3}})],
        "files": {"echo/r000-t000-echo.parquet": sha},
        "added_by_a_newer_writer_of_the_same_version": {"kept": True},
    })


def manifest_roundtrip(tmp: Path) -> None:
    m = a_manifest()
    path = tmp / "manifest.json"
    save_manifest(path, m)
    assert json.loads(path.read_text())["schema"] == formats.MANIFEST.current
    back = load_manifest(path)
    assert back == m
    assert back.model_extra == {"added_by_a_newer_writer_of_the_same_version": {"kept": True}}


def manifest_future(tmp: Path, version: int) -> tuple[str, Callable[[], object]]:
    path = tmp / "manifest.json"
    save_manifest(path, a_manifest())
    set_json_version(path, version)
    return str(path), lambda: load_manifest(path)


def manifest_fixture(path: Path, version: int, tmp: Path) -> None:
    raw = json.loads(path.read_text())
    m = load_manifest(path)
    assert m.schema_version == version
    assert m.to_json() == raw  # every key the runner wrote survives the typed model
    assert (m.campaign, m.status, len(m.repetitions)) == ("wan", "complete", 1)
    assert [(t.kind, t.status) for t in m.trials] == [("traceroute", "ok"), ("echo", "ok")]
    assert set(m.files) >= {f for t in m.trials for f in t.files}
    key = pooling_key(m, 0)
    assert key["regions"] == "fra,lon,par"
    if version == 1:  # names only: no resolved values to compare
        assert m.resolved is None and "vm_type_definitions" not in key and "wan" not in key
    else:
        assert m.resolved is not None
        assert json.loads(key["vm_type_definitions"])["local"]["shaping"] == "none"
        links = json.loads(key["wan"])["links"]
        assert {(x["a"], x["b"]) for x in links} == {("fra", "lon"), ("fra", "par"), ("lon", "par")}
        assert [w["name"] for w in json.loads(key["workloads"])] == ["traceroute", "echo"]
    save_manifest(tmp / "manifest.json", m)  # written back by this cloudbench: the same manifest
    assert load_manifest(tmp / "manifest.json") == m


# -- Parquet files ----------------------------------------------------------------------------
def a_table() -> pa.Table:
    return pa.table({"src": ["a", "b", "a"], "rtt_us": [10.5, None, 12.0], "n": [1, 2, 3]})


def parquet_roundtrip(tmp: Path) -> None:
    path = tmp / "t.parquet"
    write_parquet(path, a_table(), kind="echo")
    back = read_parquet(path, kind="echo")
    assert back.equals(a_table())
    assert (back.schema.metadata or {})[SCHEMA_KEY] == str(formats.PARQUET.current).encode()


def parquet_future(tmp: Path, version: int) -> tuple[str, Callable[[], object]]:
    path = tmp / "t.parquet"
    write_parquet(path, a_table(), kind="echo")
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({**(table.schema.metadata or {}),
                                                  SCHEMA_KEY: str(version).encode()}), path)
    return str(path), lambda: read_parquet(path, kind="echo")


def parquet_fixture(path: Path, version: int, tmp: Path) -> None:
    if path.stem.endswith("-echo"):  # echo observations: schema 2 added run_id, trial and group
        table = read_parquet(path, kind="echo")
        assert (table.schema.metadata or {})[SCHEMA_KEY] == str(version).encode()
        assert table.num_rows == 6
        labelled = {"run_id", "trial", "group"} <= set(table.column_names)
        assert labelled == (version >= 2)
        if version >= 2:
            assert set(table.column("group").to_pylist()) == {"cross_zone"}
            assert b"cloudbench.t0_utc_us" in (table.schema.metadata or {})
        return
    table = read_parquet(path, kind=SUMMARY_KIND)  # the summaries of the run of manifest-v1.json
    assert (table.schema.metadata or {})[SCHEMA_KEY] == str(version).encode()
    assert table.column_names == SUMMARY_SCHEMA.names and table.num_rows == 28
    assert set(table.column("workload").unique().to_pylist()) == {"echo", "traceroute"}


# -- report.json ------------------------------------------------------------------------------
def a_report(mean: float = float("nan")) -> dict[str, Any]:
    return {"campaign": "camp", "run_id": "20260101T000000Z-abcd", "status": "complete", "damaged": [],
            "workloads": {"echo": {"kind": "echo", "unit": "us", "rows": 4,
                                   "groups": [{"group": "self", "count": 4, "mean": mean}]}}}


def report_roundtrip(tmp: Path) -> None:
    rep = a_report()  # no version: the writer stamps it
    written = write_report(RunDir(tmp), rep)
    path = tmp / REPORT_DIR / REPORT_JSON
    assert written[0] == path and (tmp / REPORT_DIR / "echo_groups.csv") in written
    back = read_report(path)
    assert back == {"schema": formats.REPORT.current, **to_json(rep)}
    assert back["workloads"]["echo"]["groups"][0]["mean"] is None  # JSON has no NaN
    assert next(iter(json.loads(path.read_text()))) == "schema"
    with pytest.raises(ValueError, match="version"):
        write_report(RunDir(tmp), {**rep, "schema": formats.REPORT.current - 1})


def report_future(tmp: Path, version: int) -> tuple[str, Callable[[], object]]:
    write_report(RunDir(tmp), a_report())
    path = tmp / REPORT_DIR / REPORT_JSON
    set_json_version(path, version)
    return str(path), lambda: read_report(path)


def report_fixture(path: Path, version: int, tmp: Path) -> None:
    raw = json.loads(path.read_text())
    rep = read_report(path)
    assert rep["schema"] == formats.REPORT.current
    # report-v1.json, -v2 and -v3 are the same run, written by cloudbench 0f7164e, before the
    # warnings were listed, and today: each migrates to the newest.
    v3 = read_report(FIXTURES / "report-v3.json")
    assert rep == v3 and list(rep) == list(v3)
    if version == 1:
        assert "schema" not in raw and set(raw["paths"]) == {"traceroute"}
        assert "paths" not in rep
        assert rep["workloads"]["traceroute"] == raw["paths"]["traceroute"]
        assert rep["workloads"]["traceroute"]["kind"] == "traceroute"
        assert rep["workloads"]["echo"] == raw["workloads"]["echo"]
        assert {k: v for k, v in rep.items() if k not in ("schema", "workloads", "warnings")} == {
            k: v for k, v in raw.items() if k not in ("workloads", "paths")}
    elif version == 2:
        assert rep == {**raw, "schema": 3, "warnings": []}
    else:
        assert rep == raw


# -- echo worker files ------------------------------------------------------------------------
def echo_header(schema: int) -> dict[str, Any]:
    # the keys the worker writes (workers/echo.py, _measure)
    return {"schema": schema, "worker_version": echo_worker.WORKER_VERSION, "clock": "CLOCK_MONOTONIC",
            "host": "a", "host_id": 0, "peers": [{"id": 0, "name": "a", "addr": "127.0.0.2", "port": 9000},
                                                 {"id": 1, "name": "b", "addr": "127.0.0.3", "port": 9001}],
            "rate": 10.0, "payload": 64, "timeout_s": 1.0, "warmup_s": 0.0, "duration_s": 0.2,
            "rounds": 2, "t0_ns": 5_000_000, "rx_stamp": "kernel", "connection": "per_round", "idle_s": 0.0}


def write_echo(path: Path, header: dict[str, Any], records: list[tuple[int, int, int, int, int, int]]) -> None:
    """An echo file as the worker writes it: its magic, header length and record writer."""
    blob = json.dumps(header, separators=(",", ":")).encode()
    with path.open("wb", buffering=0) as f:
        f.write(echo_protocol.MAGIC + echo_protocol.HEADER_LEN.pack(len(blob)) + blob)
        writer = echo_protocol.RecordWriter(f)
        for r in records:
            writer.add(*r)
        writer.flush()


ECHO_RECORDS = [(1, 1, 0, 105_000_000, 105_400_000, 90_000), (0, 0, 0, 5_000_000, 5_200_000, 80_000),
                (1, 0, 0, 105_000_000, 105_300_000, 70_000), (0, 1, FLAG_TIMEOUT, 5_000_000, 0, -1)]


def echo_roundtrip(tmp: Path) -> None:
    path = tmp / "a.bin"
    write_echo(path, echo_header(formats.ECHO_RAW.current), ECHO_RECORDS)
    header, rec = read_echo_file(path)
    assert header == {**echo_header(formats.ECHO_RAW.current), "truncated": False}
    assert [tuple(int(x) for x in r) for r in rec] == sorted(ECHO_RECORDS)  # (round, peer) order


def echo_future(tmp: Path, version: int) -> tuple[str, Callable[[], object]]:
    path = tmp / "a.bin"
    write_echo(path, echo_header(version), ECHO_RECORDS)
    return str(path), lambda: read_echo_file(path)


def echo_fixture(path: Path, version: int, tmp: Path) -> None:
    # a real 0.3 s run of worker 1 (cloudbench 0f7164e^), 2 or 3 (per_round), host h0 of 2 on loopback
    header, rec = read_echo_file(path)
    assert header["schema"] == version and header["truncated"] is False
    assert header["worker_version"] == path.stem.rsplit("-worker", 1)[1]
    assert header["host"] == "h0" and len(header["peers"]) == 1
    assert len(rec) == 6 and list(rec["round"]) == list(range(6))
    ok = rec[(rec["flags"] & FLAG_TIMEOUT) == 0]
    assert len(ok) >= 5 and bool((ok["recv_ns"] > ok["send_ns"]).all())
    assert int(np.min(rec["send_ns"])) >= header["t0_ns"]
    if version == 1:  # persistent connections only: no handshake in any record
        assert header["connection"] == "persistent" and (rec["connect_ns"] == -1).all()
    else:
        assert header["connection"] == "per_round" and bool((ok["connect_ns"] > 0).all())


# -- throughput worker records -------------------------------------------------------------------
def write_tput(path: Path, schema: int) -> None:
    """A record as ``throughput.py client`` writes it, through the worker's own Recorder."""
    rec = throughput_worker.Recorder(str(path))
    try:
        rec.write({"type": "header", "schema": schema, "worker": "throughput",
                   "version": throughput_worker.WORKER_VERSION, "clock": "CLOCK_MONOTONIC", "host": "a",
                   "config": {"tool": "nuttcp"}})
        base = {"burst": 0, "attempt": 0}
        rec.write({"type": "start", **base, "t_ns": 100, "argv": ["nuttcp", "-T1", "198.18.1.11"]})
        rec.write({"type": "out", **base, "t_ns": 1_000_000_100,
                   "text": "megabytes=11.9209 real_seconds=1.00 rate_Mbps=100.0000 retrans=0"})
        rec.write({"type": "end", **base, "t_ns": 1_000_000_200, "sent_until_ns": 1_000_000_150,
                   "rest_before_ns": 0, "rc": 0, "stop": "time", "stderr": ""})
    finally:
        rec.close()


def tput_roundtrip(tmp: Path) -> None:
    path = tmp / "tput.jsonl"
    write_tput(path, formats.THROUGHPUT_RECORD.current)
    rec = parse_throughput_record(path.read_text())
    assert rec.header["schema"] == formats.THROUGHPUT_RECORD.current and rec.header["host"] == "a"
    (b,) = rec.bursts
    assert (b.start_ns, b.end_ns, b.sent_until_ns, b.rc, b.stop) == (100, 1_000_000_200, 1_000_000_150, 0, "time")
    assert b.lines == ["megabytes=11.9209 real_seconds=1.00 rate_Mbps=100.0000 retrans=0"]


def tput_future(tmp: Path, version: int) -> tuple[str, Callable[[], object]]:
    path = tmp / "tput.jsonl"
    write_tput(path, version)
    return str(path), lambda: parse_throughput_record(path.read_text(), str(path))


def tput_fixture(path: Path, version: int, tmp: Path) -> None:
    # a real nuttcp on/off run (2 bursts of 2 s) on the testbed
    rec = parse_throughput_record(path.read_text())
    assert rec.header["schema"] == version and rec.header["config"]["tool"] == "nuttcp"
    assert [(b.index, b.rc, b.stop) for b in rec.bursts] == [(0, 0, "time"), (1, 0, "time")]
    assert all(any("real_seconds=" in line for line in b.lines) for b in rec.bursts)


# -- cloud stack outputs ----------------------------------------------------------------------
OUTPUTS_SPEC = """\
name: outputs-fixture
providers:
  aws:
    controller_cidr: 203.0.113.7/32
    regions:
      us-east-1:
        zones:
          us-east-1a:
            subnets:
              s1: {hosts: 2, vm_type: m5.large}
workloads:
  - kind: echo
    duration: 10s
"""
OUTPUTS_STACK = "outputs-fixture-r00"


def outputs_setup() -> tuple[Topology, cc.CloudSettings]:
    topo = parse_spec(OUTPUTS_SPEC, "outputs.yaml").topology()
    client = asyncssh.generate_private_key("ssh-ed25519")
    settings = cc.CloudSettings(
        cloud="aws", campaign="outputs-fixture", stack=OUTPUTS_STACK, owner="alice",
        expiry_utc="2030-01-01T00:00:00Z", controller_cidr="203.0.113.7/32",
        client_public_key=client.export_public_key().decode().strip(),
        host_keys=cc.new_host_keys([h.name for h in topo.hosts], OUTPUTS_STACK))
    return topo, settings


def write_outputs(path: Path, topo: Topology, settings: cc.CloudSettings, schema: int) -> None:
    """The exports of a cloud program, as JSON (how Pulumi hands them back)."""
    hosts = {h.name: {**cc.host_record(h, h.zone), "id": f"i-{i:017x}", "private_ip": f"10.0.0.{10 + i}",
                      "public_ip": f"203.0.113.{21 + i}"} for i, h in enumerate(topo.hosts)}
    path.write_text(json.dumps({cc.OUTPUT_META: {**cc.meta_output(settings), "schema": schema},
                                cc.OUTPUT_HOSTS: hosts}))


def read_outputs(path: Path, topo: Topology, settings: cc.CloudSettings, tmp: Path) -> Any:
    return cluster_from_outputs("aws", settings.stack, topo, json.loads(path.read_text()), settings, tmp / "key")


def outputs_roundtrip(tmp: Path) -> None:
    topo, settings = outputs_setup()
    path = tmp / "outputs.json"
    write_outputs(path, topo, settings, formats.CLOUD_OUTPUTS.current)
    cluster = read_outputs(path, topo, settings, tmp)
    assert [(h.name, h.address, h.ssh_host) for h in cluster.hosts] == [
        ("s1-1", "10.0.0.10", "203.0.113.21"), ("s1-2", "10.0.0.11", "203.0.113.22")]
    assert {h.user for h in cluster.hosts} == {cc.USER} and {h.workdir for h in cluster.hosts} == {cc.WORKDIR}


def outputs_future(tmp: Path, version: int) -> tuple[str, Callable[[], object]]:
    topo, settings = outputs_setup()
    path = tmp / "outputs.json"
    write_outputs(path, topo, settings, version)
    return settings.stack, lambda: read_outputs(path, topo, settings, tmp)


def outputs_fixture(path: Path, version: int, tmp: Path) -> None:
    topo, settings = outputs_setup()
    assert json.loads(path.read_text())[cc.OUTPUT_META]["schema"] == version
    cluster = read_outputs(path, topo, settings, tmp)
    assert [(h.name, h.address, h.ssh_host, h.facts["instance_id"]) for h in cluster.hosts] == [
        ("s1-1", "10.0.0.10", "203.0.113.21", "i-0a1b2c3d4e5f60718"),
        ("s1-2", "10.0.0.11", "203.0.113.22", "i-0f1e2d3c4b5a69788")]
    assert all(h.host_key == settings.host_keys[h.name].public for h in cluster.hosts)


# -- traceroute worker output -----------------------------------------------------------------
def traceroute_fixture(path: Path, version: int, tmp: Path) -> None:
    # scamper's own JSON lines from the run of manifest-v1.json (f-1 → p-1), one trace kept
    with path.open() as f:
        (trace,) = parse_output(f)
    assert (trace.src, trace.dst, trace.method) == ("198.18.1.10", "198.18.2.10", "udp-dport")
    assert trace.reached and trace.dst_rtt_min_ms is not None and len(trace.nodes) >= 3


# -- campaign journal -------------------------------------------------------------------------
def journal_create(path: Path) -> None:
    from cloudbench.campaign.journal import Journal

    Journal.create(path, {"name": "fixture", "state": "active"},
                   [{"index": 0, "base_utc": "2026-11-24T00:00:00.000000Z",
                     "planned_utc": "2026-11-24T00:00:03.000000Z", "spread_s": 3.0, "cell": 0, "seed": 7}],
                   [{"id": "s0000/r000-t000-echo", "slot": 0, "plan_id": "r000-t000-echo", "repetition": 0,
                     "workload": "echo", "kind": "echo"}]).close()


def journal_check(path: Path) -> None:
    from cloudbench.campaign.journal import Journal

    j = Journal.open(path)
    try:
        assert j.meta()["name"] == "fixture"
        (slot,) = j.slots()
        assert (slot.index, slot.state, slot.seed, slot.spread_s) == (0, "planned", 7, 3.0)
        assert [t.id for t in j.trials(0)] == ["s0000/r000-t000-echo"]
    finally:
        j.close()


def journal_roundtrip(tmp: Path) -> None:
    journal_create(tmp / "journal.sqlite")
    journal_check(tmp / "journal.sqlite")


def journal_future(tmp: Path, version: int) -> tuple[str, Callable[[], object]]:
    import sqlite3

    from cloudbench.campaign.journal import Journal

    path = tmp / "journal.sqlite"
    journal_create(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'journal_version'", (json.dumps(version),))
    return str(path), lambda: Journal.open(path)


def journal_fixture(path: Path, version: int, tmp: Path) -> None:
    copy = tmp / path.name  # SQLite writes beside the file it opens (WAL): read a copy
    copy.write_bytes(path.read_bytes())
    journal_check(copy)


# -- the formats ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """How the tests write, corrupt and read one format."""

    fmt: Format
    stem: str  # fixtures: tests/data/formats/<stem>-v<version>*
    check_fixture: Callable[[Path, int, Path], None]  # (fixture, its version, tmp dir)
    roundtrip: Callable[[Path], None] | None  # writer then reader (None: cloudbench writes no such file)
    future: Callable[[Path, int], tuple[str, Callable[[], object]]] | None  # (what the error names, read)
    error: type[Exception] = ResultError  # what the reader raises for an unknown version
    says: str = "upgrade cloudbench"  # ... and the advice it gives

    def __str__(self) -> str:
        return self.stem


CASES = (
    Case(formats.MANIFEST, "manifest", manifest_fixture, manifest_roundtrip, manifest_future),
    Case(formats.PARQUET, "parquet", parquet_fixture, parquet_roundtrip, parquet_future),
    Case(formats.REPORT, "report", report_fixture, report_roundtrip, report_future),
    Case(formats.ECHO_RAW, "echo", echo_fixture, echo_roundtrip, echo_future),
    Case(formats.THROUGHPUT_RECORD, "tput-record", tput_fixture, tput_roundtrip, tput_future, error=RecordError),
    # Outputs come from the program this cloudbench just ran: a mismatch is a bug, not an old file.
    Case(formats.CLOUD_OUTPUTS, "cloud-outputs", outputs_fixture, outputs_roundtrip, outputs_future,
         error=ProvisionError, says="program and driver disagree"),
    # scamper writes the file and it carries no cloudbench version; see NO_VERSION_CHECK.
    Case(formats.TRACEROUTE_OUTPUT, "traceroute-output", traceroute_fixture, None, None),
    Case(formats.JOURNAL, "journal", journal_fixture, journal_roundtrip, journal_future),
)

NOT_READ = {formats.CONFIRM.name: "confirm.json is written for people and programs; cloudbench never reads it",
            formats.COMPARE.name: "compare.json is written for people and programs; cloudbench never reads it"}
NO_VERSION_CHECK = {
    formats.TRACEROUTE_OUTPUT.name: "scamper's JSON has no cloudbench version; the worker's summary line "
                                    "(kept in the manifest's trial stats) does, and the controller does not "
                                    "check it",
}
KNOWN_GAPS: dict[str, str] = {}  # format name -> why its reader cannot yet meet the tests


def test_every_format_is_tested_or_says_why_not() -> None:
    names = [f.name for f in formats.ALL]
    assert len(set(names)) == len(names)
    assert {c.fmt.name for c in CASES}.isdisjoint(NOT_READ)
    assert set(names) == {c.fmt.name for c in CASES} | set(NOT_READ)
    assert {c.fmt.name for c in CASES if c.future is None} == set(NO_VERSION_CHECK)


@pytest.mark.parametrize("fmt", formats.ALL, ids=lambda f: f.name)
def test_the_current_version_is_the_newest_in_the_history(fmt: Format) -> None:
    assert fmt.current in fmt.history and fmt.current == max(fmt.history)
    assert fmt.readable == frozenset(fmt.history) and all(v >= 1 for v in fmt.history)
    assert all(what.strip() for what in fmt.history.values())


@pytest.mark.parametrize("case", [c for c in CASES if c.roundtrip], ids=str)
def test_the_current_version_roundtrips(case: Case, tmp_path: Path) -> None:
    assert case.roundtrip is not None
    case.roundtrip(tmp_path)


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=KNOWN_GAPS[c.fmt.name]))
    if c.fmt.name in KNOWN_GAPS else c
    for c in CASES if c.future], ids=str)
def test_a_newer_version_is_refused_naming_the_file(case: Case, tmp_path: Path) -> None:
    assert case.future is not None
    newer = max(case.fmt.history) + 1
    where, read = case.future(tmp_path, newer)
    with pytest.raises(case.error) as e:
        read()
    message = str(e.value)
    assert str(newer) in message
    assert where in message and case.says in message, message


@pytest.mark.parametrize(("case", "version"), [(c, v) for c in CASES for v in sorted(c.fmt.history)],
                         ids=lambda x: str(x) if isinstance(x, Case) else f"v{x}")
def test_every_version_in_the_history_is_read_from_its_fixture(case: Case, version: int, tmp_path: Path) -> None:
    paths = sorted(FIXTURES.glob(f"{case.stem}-v{version}.*")) + sorted(FIXTURES.glob(f"{case.stem}-v{version}-*"))
    assert paths, f"no fixture {case.stem}-v{version}* in {FIXTURES}: keep one of every version"
    for path in paths:
        case.check_fixture(path, version, tmp_path)


def test_every_fixture_is_a_version_in_a_history() -> None:
    known = {(c.stem, v) for c in CASES for v in c.fmt.history}
    for path in FIXTURES.iterdir():
        if path.name == "README.md":
            continue
        m = re.fullmatch(r"(.+)-v(\d+)(?:-[\w.]+)?\.\w+", path.name)
        assert m and (m[1], int(m[2])) in known, f"{path.name}: not <stem>-v<version> of a tested format"
        assert path.name in (FIXTURES / "README.md").read_text(), f"{path.name}: not described in the README"


# -- Format.check -----------------------------------------------------------------------------
FMT = Format("thing file", 2, {1: "first", 2: "second"})


@pytest.mark.parametrize(("version", "expected"), [(1, 1), (2, 2), ("2", 2)])
def test_check_accepts_every_version_in_the_history(version: object, expected: int) -> None:
    assert FMT.check(version, "x.json") == expected


@pytest.mark.parametrize(("version", "words"), [
    (3, "thing file schema 3 is unknown to this cloudbench (knows [1, 2]); upgrade cloudbench to read it"),
    ("3", "schema 3 is unknown"),
    (0, "thing file schema 0 was never written by cloudbench (knows [1, 2])"),
    (-1, "was never written"),
    (None, "thing file has no schema version"),
    ("two", "schema version 'two' is not a number"),
    (True, "schema version True is not an integer"),
    (2.0, "schema version 2.0 is not an integer"),
    ([2], "is not an integer"),
])
def test_check_refuses_the_rest_and_says_why(version: object, words: str) -> None:
    with pytest.raises(ResultError) as e:
        FMT.check(version, "dir/x.json")
    assert e.value.path == "dir/x.json" and str(e.value).startswith("dir/x.json: ")
    assert words in str(e.value)
    if not (isinstance(version, int | str) and str(version).isdigit() and int(version) > 2):
        assert "upgrade" not in str(e.value)  # only a newer version is fixed by upgrading


# -- report.json migrations -------------------------------------------------------------------
def test_every_old_report_version_has_a_migration_to_the_next() -> None:
    assert set(MIGRATIONS) == set(formats.REPORT.history) - {formats.REPORT.current}


def test_migrating_report_1_leaves_its_input_alone() -> None:
    raw = json.loads((FIXTURES / "report-v1.json").read_text())
    before = json.dumps(raw)
    migrated = MIGRATIONS[1](raw)
    assert json.dumps(raw) == before
    assert migrated["schema"] == 2 and next(iter(migrated)) == "schema"
    v2 = json.loads((FIXTURES / "report-v2.json").read_text())
    assert MIGRATIONS[2](v2)["schema"] == 3 and json.loads((FIXTURES / "report-v2.json").read_text()) == v2


def test_report_1_without_traceroute_has_no_paths_key(tmp_path: Path) -> None:
    raw = json.loads((FIXTURES / "report-v1.json").read_text())
    del raw["paths"]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(raw))
    rep = read_report(path)
    assert rep == {"schema": 3, **raw, "warnings": []} and list(rep["workloads"]) == ["echo"]


@pytest.mark.parametrize(("doc", "words"), [
    ("[]", "not a JSON object"),
    ('{"schema": 2, "workl', "not a readable report.json"),
    ('{"schema": 2}', "no 'workloads' object"),
    ('{"workloads": {}, "paths": []}', "'paths' that is not an object"),
    ('{"schema": 0, "workloads": {}}', "never written"),
])
def test_a_damaged_report_is_a_result_error(tmp_path: Path, doc: str, words: str) -> None:
    path = tmp_path / "report.json"
    path.write_text(doc)
    with pytest.raises(ResultError, match=re.escape(words)) as e:
        read_report(path)
    assert e.value.path == str(path)


# -- report.json is replaced atomically -------------------------------------------------------
CRASHES: dict[str, Callable[[], BaseException]] = {
    "disk-full": lambda: OSError(errno.ENOSPC, "No space left on device"),
    "interrupt": KeyboardInterrupt,
}


@pytest.fixture
def crashing_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                    request: pytest.FixtureRequest) -> Iterator[tuple[Path, bytes, list[str]]]:
    """A report written once, then a second write that dies halfway through report.json."""
    crash = CRASHES[request.param]()
    run = RunDir(tmp_path)
    write_report(run, a_report(mean=1.0))
    out = tmp_path / REPORT_DIR
    before = (out / REPORT_JSON).read_bytes()
    listing = sorted(p.name for p in out.iterdir())
    real_atomic = report_files.write_atomic

    def crashing_atomic(path: Path, write: Callable[[Any], Any], mode: int | None = None) -> None:
        def half(f: Any) -> None:  # the real bytes, half of them on disk, then the crash
            buf = io.BytesIO()
            write(buf)
            f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
            f.flush()
            raise crash

        real_atomic(path, half, mode)

    # the atomic writer of the module that writes report.json, its temporary file half written
    monkeypatch.setattr(report_files, "write_atomic", crashing_atomic)
    with pytest.raises(type(crash)):
        write_report(run, a_report(mean=2.0))
    monkeypatch.undo()
    yield out, before, listing


@pytest.mark.parametrize("crashing_report", list(CRASHES), indirect=True)
def test_a_crash_while_writing_report_json_keeps_the_previous_one(
        crashing_report: tuple[Path, bytes, list[str]]) -> None:
    out, before, _ = crashing_report
    assert (out / REPORT_JSON).read_bytes() == before
    assert read_report(out / REPORT_JSON)["workloads"]["echo"]["groups"][0]["mean"] == 1.0


@pytest.mark.parametrize("crashing_report", list(CRASHES), indirect=True)
def test_a_crash_while_writing_report_json_leaves_no_half_file(
        crashing_report: tuple[Path, bytes, list[str]]) -> None:
    out, _, listing = crashing_report
    assert sorted(p.name for p in out.iterdir()) == listing


# -- one place for version numbers --------------------------------------------------------------
VERSION_NAME = re.compile(r"_?([A-Z0-9]+_)*(SCHEMA|VERSION)(_[A-Z0-9]+)*")  # constants: upper case
VERSIONS_HOME = ("cloudbench/store/formats.py", "cloudbench/workers/")


def version_constants(source: str) -> list[str]:
    """``NAME = <int>`` where NAME is a constant that says schema or version, anywhere in ``source``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if not isinstance(value, ast.Constant) or type(value.value) is not int:  # bool is no version
            continue
        found += [f"{t.id} = {value.value!r} (line {node.lineno})" for t in targets
                  if isinstance(t, ast.Name) and VERSION_NAME.fullmatch(t.id)]
    return found


def test_the_version_constant_finder_finds_them() -> None:
    source = """
SCHEMA = 1
REPORT_SCHEMA = 2
MANIFEST_VERSION: int = 3
_API_VERSION = 4
class K:
    SCHEMA_VERSION = 5
ENABLED_SCHEMA = True
THROUGHPUT_SCHEMA = pa.schema([])
SCHEMA_KEY = b"cloudbench.schema"
WORKER_VERSION = "tput-1"
worker_version = 1
schema_version = formats.MANIFEST.current
"""
    assert [f.split(" =")[0] for f in version_constants(source)] == [
        "SCHEMA", "REPORT_SCHEMA", "MANIFEST_VERSION", "_API_VERSION", "SCHEMA_VERSION"]


def test_no_module_but_formats_and_the_workers_has_a_version_constant() -> None:
    offenders: list[str] = []
    for path in sorted((ROOT / "cloudbench").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(VERSIONS_HOME):
            continue
        offenders += [f"{rel}: {c}" for c in version_constants(path.read_text())]
    assert not offenders, "versions belong in cloudbench/store/formats.py:\n" + "\n".join(offenders)
    # and the finder does look at the workers' own constants, which formats.py imports
    assert version_constants((ROOT / "cloudbench/workers/echo_protocol.py").read_text())


def test_a_manifest_writes_no_unset_resolved_or_disk_keys_and_keeps_set_ones() -> None:
    """One serializer drops every optional key that is unset (two wrap serializers on one model:
    pydantic applied only the last, so `resolved: null` came back in schema-1 manifests)."""
    m = a_manifest()
    m.resolved = None
    out = m.to_json()
    assert not {"resolved", "error_kind", "kept_raw"} & set(out)
    m.error_kind, m.kept_raw = "disk_full", {"raw/a.jsonl": "0" * 64}
    out = m.to_json()
    assert out["error_kind"] == "disk_full" and out["kept_raw"] == {"raw/a.jsonl": "0" * 64}
