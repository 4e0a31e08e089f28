"""One run of a campaign: provision, deploy, trials in seeded order with rests, pull, tear down.

The manifest is written before the first host exists and after every trial, so
a failure mid-run loses no data already measured; teardown runs in ``finally``
for success, errors, Ctrl-C and SIGTERM alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import platform
import secrets
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cloudbench.core.cluster import Cluster
from cloudbench.core.files import is_disk_full, sha256_file, utc_stamp
from cloudbench.core.interrupts import run_async, signals_as_interrupts
from cloudbench.core.version import __version__
from cloudbench.cost import check_budget, check_leases
from cloudbench.errors import (
    DISK_FULL_REASON,
    CloudbenchError,
    DiskFullError,
    GroupRemoteError,
    ProvisionError,
    RemoteFailure,
    ResultError,
)
from cloudbench.plan import Plan, make_plan
from cloudbench.providers import get_provider, reap_run
from cloudbench.providers.base import Provider
from cloudbench.remote import Remote
from cloudbench.runner.bundle import worker_bundle, worker_versions
from cloudbench.runner.diskfull import RESERVE_FILE
from cloudbench.runner.ui import QuietUI, RunUI
from cloudbench.space import check_free_space, estimate_space, reserve_bytes
from cloudbench.spec.model import Spec
from cloudbench.store.manifest import (
    FailureRecord,
    HostRecord,
    Manifest,
    RepetitionRecord,
    TrialRecord,
    load_manifest,
    resolve_metadata,
    save_manifest,
)
from cloudbench.store.rundir import RunDir, new_run_id
from cloudbench.store.summaries import SummaryRow, write_summaries
from cloudbench.workloads import parse_spec, workload_kind
from cloudbench.workloads.base import Trial, TrialContext, TrialOutcome, trial_params


class CampaignRunner:
    """One run of a campaign: ``execute()`` provisions, measures, records and tears down.

    ``provider_factory`` replaces the spec's provider and ``remote_factory`` the SSH
    fan-out (tests pass fakes: ``cloudbench.testing``); ``after_trial`` is called after
    every trial with its outcome and ``before_trial`` before it starts. ``run_dir``
    places the run (default ``results_root/<campaign>/<new run id>``).

    :meth:`resume` continues an interrupted run in its own directory: the same seed
    and plan, only the trials not yet done; a trial cut off mid-way is run again on
    fresh hosts, and what it left is moved under ``interrupted/`` and labelled
    ``status: interrupted`` in the manifest, so it is kept but never pooled.
    """

    def __init__(
        self,
        spec: Spec,
        spec_path: str,
        results_root: Path,
        ui: RunUI | None = None,
        provider_factory: Callable[[str], Provider] | None = None,
        after_trial: Callable[[Trial, TrialOutcome], None] | None = None,
        remote_factory: Callable[[Cluster], Remote] = Remote,
        run_dir: Path | None = None,
        before_trial: Callable[[Trial], None] | None = None,
        space_check: bool = True,
    ) -> None:
        self.spec = spec
        self.spec_path = spec_path
        self.plan: Plan = make_plan(spec)
        self.ui: RunUI = ui or QuietUI()
        self.provider_factory = provider_factory or self._default_provider
        self.token = secrets.token_hex(16)
        self.run = RunDir(Path(run_dir) if run_dir is not None
                          else Path(results_root) / spec.name / new_run_id())
        self.after_trial = after_trial
        self.before_trial = before_trial
        self.remote_factory = remote_factory
        self.manifest = Manifest(campaign=spec.name, run_id=self.run.run_id)
        self.resuming = False
        self.done: set[str] = set()  # trial ids already measured (resume)
        self.space_check = space_check

    @classmethod
    def resume(cls, spec: Spec, spec_path: str, run_dir: Path, **kwargs: Any) -> CampaignRunner:
        """A runner that finishes the interrupted run in ``run_dir`` (same seed and plan).

        ``spec`` must be the run's spec: its plan must equal the one in the manifest.
        """
        run = RunDir(Path(run_dir))
        manifest = load_manifest(run.manifest_path)
        if not manifest.resumable:
            raise ResultError(str(run.path), f"run is {manifest.status}; only an interrupted (or killed, "
                              "still `running`, or stopped by a full disk) run can be resumed")
        self = cls(spec, spec_path, run.path.parent.parent, run_dir=run.path, **kwargs)
        if self.plan.to_dict()["trials"] != manifest.plan.get("trials") or spec.seed != manifest.seed:
            raise ResultError(str(run.path), "the spec's plan differs from the run's (another spec, seed or "
                              "cloudbench version?): resume needs the same plan")
        self.manifest = manifest
        self.resuming = True
        return self

    def _recover(self) -> None:
        """Label what the dead process left: trials and repetitions cut off become ``interrupted``.

        A trial's files (its Parquet, raw worker files) are moved under
        ``interrupted/<trial>.a<attempt>/`` with their checksums, out of every reader's way.
        """
        m = self.manifest
        for rec in m.trials:
            if rec.status == "ingest":
                self._ingest_kept(rec)
        for rec in m.trials:
            if rec.status != "running":
                continue
            attempt = sum(1 for t in m.trials if t.id == rec.id and t.status == "interrupted") + 1
            dest_root = self.run.path / "interrupted" / f"{rec.id}.a{attempt}"
            moved: dict[str, str] = {}
            for f in sorted(self.run.path.rglob(f"*{rec.id}*")):
                rel = f.relative_to(self.run.path)
                if not f.is_file() or rel.parts[0] == "interrupted":
                    continue
                dest = dest_root / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(f, dest)
                moved[str(dest.relative_to(self.run.path))] = sha256_file(dest)
                m.files.pop(str(rel), None)
            rec.status = "interrupted"
            rec.ended_utc = rec.ended_utc or utc_stamp(micro=True)
            rec.files = moved
            m.files.update(moved)
            rec.attempt = attempt  # type: ignore[attr-defined]  # an extra field of the record
        for r in m.repetitions:
            if r.status is None:
                r.status = "interrupted"
                r.ended_utc = r.ended_utc or utc_stamp(micro=True)
        self.done = {t.id for t in m.trials if t.status in ("ok", "partial", "failed")}
        m.status = "running"
        m.error = None
        m.error_kind = None
        m.kept_raw = {}
        m.ended_utc = None
        m.resumed_utc = [*(getattr(m, "resumed_utc", None) or []), utc_stamp(micro=True)]  # type: ignore[attr-defined]
        self._save()

    def _preflight(self, provider: Provider) -> None:
        findings = provider.preflight(self.spec.topology())
        for f in findings:
            if f.status == "warn":
                self.ui.phase(f"preflight: {f.line()}")
        refused = [f for f in findings if f.blocks]
        if refused:
            raise ProvisionError(provider.name, "-", "preflight: the account would refuse this run "
                                 "(nothing was created; `cloudbench doctor SPEC` shows every check):\n  "
                                 + "\n  ".join(f.line() for f in refused))

    def _ingest_kept(self, rec: TrialRecord) -> None:
        """A trial whose ingest a full disk stopped: its kept raw files, checksums verified, into its
        Parquet file (no host needed). A missing or changed file makes it a cut-off trial (run again)."""
        bad = [rel for rel, digest in rec.raw.items()
               if not (self.run.path / rel).is_file() or sha256_file(self.run.path / rel) != digest]
        if bad:
            self.ui.warn(f"trial {rec.id}: kept raw file(s) missing or changed ({', '.join(bad)}); "
                         "it is run again")
            rec.status, rec.raw = "running", {}
            return
        trial = next(t for t in self.plan.trials if t.id == rec.id)
        self.ui.phase(f"trial {rec.id}: ingesting {len(rec.raw)} kept raw file(s)")
        outcome = workload_kind(rec.kind).ingest(self.run, self.spec, trial, rec.raw, rec.stats)
        failures = [*rec.failures, *(FailureRecord.model_validate(vars(f)) for f in outcome.failures)]
        rec.status = "ok" if not failures else ("partial" if outcome.rows else "failed")
        rec.rows, rec.files, rec.failures, rec.stats = outcome.rows, outcome.files, failures, outcome.stats
        rec.raw = {}
        rec.ended_utc = utc_stamp(micro=True)
        self.manifest.files.update(outcome.files)
        self._save()

    def _pending_raw_bytes(self) -> int:
        return sum((self.run.path / rel).stat().st_size for t in self.manifest.trials if t.status == "ingest"
                   for rel in t.raw if (self.run.path / rel).is_file())

    def _check_space(self) -> None:
        """Refuse to start (before any host exists) when the results filesystem has too little free."""
        if self.resuming:
            done = {t.id for t in self.manifest.trials if t.status in ("ok", "partial", "failed", "ingest")}
            todo = [t for t in self.plan.trials if t.id not in done]
            est = estimate_space(self.spec, self.plan, trials=todo, pending_raw=self._pending_raw_bytes())
            what = f"resuming run {self.run.run_id} ({len(todo)} trial(s) left)"
        else:
            est = estimate_space(self.spec, self.plan)
            what = f"run of {self.spec.name} ({len(self.plan.trials)} trials)"
        check_free_space(self.run.path, est.run_peak, what)

    def _reserve(self) -> None:
        """Hold :data:`RESERVE_FILE` (real blocks, not a sparse file) while the run writes."""
        path = self.run.path / RESERVE_FILE
        size = reserve_bytes(self.spec, self.plan)
        with path.open("wb") as f:
            try:
                os.posix_fallocate(f.fileno(), 0, size)
            except OSError as e:
                if is_disk_full(e):
                    raise
                f.write(bytes(size))  # a filesystem without fallocate

    def _free_temporary(self) -> None:
        """What a full disk leaves that is no data: the reserve and ``*.tmp`` files (none is read)."""
        (self.run.path / RESERVE_FILE).unlink(missing_ok=True)
        for tmp in self.run.path.rglob("*.tmp"):
            tmp.unlink(missing_ok=True)

    def _record_disk_full(self, e: DiskFullError) -> DiskFullError:
        """The manifest says the run failed on a full disk, and lists the raw files it keeps;
        returns the one-line error to end with."""
        m = self.manifest
        kept: dict[str, str] = {}
        for rec in m.trials:
            kept.update(rec.raw)
        raw_dir = self.run.path / "raw"
        if raw_dir.is_dir():
            for f in sorted(raw_dir.rglob("*")):
                rel = str(f.relative_to(self.run.path))
                if f.is_file() and rel not in kept:
                    kept[rel] = sha256_file(f)
        m.status = "failed"
        m.error = f"disk full: {e}"
        m.error_kind = "disk_full"
        m.kept_raw = kept
        pending = sum(1 for t in m.trials if t.status == "ingest")
        return DiskFullError(e.path, f"{e.message}; the run is recorded failed (disk full): {len(kept)} raw "
                             f"file(s) kept under {raw_dir}"
                             + (f" ({pending} trial(s) to ingest)" if pending else "")
                             + f"; free space, then `cloudbench run --resume {self.run.path}`", kept=kept)

    def _save_final(self) -> None:
        """The last manifest: on a full disk, again after freeing the reserve and temporary files."""
        try:
            self._save()
            return
        except OSError as e:
            if not is_disk_full(e):
                raise
        self._free_temporary()
        if self.manifest.error_kind != "disk_full":
            self._record_disk_full(DiskFullError(str(self.run.manifest_path), DISK_FULL_REASON))
        try:
            self._save()
        except OSError as e:
            if not is_disk_full(e):
                raise
            raise DiskFullError(str(self.run.manifest_path), f"{DISK_FULL_REASON}: not even the manifest "
                                "could be saved after freeing the reserve; free space, then `cloudbench run "
                                f"--resume {self.run.path}`") from None

    def _default_provider(self, name: str) -> Provider:
        # Clouds and static hosts read their settings from the spec; cloud state lives
        # under results/<campaign>/, where `cloudbench gc --results` looks for it.
        return get_provider(name, spec=self.spec, spec_path=self.spec_path,
                            results_root=self.run.path.parent.parent)

    # -- manifest -----------------------------------------------------------------------
    def _init_manifest(self) -> None:
        text = Path(self.spec_path).read_bytes() if Path(self.spec_path).exists() else b""
        workers = worker_versions(worker_bundle(sorted({w.kind for w in self.spec.workloads})))
        self.manifest = Manifest(
            campaign=self.spec.name,
            run_id=self.run.run_id,
            status="running",
            started_utc=utc_stamp(micro=True),
            spec_path=str(self.spec_path),
            spec_sha256=hashlib.sha256(text).hexdigest(),
            spec=self.spec.model_dump(mode="json"),
            seed=self.spec.seed,
            plan=self.plan.to_dict(),
            # compared before repetitions are pooled: any change of a worker changes it
            worker_version=",".join(f"{k}={v['version']}:{v['sha256'][:12]}" for k, v in workers.items()),
            workers=workers,
            # what the pooling guard compares: values, not names (a name keeps its spelling when its value changes)
            resolved=resolve_metadata(self.spec),
            controller={
                "cloudbench": __version__,
                "python": platform.python_version(),
                "kernel": platform.release(),
                "hostname": platform.node(),
                "pid": os.getpid(),
            },
            clock={
                "durations": "CLOCK_MONOTONIC (time.monotonic_ns on each host)",
                "echo_receive": "the kernel's receive timestamp (SO_TIMESTAMPNS) mapped onto "
                                "CLOCK_MONOTONIC, or the worker's read time where the spec says "
                                "rx_timestamp: user or the kernel gave none (counted per trial)",
                "timestamps": "UTC wall clock on the controller",
            },
        )
        self._save()

    def _save(self) -> None:
        save_manifest(self.run.manifest_path, self.manifest)

    # -- the campaign ------------------------------------------------------------------
    def execute(self) -> RunDir:
        check_budget(self.spec, self.spec_path, self.plan)  # before anything exists
        check_leases(self.spec, self.spec_path, self.plan)
        providers = list(self.spec.providers)
        if len(providers) != 1:  # the spec check says so too, with the line
            raise CloudbenchError("a campaign uses one provider for now; split the spec per provider")
        if self.space_check:
            self._check_space()  # before anything exists, too
        provider = self.provider_factory(providers[0])
        self._preflight(provider)  # what the account would refuse, before anything exists
        topology = self.spec.topology()
        cluster: Cluster | None = None
        ran = False
        try:
            if self.resuming:
                # What the dead run left (testbeds, stacks of a dead controller) goes first.
                for line in reap_run(self.run.path, self.run.path.parent.parent):
                    self.ui.phase(line)
                self._recover()  # kept raw files are ingested here, before any host exists
            else:
                self.run.path.mkdir(parents=True, exist_ok=False)
                self._init_manifest()
            self._reserve()
            last = self._last_repetition()
            with signals_as_interrupts():
                for rep in range(self.spec.repetitions):
                    if not self._remaining(rep):
                        continue
                    ran = True
                    if cluster is None:
                        self.ui.phase(f"repetition {rep + 1}/{self.spec.repetitions}: "
                                      f"provisioning {len(topology)} hosts ({provider.name})")
                        cluster = provider.provision(topology, self.run.path)
                    try:
                        run_async(self._repetition(rep, cluster))
                    finally:
                        if self.spec.fresh_hosts == "repetition" or rep == last:
                            self.ui.phase(f"repetition {rep + 1}: tearing down {cluster.stack}")
                            provider.destroy(cluster)
                            cluster = None
                    self._write_summaries()
                if not ran:  # a resume that only ingested kept files, or only lacked its summaries
                    self._write_summaries()
            failed = [t for t in self.manifest.trials if t.status not in ("ok", "interrupted")]
            lost = [r for r in self.manifest.repetitions if r.status not in ("ok", "interrupted")]
            if lost and len(lost) == len(self.manifest.repetitions):
                self.manifest.status = "failed"
                self.manifest.error = "no repetition could deploy its workers"
            else:
                self.manifest.status = "partial" if failed or lost else "complete"
        except KeyboardInterrupt as e:
            self.manifest.status = "interrupted"
            self.manifest.error = str(e) or "interrupted (Ctrl-C)"
            raise
        except DiskFullError as e:
            raise self._record_disk_full(e) from None
        except (OSError, sqlite3.OperationalError) as e:
            if not is_disk_full(e):
                self.manifest.status = "failed"
                self.manifest.error = f"{type(e).__name__}: {e}"
                raise
            where = getattr(e, "filename", None) or str(self.run.path)
            raise self._record_disk_full(DiskFullError(str(where), DISK_FULL_REASON)) from None
        except BaseException as e:
            self.manifest.status = "failed"
            self.manifest.error = f"{type(e).__name__}: {e}"
            raise
        finally:
            if cluster is not None:
                self.ui.phase(f"tearing down {cluster.stack}")
                provider.destroy(cluster)
            self.manifest.ended_utc = utc_stamp(micro=True)
            if self.manifest.error_kind != "disk_full":
                with contextlib.suppress(CloudbenchError, OSError):
                    self._write_summaries()
            if self.manifest.error_kind == "disk_full" or self.run.manifest_path.exists():
                self._save_final()
            (self.run.path / RESERVE_FILE).unlink(missing_ok=True)
        return self.run

    def _remaining(self, rep: int) -> list[Trial]:
        return [t for t in self.plan.of_repetition(rep) if t.id not in self.done]

    def _last_repetition(self) -> int:
        return max((r for r in range(self.spec.repetitions) if self._remaining(r)), default=-1)

    def _write_summaries(self) -> None:
        rows: list[SummaryRow] = []
        for w in self.manifest.workloads():
            rows += workload_kind(w["kind"]).summarize(self.run, self.manifest, w)
        digest = write_summaries(self.run, rows)
        self.manifest.files["summaries.parquet"] = digest
        self._save()

    async def _repetition(self, rep: int, cluster: Cluster) -> None:
        rec = RepetitionRecord(
            index=rep,
            provider=cluster.provider,
            stack=cluster.stack,
            started_utc=utc_stamp(micro=True),
            hosts=[HostRecord.model_validate(h.to_dict()) for h in cluster.hosts],
            # testbed layout, emulated WAN links and their delay schedule, …: the ground
            # truth that travels with the observations
            facts=cluster.facts,
        )
        self.manifest.repetitions.append(rec)
        self._save()
        async with self.remote_factory(cluster) as remote:
            t0 = time.monotonic()
            self.ui.phase(f"repetition {rep + 1}: deploying workers to {len(cluster.hosts)} hosts")
            try:
                await self._deploy(remote, cluster, rec)
            except GroupRemoteError as e:
                # Nothing measured yet in this repetition: record why, go on with the next.
                rec.status, rec.ended_utc = "failed", utc_stamp(micro=True)
                rec.failures = [FailureRecord.model_validate(vars(f)) for f in e.failures]
                for f in e.failures:
                    self.ui.warn(f"repetition {rep + 1} skipped: {f.describe()}")
                self._save()
                return
            rec.deploy_s = round(time.monotonic() - t0, 3)
            self._save()
            trials = self._remaining(rep)
            for i, trial in enumerate(trials):
                await self._trial(trial, cluster, remote, i)
                if i < len(trials) - 1 and self.plan.rest > 0:
                    self.ui.phase(f"resting {self.plan.rest:g}s")
                    await asyncio.sleep(self.plan.rest)
        rec.ended_utc = utc_stamp(micro=True)
        rec.status = "ok"
        self._save()

    async def _deploy(self, remote: Remote, cluster: Cluster, rec: RepetitionRecord) -> None:
        bundle = worker_bundle(sorted({w.kind for w in self.spec.workloads}))

        async def deploy(h: Any) -> dict[str, Any]:
            await remote.put(h, bundle, h.workdir)
            r = await remote.run(h, f"cd {h.workdir} && {h.python} facts.py {h.address}")
            facts: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
            return facts

        results = await remote.fan_out(deploy)
        failures = [r.failure for r in results if r.failure is not None]
        if failures:
            raise GroupRemoteError(failures, [r.host for r in results if r.ok])
        for r, h in zip(results, rec.hosts, strict=True):
            h.facts.update(r.value)

    async def _trial(self, trial: Trial, cluster: Cluster, remote: Remote, number: int) -> None:
        kind = workload_kind(trial.kind)
        ctx = TrialContext(trial, trial_params(self.spec.workload(trial.workload), trial), self.spec,
                           cluster, remote, self.run, self.token, self.ui.trial_tick)
        rec = TrialRecord(id=trial.id, repetition=trial.repetition, workload=trial.workload,
                          kind=trial.kind, started_utc=utc_stamp(micro=True), status="running", sweep=dict(trial.sweep))
        self.manifest.trials.append(rec)
        self._save()
        if self.before_trial is not None:
            self.before_trial(trial)
        self.ui.trial_started(trial, number + 1, len(self.plan.of_repetition(trial.repetition)))
        try:
            outcome = await kind.run(ctx)
        except DiskFullError as e:
            if e.kept:  # pulled whole, not ingested: kept for `run --resume` to ingest
                rec.status, rec.raw, rec.ended_utc = "ingest", dict(e.kept), utc_stamp(micro=True)
                if e.outcome is not None:
                    rec.failures = [FailureRecord.model_validate(vars(f)) for f in e.outcome.failures]
                    rec.stats = e.outcome.stats
            raise  # else the trial stays `running`: a resume runs it again, its leftovers set apart
        except OSError as e:
            if not is_disk_full(e):
                raise
            raise DiskFullError(str(getattr(e, "filename", None) or self.run.path),
                                f"trial {trial.id}: {DISK_FULL_REASON}") from None
        except CloudbenchError as e:
            outcome = TrialOutcome(failures=[RemoteFailure("*", trial.id, None, str(e), type(e).__name__)])
        if any(f.reason == DISK_FULL_REASON for f in outcome.failures):
            # a pull cut short by our disk: the trial's data is not whole, so it runs again on resume
            raise DiskFullError(str(self.run.path / "raw"), f"trial {trial.id}: {DISK_FULL_REASON}")
        rec.ended_utc = utc_stamp(micro=True)
        rec.status = "ok" if not outcome.failures else ("partial" if outcome.rows else "failed")
        rec.rows = outcome.rows
        rec.files = outcome.files
        rec.failures = [FailureRecord.model_validate(vars(f)) for f in outcome.failures]
        rec.stats = outcome.stats
        self.manifest.files.update(outcome.files)
        self._save()
        for f in outcome.failures:
            self.ui.warn(f.describe())
        self.done.add(trial.id)
        self.ui.trial_done(trial, outcome)
        if self.after_trial is not None:
            self.after_trial(trial, outcome)


def resume_run(run_dir: str | Path, ui: RunUI | None = None, space_check: bool = True) -> RunDir:
    """Finish the interrupted run in ``run_dir``: same seed and plan, remaining trials only.

    The spec is the run's own: the file the manifest names if it is unchanged, else the
    copy in the manifest.
    """
    run = RunDir(Path(run_dir))
    m = load_manifest(run.manifest_path)
    if not m.resumable:
        raise ResultError(str(run.path), f"run is {m.status}; only an interrupted (or killed, still "
                          "`running`, or stopped by a full disk) run can be resumed")
    path = Path(m.spec_path)
    text = path.read_bytes() if m.spec_path and path.is_file() else b""
    if text and hashlib.sha256(text).hexdigest() == m.spec_sha256:
        spec = parse_spec(text.decode(), m.spec_path)
    else:
        spec = parse_spec(json.dumps(m.spec), f"{run.manifest_path} (spec)")
    spec = spec.model_copy(update={"seed": m.seed})
    if "netns" in spec.providers and os.geteuid() != 0:
        raise CloudbenchError("the netns testbed needs root: run `sudo cloudbench run --resume ...`")
    return CampaignRunner.resume(spec, m.spec_path, run.path, ui=ui, space_check=space_check).execute()


def run_campaign(spec: Spec, spec_path: str | Path, results_root: str | Path,
                 ui: RunUI | None = None, space_check: bool = True) -> RunDir:
    """Run ``spec`` once (every repetition) into ``results_root/<campaign>/<run-id>``.

    Checks the budget and, for the testbed, root before anything is created;
    tears down everything it created on success, error, Ctrl-C and SIGTERM.
    """
    if "netns" in spec.providers and os.geteuid() != 0:
        raise CloudbenchError("the netns testbed needs root: run `sudo cloudbench run ...`")
    return CampaignRunner(spec, str(spec_path), Path(results_root), ui=ui, space_check=space_check).execute()
