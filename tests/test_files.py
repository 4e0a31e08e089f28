"""The one home of atomic JSON writes, UTC stamps and file-name slugs (``cloudbench.core.files``),
and that the state files ``gc`` depends on go through it (fsynced before the rename)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from cloudbench.core.files import slug, utc_stamp, write_json_atomic
from cloudbench.core.topology import Topology
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds.leases import lease_path, write_lease
from cloudbench.providers.clouds.stack import StackRef
from cloudbench.providers.netns.provider import NetnsProvider


def test_utc_stamp_formats() -> None:
    t = 1_795_000_000.25  # 2026-11-18T...
    when = datetime.fromtimestamp(t, UTC)
    assert utc_stamp(t) == when.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert utc_stamp(t, micro=True) == when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert utc_stamp(t, micro=True).endswith(".250000Z")
    assert utc_stamp(0) == "1970-01-01T00:00:00Z"
    assert utc_stamp(0, basic=True) == "19700101T000000Z"
    # An aware datetime in another zone is the same instant in UTC.
    tokyo = datetime(2026, 1, 1, 9, 0, tzinfo=timezone(timedelta(hours=9)))
    assert utc_stamp(tokyo) == "2026-01-01T00:00:00Z"
    now = datetime.fromisoformat(utc_stamp(micro=True).replace("Z", "+00:00"))
    assert abs((now - datetime.now(UTC)).total_seconds()) < 60


def test_utc_stamp_refuses_a_naive_datetime() -> None:
    with pytest.raises(ValueError, match="aware"):
        utc_stamp(datetime(2026, 1, 1))


def test_slug() -> None:
    assert slug("echo / west→east") == "echo_west_east"
    assert slug("a.b-c_d") == "a.b-c_d"
    assert slug("///") == "x"
    assert slug("", "series") == "series"


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0)  # the most permissive: a mode must not depend on it
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("umask")
def test_write_json_atomic_mode_is_exact_from_creation(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    leftover = path.with_name("state.json.tmp")
    leftover.write_text("half")
    leftover.chmod(0o666)  # a crash's leftover, readable by all: not reused
    write_json_atomic(path, {"a": 1}, mode=0o600)
    assert json.loads(path.read_text()) == {"a": 1}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not leftover.exists()
    write_json_atomic(path, {"a": 2})  # no mode: the umask's (0 here)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666
    assert json.loads(path.read_text()) == {"a": 2}


def test_write_json_atomic_failure_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_json_atomic(path, {"a": 1})

    class Boom:
        def __str__(self) -> str:
            raise RuntimeError("cannot serialize")

    with pytest.raises(RuntimeError):
        write_json_atomic(path, {"a": Boom()}, mode=0o600)
    assert json.loads(path.read_text()) == {"a": 1}
    assert list(tmp_path.iterdir()) == [path]


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths whose contents were fsynced (via /proc/self/fd), in order."""
    seen: list[str] = []
    real = os.fsync

    def record(fd: Any) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd if isinstance(fd, int) else fd.fileno()}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", record)
    return seen


def test_lease_is_fsynced_before_it_appears(tmp_path: Path, fsynced: list[str]) -> None:
    ref = StackRef("aws", "cloudbench-aws", "run-r01", tmp_path / ".pulumi")
    path = write_lease(ref, "camp", tmp_path / "run", 1000.0, 4600.0, "me")
    assert path == lease_path(ref)
    assert fsynced == [str(path) + ".tmp"]
    lease = json.loads(path.read_text())
    assert lease["stack"] == "run-r01" and lease["expiry_utc"] == "1970-01-01T01:16:40Z"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_netns_state_file_is_fsynced(tmp_path: Path, fsynced: list[str]) -> None:
    prov = NetnsProvider(state_root=str(tmp_path))
    prov._write_state("abc123", {"stack": "abc123"})
    assert fsynced == [str(tmp_path / "abc123.json.tmp")]
    assert json.loads((tmp_path / "abc123.json").read_text()) == {"stack": "abc123"}


def test_program_file_is_fsynced_and_private(tmp_path: Path, fsynced: list[str]) -> None:
    topo = Topology.from_dict({"hosts": [{"name": "a", "provider": "aws", "region": "us-east-1",
                                          "zone": "us-east-1a", "subnet": "s", "vm_type": "t3.micro"}]})
    settings = cc.CloudSettings(cloud="aws", campaign="c", stack="s", owner="me",
                                expiry_utc="2030-01-01T00:00:00Z", controller_cidr="203.0.113.7/32",
                                client_public_key="ssh-ed25519 AAAA", host_keys={},
                                host_key_mode="generated")
    path = cc.write_program_file(tmp_path / cc.PROGRAM_FILE, topo, settings)
    assert fsynced == [str(path) + ".tmp"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    _, back = cc.read_program_file(path)
    assert back.stack == "s"
