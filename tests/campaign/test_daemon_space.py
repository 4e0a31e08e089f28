"""A campaign slot refused for space: recorded missed with the reason, logged, later slots run when
space is back. The campaign directory is on a real tmpfs (root); runs are the fake trials of
test_daemon (no hosts)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudbench.campaign.setup import campaign_status
from cloudbench.testing.fakes import FakeProvider
from tests.campaign.test_daemon import FakeTrials, daemon, fake, journal, make  # noqa: F401  (fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root)")


@contextlib.contextmanager
def tmpfs(size: str) -> Iterator[Path]:
    mnt = Path(tempfile.mkdtemp(prefix="cb-tmpfs-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        mnt.rmdir()


def test_a_slot_refused_for_space_is_missed_and_later_slots_run_when_space_is_back(
        fake: FakeTrials) -> None:  # noqa: F811  (the fixture)
    with tmpfs("40m") as mnt:
        d = make(mnt / "spec")
        ballast = mnt / "ballast"
        ballast.write_bytes(bytes(36 << 20))  # ~4 MB free: under the ~10 MB the check wants
        lines: list[str] = []

        def log(msg: str) -> None:
            lines.append(msg)
            if "refused for space" in msg:
                ballast.unlink(missing_ok=True)  # someone frees space after the first refusal

        counts = daemon(d, FakeProvider(), log=log).run()
        assert counts == {"missed": 1, "finished": 2}, (counts, lines)
        j = journal(d)
        (s0,) = [s for s in j.slots() if s.index == 0]
        trials0 = j.trials(0)
        j.close()
        assert s0.state == "missed" and "not enough free space" in s0.note and str(mnt) in s0.note
        assert "bytes" in s0.note and all(t.state == "missed" for t in trials0)
        assert not (d / (s0.run_id or "-")).exists() or s0.run_id is None or not any((d / s0.run_id).iterdir())
        assert len(fake.calls) == 4  # slots 1 and 2, two repetitions each; none of slot 0
        assert any("slot 0: missed: refused for space" in x for x in lines)
        st = campaign_status(d)
        assert st["space"]["slots"] == 3 and st["space"]["free_bytes"] > 0 and st["space"]["used_bytes"] > 0
