"""The journal of a scheduled campaign: ``journal.sqlite`` (SQLite, WAL, synchronous=FULL).

One row per planned slot and per trial of every slot, each with its state,
planned and actual times, attempts and run id, and an event log. Every change
is one committed transaction, so a crash (``kill -9``, power) leaves the journal
as it was before or after the change, never between.

States::

    slot:  planned -> running -> finished | failed | interrupted -> running (resumed)
           planned -> missed (past its slip) | cancelled (campaign stop)
    trial: planned -> running -> finished | failed
           running -> interrupted (cut off) -> running (again, on fresh hosts) -> ...
           planned -> missed | cancelled (its slot was)

A trial's id is ``s<slot>/<trial of the plan>`` (``s0003/r000-t001-echo``):
the same spec, seed and schedule always give the same ids.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudbench.core.files import is_disk_full, utc_stamp
from cloudbench.errors import DISK_FULL_REASON, DiskFullError, ResultError
from cloudbench.store.formats import JOURNAL

JOURNAL_FILE = "journal.sqlite"
DONE = ("finished", "failed", "missed", "cancelled")  # states a slot or trial never leaves

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE slots (
  idx INTEGER PRIMARY KEY, base_utc TEXT NOT NULL, planned_utc TEXT NOT NULL, spread_s REAL NOT NULL,
  cell INTEGER NOT NULL, seed INTEGER NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
  run_id TEXT, started_utc TEXT, ended_utc TEXT, note TEXT NOT NULL DEFAULT '');
CREATE TABLE trials (
  id TEXT PRIMARY KEY, slot INTEGER NOT NULL REFERENCES slots(idx), plan_id TEXT NOT NULL,
  repetition INTEGER NOT NULL, workload TEXT NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0, run_id TEXT, started_utc TEXT, ended_utc TEXT,
  rows INTEGER NOT NULL DEFAULT 0, note TEXT NOT NULL DEFAULT '');
CREATE INDEX trials_slot ON trials(slot);
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, utc TEXT NOT NULL, slot INTEGER, trial TEXT,
  event TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '');
"""


def trial_key(slot: int, plan_id: str) -> str:
    """The deterministic id of a trial of a slot."""
    return f"s{slot:04d}/{plan_id}"


@dataclass(frozen=True)
class SlotRow:
    """One slot of the campaign journal: when it was planned, its cell, its seed and its state."""
    index: int
    base_utc: str
    planned_utc: str
    spread_s: float
    cell: int
    seed: int
    state: str
    attempts: int
    run_id: str | None
    started_utc: str | None
    ended_utc: str | None
    note: str


@dataclass(frozen=True)
class TrialRow:
    """One trial of the campaign journal: its slot, its plan, its repetition and its state."""
    id: str
    slot: int
    plan_id: str
    repetition: int
    workload: str
    kind: str
    state: str
    attempts: int
    run_id: str | None
    started_utc: str | None
    ended_utc: str | None
    rows: int
    note: str


