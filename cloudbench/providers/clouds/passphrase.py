"""Where a campaign's Pulumi state keeps its secrets passphrase: beside no result.

The state directory (``results/<campaign>/.pulumi``) is private to its owner; it holds
a random, non-secret id (``passphrase-id``) naming the passphrase file in
:func:`secrets_dir`, outside results/, so sharing a results folder never ships it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from cloudbench.errors import ProvisionError

PASSPHRASE = "passphrase"  # where old runs kept it, beside the state; moved to the secrets dir on use
PASSPHRASE_ID = "passphrase-id"  # in the state dir: which passphrase of the secrets dir is this state's
SECRETS_ENV = "CLOUDBENCH_SECRETS_DIR"


def ensure_state_dir(state_dir: Path) -> Path:
    """The campaign's Pulumi state directory, private to its owner (it maps our whole cloud footprint)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(state_dir, 0o700)
    return state_dir


def secrets_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where state passphrases are kept: ``$CLOUDBENCH_SECRETS_DIR``, else
    ``$XDG_STATE_HOME/cloudbench/secrets``, else ``~/.local/state/cloudbench/secrets`` —
    outside results/, so sharing a results folder never ships them."""
    env = os.environ if env is None else env
    if env.get(SECRETS_ENV):
        return Path(env[SECRETS_ENV]).expanduser()
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    return base / "cloudbench" / "secrets"


def _state_id(state_dir: Path, create: bool) -> str | None:
    """The random, non-secret name of a state's passphrase (``.pulumi/passphrase-id``)."""
    path = state_dir / PASSPHRASE_ID
    if not path.exists() and create:
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(f"cloudbench-{secrets.token_hex(16)}\n")
    return path.read_text().strip() if path.exists() else None


def passphrase_path(state_dir: Path) -> Path:
    """Where the passphrase of ``state_dir`` is (or will be): ``secrets_dir()/<its id>``.

    The id lives in the state dir, so results that moved (or a copy for ``run --resume``,
    ``gc`` and the lease reaper) still find it; the passphrase itself does not travel.
    """
    state_id = _state_id(Path(state_dir), create=False)
    return secrets_dir() / (state_id or f"(not made yet: {Path(state_dir) / PASSPHRASE_ID})")


def ensure_passphrase(state_dir: Path) -> Path:
    """The campaign's secrets passphrase (mode 0600): encrypts host keys in the stack state.

    Made on first use in :func:`secrets_dir`; a state whose id is known but whose passphrase
    is not there (results copied from another machine) is refused with what to copy where.
    One an older cloudbench left beside the state is moved there.
    """
    ensure_state_dir(state_dir)
    legacy = state_dir / PASSPHRASE
    fresh = not (state_dir / PASSPHRASE_ID).exists()
    state_id = _state_id(state_dir, create=True)
    assert state_id is not None
    store = secrets_dir()
    store.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = store / state_id
    if legacy.exists() and not path.exists():
        _write_secret(path, legacy.read_text())
        legacy.unlink()
    elif not path.exists():
        if not fresh:
            raise ProvisionError("pulumi", "-", f"the passphrase of the Pulumi state {state_dir} is not in "
                                 f"{store} (file {state_id}): copy it there from the machine that ran the "
                                 f"campaign (or set ${SECRETS_ENV} to the directory holding it)")
        _write_secret(path, secrets.token_urlsafe(32))
    return path


def _write_secret(path: Path, text: str) -> None:
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)

