"""Pulumi projects, one per cloud (see README.md); a package only so type checkers can tell them apart."""