class Journal:
    """An open journal (``Journal.create`` a new one, ``Journal.open`` an existing one)."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._db = conn

    # -- opening ------------------------------------------------------------------------
    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    @classmethod
    def create(cls, path: Path, meta: dict[str, Any], slots: Iterable[dict[str, Any]],
               trials: Iterable[dict[str, Any]]) -> Journal:
        """A new journal with every slot and trial ``planned`` (refuses an existing file).

        It is written under a temporary name and renamed when complete, so a crash
        never leaves a half-made journal where `campaign run` would find it.
        """
        if path.exists():
            raise ResultError(str(path), "a journal exists here already")
        tmp = path.with_name(path.name + ".new")
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            leftover.unlink(missing_ok=True)
        conn = cls._connect(tmp)
        j = cls(tmp, conn)
        conn.executescript(_SCHEMA)
        with j._tx() as c:
            c.executemany("INSERT INTO meta VALUES (?, ?)",
                          [(k, json.dumps(v)) for k, v in {**meta, "journal_version": JOURNAL.current}.items()])
            c.executemany(
                "INSERT INTO slots (idx, base_utc, planned_utc, spread_s, cell, seed, state) "
                "VALUES (:index, :base_utc, :planned_utc, :spread_s, :cell, :seed, 'planned')", slots)
            c.executemany(
                "INSERT INTO trials (id, slot, plan_id, repetition, workload, kind, state) "
                "VALUES (:id, :slot, :plan_id, :repetition, :workload, :kind, 'planned')", trials)
            c.execute("INSERT INTO events (utc, event) VALUES (?, 'created')", (utc_stamp(micro=True),))
        j.close()  # checkpoints the WAL into the file
        os.replace(tmp, path)
        return cls.open(path)

    @classmethod
    def open(cls, path: Path) -> Journal:
        """An existing journal; a ResultError says what is wrong with it."""
        if not path.exists():
            raise ResultError(str(path.parent), f"no {JOURNAL_FILE} here; is this a campaign directory "
                              "(made by `cloudbench campaign start`)?")
        try:
            conn = cls._connect(path)
            row = conn.execute("SELECT value FROM meta WHERE key='journal_version'").fetchone()
        except sqlite3.DatabaseError as e:
            raise ResultError(str(path), f"not a readable journal: {e}") from e
        try:
            JOURNAL.check(None if row is None else json.loads(row[0]), str(path))
        except ResultError:
            conn.close()
            raise
        return cls(path, conn)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Cursor]:
        """One transaction; a full disk (SQLITE_FULL, ENOSPC) is a :class:`DiskFullError` naming the journal
        (the transaction is rolled back: the journal stays as it was)."""
        try:
            c = self._db.cursor()
            c.execute("BEGIN IMMEDIATE")
            try:
                yield c
            except BaseException:
                if self._db.in_transaction:
                    c.execute("ROLLBACK")
                raise
            c.execute("COMMIT")
        except (sqlite3.OperationalError, OSError) as e:
            if not is_disk_full(e):
                raise
            if self._db.in_transaction:
                with suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            raise DiskFullError(str(self.path), f"the campaign journal: {DISK_FULL_REASON} ({e})") from None

    # -- reading ------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}

    def slots(self, state: str | None = None) -> list[SlotRow]:
        q = "SELECT * FROM slots" + (" WHERE state = ?" if state else "") + " ORDER BY planned_utc, idx"
        return [SlotRow(*r) for r in self._db.execute(q, (state,) if state else ())]

    def slot(self, index: int) -> SlotRow:
        r = self._db.execute("SELECT * FROM slots WHERE idx = ?", (index,)).fetchone()
        if r is None:
            raise KeyError(index)
        return SlotRow(*r)

    def trials(self, slot: int | None = None) -> list[TrialRow]:
        if slot is None:
            rows = self._db.execute("SELECT * FROM trials ORDER BY slot, id")
        else:
            rows = self._db.execute("SELECT * FROM trials WHERE slot = ? ORDER BY id", (slot,))
        return [TrialRow(*r) for r in rows]

    def events(self, limit: int = 20) -> list[tuple[str, int | None, str | None, str, str]]:
        rows = self._db.execute("SELECT utc, slot, trial, event, detail FROM events ORDER BY seq DESC LIMIT ?",
                                (limit,)).fetchall()
        return [(r[0], r[1], r[2], r[3], r[4]) for r in reversed(rows)]

    def counts(self) -> dict[str, dict[str, int]]:
        """Slots and trials by state."""
        out: dict[str, dict[str, int]] = {}
        for table in ("slots", "trials"):
            out[table] = {s: n for s, n in self._db.execute(f"SELECT state, count(*) FROM {table} GROUP BY state")}
        return out

    # -- changing -----------------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def update_slot(self, index: int, event: str, detail: str = "", **fields: Any) -> None:
        """Change a slot (``attempts=+1`` increments) and log the event, in one transaction."""
        self._update("slots", "idx", index, fields, event, detail, slot=index, trial=None)

    def update_trial(self, trial_id: str, event: str, detail: str = "", **fields: Any) -> None:
        slot = int(trial_id[1:].split("/", 1)[0])
        self._update("trials", "id", trial_id, fields, event, detail, slot=slot, trial=trial_id)

    def _update(self, table: str, key: str, value: Any, fields: dict[str, Any], event: str, detail: str,
                slot: int | None, trial: str | None) -> None:
        sets, args = [], []
        for k, v in fields.items():
            if k == "attempts" and v == "+1":
                sets.append("attempts = attempts + 1")
            else:
                sets.append(f"{k} = ?")
                args.append(v)
        with self._tx() as c:
            if sets:
                n = c.execute(f"UPDATE {table} SET {', '.join(sets)} WHERE {key} = ?", (*args, value)).rowcount
                if n != 1:
                    raise KeyError(f"{table} has no {key} {value!r}")
            c.execute("INSERT INTO events (utc, slot, trial, event, detail) VALUES (?, ?, ?, ?, ?)",
                      (utc_stamp(micro=True), slot, trial, event, detail))

    def close_slot_trials(self, index: int, state: str, note: str) -> int:
        """Every trial of the slot not yet done gets ``state`` (a missed or cancelled slot)."""
        with self._tx() as c:
            return c.execute(
                f"UPDATE trials SET state = ?, note = ? WHERE slot = ? AND state NOT IN ({', '.join('?' * len(DONE))})",
                (state, note, index, *DONE)).rowcount

    def cancel_remaining(self) -> int:
        """``campaign stop``: every planned slot (and its trials) becomes cancelled."""
        now = utc_stamp(micro=True)
        with self._tx() as c:
            idx = [r[0] for r in c.execute("SELECT idx FROM slots WHERE state = 'planned'")]
            c.execute("UPDATE slots SET state = 'cancelled', note = 'campaign stop' WHERE state = 'planned'")
            c.execute("UPDATE trials SET state = 'cancelled', note = 'campaign stop' WHERE state = 'planned' "
                      "AND slot IN (SELECT idx FROM slots WHERE state = 'cancelled')")
            c.execute("INSERT OR REPLACE INTO meta VALUES ('state', ?)", (json.dumps("stopped"),))
            c.execute("INSERT INTO events (utc, event, detail) VALUES (?, 'stop', ?)",
                      (now, f"{len(idx)} slot(s) cancelled"))
        return len(idx)
