"""The ``pulumi`` executable: is it there, and is it recent enough? (No Pulumi import here.)

Checked before anything of a run exists (no key, no lease, no stack), so a missing
or old CLI is a message with the install hint, never a traceback halfway through.
The minimum is the higher of what cloudbench needs (3.181: ``destroy`` of an inline
program passes ``--client`` to the CLI) and what the installed Automation SDK
says it needs (``pulumi.automation._minimum_version``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from cloudbench.errors import ProvisionError

CLOUDBENCH_MIN_CLI = (3, 181, 0)  # inline destroy/refresh (pulumi/pulumi release v3.181.0)
SUPPORTED_MAJOR = 3  # the Automation SDK of the `pulumi>=3,<4` extra refuses another major
INSTALL_HINT = ("install or upgrade it: `curl -fsSL https://get.pulumi.com | sh` "
                "(or see https://www.pulumi.com/docs/install/), then make sure `pulumi` is on PATH")
VERSION_TIMEOUT_S = 60.0
_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")

Version = tuple[int, int, int]


@dataclass(frozen=True)
class PulumiCli:
    """The ``pulumi`` executable :func:`find_cli` found usable: its absolute path and version."""

    path: str  # absolute path of the executable
    version: Version

    @property
    def text(self) -> str:
        return ".".join(map(str, self.version))


def sdk_min_version() -> Version:
    """The oldest CLI the installed Automation SDK accepts ((3, 0, 0) without the SDK)."""
    try:
        from pulumi.automation._minimum_version import _MINIMUM_VERSION
    except ImportError:
        return (3, 0, 0)
    return (int(_MINIMUM_VERSION.major), int(_MINIMUM_VERSION.minor), int(_MINIMUM_VERSION.patch))


def min_version() -> Version:
    """The oldest CLI cloudbench accepts: the later of its own minimum and the SDK's."""
    return max(CLOUDBENCH_MIN_CLI, sdk_min_version())


def parse_version(text: str) -> Version | None:
    """The first ``[v]X.Y.Z`` in ``text`` (the output of ``pulumi version``), or None."""
    m = _VERSION.search(text.strip())
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


Runner = Callable[[list[str]], str]


def _run_version(argv: list[str]) -> str:
    env = {**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"}
    res = subprocess.run(argv, capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                         env=env, check=True)
    return res.stdout


def _unusable(cloud: str, reason: str) -> ProvisionError:
    """Every refusal of the CLI ends with the same hint (``cloudbench doctor`` shows it apart)."""
    return ProvisionError(cloud, "-", f"{reason}; {INSTALL_HINT}")


def find_cli(cloud: str = "pulumi", which: Callable[[str], str | None] = shutil.which,
             run: Runner = _run_version) -> PulumiCli:
    """The ``pulumi`` on PATH and its version; a :class:`ProvisionError` saying what to do otherwise."""
    need = ".".join(map(str, min_version()))
    path = which("pulumi")
    if path is None:
        raise _unusable(cloud, f"the Pulumi CLI (`pulumi`, {need} or newer) is not on PATH")
    path = os.path.abspath(path)
    try:
        text = run([path, "version"])
    except subprocess.CalledProcessError as e:
        raise _unusable(cloud, f"`{path} version` failed (exit {e.returncode}): "
                        f"{(e.stderr or '').strip()[-300:]}") from e
    except (OSError, subprocess.TimeoutExpired) as e:
        raise _unusable(cloud, f"cannot run `{path} version`: {e}") from e
    version = parse_version(text)
    if version is None:
        raise _unusable(cloud, f"`{path} version` printed {text.strip()[:80]!r}, not a version")
    found = ".".join(map(str, version))
    if version[0] != SUPPORTED_MAJOR:
        raise _unusable(cloud, f"the Pulumi CLI at {path} is {found}; cloudbench drives "
                        f"Pulumi {SUPPORTED_MAJOR}.x ({need} or newer)")
    if version < min_version():
        raise _unusable(cloud, f"the Pulumi CLI at {path} is {found}, older than the "
                        f"{need} cloudbench needs (destroying an inline program)")
    return PulumiCli(path, version)
