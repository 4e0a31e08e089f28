"""``python -m tests.cli.sigterm_run STATE ARGS...``: the ``cloudbench`` command in a real process,
with the runner's provider replaced by a :class:`~cloudbench.testing.fakes.FakeProvider` and a
SIGTERM sent to the process once the first repetition's hosts exist.

At exit it writes the stacks the fake provisioned and destroyed to ``STATE`` (JSON), so the
test can check the teardown from outside. The exit status is the command's own.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

from cloudbench import runner
from cloudbench.cli import main as cloudbench_main
from cloudbench.core.cluster import Cluster
from cloudbench.providers.base import Provider
from cloudbench.remote import Remote
from cloudbench.runner import campaign_runner
from cloudbench.store.manifest import RepetitionRecord
from cloudbench.testing.fakes import FakeProvider

FAKE = FakeProvider()


class SigtermRunner(runner.CampaignRunner):
    """The real runner; only the provider is fake, and deploying is where SIGTERM arrives."""

    def _default_provider(self, name: str) -> Provider:
        return FAKE

    async def _deploy(self, remote: Remote, cluster: Cluster, rec: RepetitionRecord) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:  # the handler raises here, at the latest
            await asyncio.sleep(0.01)
        raise AssertionError("SIGTERM did not interrupt the run within 10 s")


def main(argv: list[str]) -> None:
    state = Path(argv[0])
    campaign_runner.CampaignRunner = SigtermRunner  # type: ignore[misc]  # what run_campaign instantiates
    sys.argv = ["cloudbench", *argv[1:]]
    try:
        cloudbench_main()
    finally:
        state.write_text(json.dumps({"provisioned": FAKE.provisioned, "destroyed": FAKE.destroyed}))


if __name__ == "__main__":
    main(sys.argv[1:])
