"""Pulumi CLI entry point of the gcp project; the program itself is ``program`` below.

The `pulumi` CLI runs this file as ``__main__``; importing it does nothing.
"""

from __future__ import annotations

from cloudbench.providers.stacks.gcp import program

__all__ = ["program"]


def main() -> None:
    import pulumi

    from cloudbench.providers.cloud_common import program_args_from_config

    topology, settings = program_args_from_config(pulumi.Config("cloudbench").require_object)
    program(topology, settings)


if __name__ == "__main__":
    main()
