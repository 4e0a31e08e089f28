"""nox sessions: tests, lint, typecheck, bench (in the current environment; see README)."""

from __future__ import annotations

import sys

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.default_venv_backend = "none"


@nox.session
def tests(session: nox.Session) -> None:
    """The whole suite (integration tests need root)."""
    session.run(sys.executable, "-m", "pytest", *session.posargs)


@nox.session
def unit(session: nox.Session) -> None:
    """Fast tests only (no root, no namespaces)."""
    session.run(sys.executable, "-m", "pytest", "-m", "not integration", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, and the import contracts of pyproject.toml (layers, no cycles)."""
    session.run("ruff", "check", ".")
    session.run("lint-imports")


@nox.session
def typecheck(session: nox.Session) -> None:
    session.run("mypy")


@nox.session
def bench(session: nox.Session) -> None:
    """Every benchmark, printing its figures (needs root; several minutes)."""
    session.run(sys.executable, "bench/run_all.py", *session.posargs)
