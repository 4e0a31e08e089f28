"""The Pulumi programs, one module per cloud: ``program(topology_dict, settings) -> None``.

They import pulumi and the cloud's SDK, so cloudbench imports them only when a
cloud stack is created (extras ``aws``, ``gcp``, ``azure``). ``stacks/<cloud>/`` at the
top of the repository holds the matching Pulumi projects for the ``pulumi`` CLI.
"""

from __future__ import annotations

PROGRAM_MODULES = {
    "aws": "cloudbench.providers.clouds.programs.aws",
    "gcp": "cloudbench.providers.clouds.programs.gcp",
    "azure": "cloudbench.providers.clouds.programs.azure",
}
EXTRAS = {"aws": "pulumi-aws", "gcp": "pulumi-gcp", "azure": "pulumi-azure-native"}


def run_from_config(cloud: str) -> None:
    """Body of ``stacks/<cloud>/__main__.py``: the program, fed from the file its stack config names."""
    import importlib

    import pulumi

    from cloudbench.providers.clouds.common import PROGRAM_FILE_KEY, read_program_file

    namespace, key = PROGRAM_FILE_KEY.split(":")

    program = importlib.import_module(PROGRAM_MODULES[cloud]).program
    topology, settings = read_program_file(pulumi.Config(namespace).require(key))
    program(topology, settings)
