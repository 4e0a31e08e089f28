"""`python3 -m cloudbench` is the `cloudbench` command."""

from cloudbench.cli import main

main()
