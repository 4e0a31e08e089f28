"""Remote.get: a damaged or failed copy is fetched again; the host's file is never lost."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from cloudbench.core.cluster import Cluster, HostAccess
from cloudbench.core.topology import HostSpec, Topology
from cloudbench.errors import RemoteError
from cloudbench.remote import GET_ATTEMPTS, Remote

GOOD = b"every row measured\n" * 1000


class Sftp:
    """An SFTP client whose first ``bad`` copies arrive damaged (or fail)."""

    def __init__(self, bad: int, fail: bool = False) -> None:
        self.bad, self.fail, self.copies = bad, fail, 0

    async def __aenter__(self) -> Sftp:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def get(self, remote: str, local: str) -> None:
        self.copies += 1
        if self.copies <= self.bad:
            if self.fail:
                raise asyncssh.SFTPError(asyncssh.FX_FAILURE, "connection lost")
            Path(local).write_bytes(GOOD[: len(GOOD) // 2])  # cut short
            return
        Path(local).write_bytes(GOOD)


class Conn:
    def __init__(self, sftp: Sftp) -> None:
        self.sftp = sftp

    def start_sftp_client(self) -> Sftp:
        return self.sftp


def remote_with(tmp_path: Path, sftp: Sftp, monkeypatch: pytest.MonkeyPatch) -> tuple[Remote, HostAccess]:
    key = asyncssh.generate_private_key("ssh-ed25519")
    key_path = tmp_path / "id"
    key.write_private_key(str(key_path))
    spec = HostSpec("a", "netns", "r", "z", "s", "local")
    host = HostAccess(spec, "198.18.0.1", "198.18.0.1")
    remote = Remote(Cluster("netns", "x", Topology([spec]), [host], key_path))

    async def connect(h: HostAccess) -> Any:
        return Conn(sftp)

    monkeypatch.setattr(remote, "connect", connect)
    return remote, host


@pytest.mark.parametrize("fail", [False, True], ids=["damaged", "failed"])
def test_a_bad_copy_is_fetched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: bool) -> None:
    sftp = Sftp(bad=GET_ATTEMPTS - 1, fail=fail)
    remote, host = remote_with(tmp_path, sftp, monkeypatch)
    want = hashlib.sha256(GOOD).hexdigest()
    got = asyncio.run(remote.get(host, "/w/out.bin", tmp_path / "out.bin", sha256=want))
    assert got == want and (tmp_path / "out.bin").read_bytes() == GOOD
    assert sftp.copies == GET_ATTEMPTS


def test_a_file_that_never_arrives_whole_is_that_hosts_failure(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    sftp = Sftp(bad=GET_ATTEMPTS)
    remote, host = remote_with(tmp_path, sftp, monkeypatch)
    with pytest.raises(RemoteError, match="checksum mismatch") as info:
        asyncio.run(remote.get(host, "/w/out.bin", tmp_path / "out.bin",
                               sha256=hashlib.sha256(GOOD).hexdigest()))
    assert info.value.host == "a" and sftp.copies == GET_ATTEMPTS
