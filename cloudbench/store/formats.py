"""Every versioned file cloudbench writes or reads: its version and its history, in one place.

A reader accepts the versions a format's history lists and refuses the others
with a :class:`~cloudbench.errors.ResultError` naming the file: a newer version
says to upgrade cloudbench, any other that the file is damaged. The
formats a worker writes on a host (raw echo records, throughput records, traceroute
output, and the configs the controller sends) take their version from the
worker module itself, which stays stdlib-only and standalone: one number, one
place. Old files of every version listed here stay readable; where a version
changed the layout, the format's reader migrates (``migrate_*`` beside the
reader), and ``tests/data/formats/`` keeps a fixture of every version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cloudbench.errors import ResultError
from cloudbench.workers import echo_protocol as echo_format
from cloudbench.workers import throughput as throughput_worker
from cloudbench.workers import traceroute as traceroute_worker


@dataclass(frozen=True)
class Format:
    """One file kind: the version written now and every version it can read."""

    name: str
    current: int
    history: dict[int, str]  # version -> what it was (or what changed)

    @property
    def readable(self) -> frozenset[int]:
        """The versions this cloudbench reads (every one it ever wrote)."""
        return frozenset(self.history)

    def check(self, version: Any, where: str, error: type[ResultError] = ResultError) -> int:
        """``version`` as an int if this cloudbench reads it; else ``error`` (a ResultError) naming ``where``.

        A version above every known one was written by a newer cloudbench (upgrade to
        read it); one below them was never written by any, so the file is damaged.
        """
        if version is None:
            raise error(where, f"{self.name} has no schema version")
        if isinstance(version, bool) or not isinstance(version, int | str):
            raise error(where, f"{self.name} schema version {version!r} is not an integer")
        try:
            v = int(version)
        except ValueError as e:
            raise error(where, f"{self.name} schema version {version!r} is not a number") from e
        if v > max(self.history):
            raise error(
                where,
                f"{self.name} schema {v} is unknown to this cloudbench (knows "
                f"{sorted(self.history)}); upgrade cloudbench to read it",
            )
        if v not in self.history:
            raise error(
                where,
                f"{self.name} schema {v} was never written by cloudbench (knows "
                f"{sorted(self.history)}); the file is damaged or not cloudbench's",
            )
        return v


MANIFEST = Format("manifest", 2, {
    1: "first version: campaign, run_id, status, spec, plan, workers, repetitions with hosts "
       "and facts, trials with files, failures and stats, files with sha256. Keys added within "
       "version 1, written only when set (older readers keep them as extras): a trial's `sweep`; "
       "`error_kind: disk_full` and `kept_raw` of a run a full disk stopped, and the `raw` files of "
       "its trials in status `ingest`",
    2: "adds `resolved`: the vm_type definitions of the hosts, the `wan:` settings and resolved "
       "links, and every workload parameter with its defaults, as the run measured them (the "
       "pooling guard compares these, not names). Schema 1 is read as it is: it has no resolved "
       "values, and its repetitions pool on names with a note. Both versions: a workload `kind: tbdrain` "
       "(spec, resolved workloads, plan and trials) is read as `tokenbucket` (:data:`RENAMED_KINDS`)",
})
PARQUET = Format("parquet file", 2, {
    1: "first version; key `cloudbench.schema` (and `cloudbench.kind`) in the file metadata. "
       "summaries.parquet of throughput/tbdrain runs before the layered package named pair "
       "groups `src->dst`; read_summaries reads them as `src>dst`",
    2: "echo observation files carry `run_id`, `trial` and the pair's latency `group` as columns "
       "(a campaign's files are one dataset) and each host's round 0 in UTC µs in the metadata "
       "(`cloudbench.t0_utc_us`); schema-1 echo files have neither and are labelled from the manifest",
})
REPORT = Format("report.json", 3, {
    1: "unversioned; traceroute sections under a top-level `paths`",
    2: "key `schema`; every workload's section under `workloads` (traceroute too)",
    3: "top-level `warnings`: every warning line the report prints (terminal and page), each naming its "
       "workload; read from 2 by computing them from the sections",
})
CONFIRM = Format("confirm.json", 1, {1: "first version"})
COMPARE = Format("compare.json", 1, {
    1: "first version: rows (workload, metric, group, unit, n_a, n_b, medians, ratio and diff with their "
       "intervals, p, p_holm, verdict), threshold, unit_of_analysis, differences",
})
CLOUD_OUTPUTS = Format("stack outputs", 1, {1: "first version: schema, cloud, campaign, hosts"})
ECHO_RAW = Format("echo worker file", echo_format.SCHEMA, {
    1: "magic CBECHO1, JSON header, 24-byte records (worker 1 and worker 2 write the same layout)",
    2: "worker 3: 32-byte records ending in connect_ns (handshake of a per-round connection, "
       "-1 otherwise); `connection` and `idle_s` in config and header; read 1 as connect_ns -1",
})
THROUGHPUT_RECORD = Format("throughput worker record", throughput_worker.SCHEMA, {
    1: "JSON lines: header, burst start/end, tool output lines with monotonic times (the header's "
       "`worker` is `tput` up to worker tput-1, `throughput` from worker throughput-2 on; nothing reads it)",
})
TRACEROUTE_OUTPUT = Format("traceroute worker output", traceroute_worker.SCHEMA, {
    1: "scamper JSON lines of tracelb, one source per file",
})
RENAMED_KINDS: dict[str, str] = {"tbdrain": "tokenbucket"}
"""Workload kinds by an old spelling -> the kind now. A spec may still write the old one (the
kind's model accepts it); a manifest is migrated on reading (``store.manifest.migrate_kinds``):
the entry keeps the name the old kind gave it when it had none."""

JOURNAL = Format("campaign journal", 1, {
    1: "first version: SQLite tables meta, slots, trials, events (cloudbench.campaign.journal)",
})

ALL: tuple[Format, ...] = (MANIFEST, PARQUET, REPORT, CONFIRM, COMPARE, CLOUD_OUTPUTS, ECHO_RAW, THROUGHPUT_RECORD,
                           TRACEROUTE_OUTPUT, JOURNAL)
