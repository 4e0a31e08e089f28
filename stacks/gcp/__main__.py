"""Pulumi CLI entry point of the gcp project (`pulumi up` in this directory).

The program is `cloudbench.providers.clouds.programs.gcp.program`, fed from the stack's
`cloudbench:*` config; importing this file does nothing.
"""

from __future__ import annotations

from cloudbench.providers.clouds.programs import run_from_config

if __name__ == "__main__":
    run_from_config("gcp")
