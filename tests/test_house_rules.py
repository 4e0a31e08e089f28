"""The house rules of the package, checked on its source with ``ast`` (fast; nothing is imported).

- no function over 80 lines and no module over 600 lines in the package (the stdlib workers are
  exempt: they are single-file programs copied to the measured hosts);
- every public module-level function and class of the package has a docstring (the workers are
  exempt: their bytes are hashed into ``worker_version``, and a docstring would stop new runs
  from pooling with old ones);
- no comment or docstring names an issue number (in the package, ``tests/`` and ``bench/``):
  it says what the code does and why instead; nor a Markdown document the repository lacks;
- no private name (``_x``) is imported from another package (in the package and ``bench/``);
- the public API's names are one list (``cloudbench._API``), and the ``TYPE_CHECKING`` imports
  that mypy reads name the same objects;
- no unused definition (vulture, with ``tests/vulture_whitelist.py`` for what it cannot see).
"""

from __future__ import annotations

import ast
import functools
import io
import re
import shutil
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import ROOT

PACKAGE = ROOT / "cloudbench"
WORKERS = PACKAGE / "workers"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600

ISSUE_NUMBER = re.compile(r"\b[Ii]ssues?\s+#?\d+|(?:^|(?<=[\s(]))#\d+\b")


def rel(path: Path) -> str:
    """The path relative to the repository, with forward slashes."""
    return path.relative_to(ROOT).as_posix()


def package_files() -> list[Path]:
    """Every module of the package."""
    return sorted(PACKAGE.rglob("*.py"))


def is_worker(path: Path) -> bool:
    """Whether the module is one of the stdlib workers copied to the measured hosts."""
    return WORKERS in path.parents


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The module's syntax tree, parsed once for every rule (the rules run on one worker:
    SHARED_MODULES in tests/conftest.py)."""
    return ast.parse(path.read_text(), filename=str(path))


def checked(paths: list[Path], *, workers: bool) -> Iterator[tuple[Path, ast.Module]]:
    """The files a rule applies to, parsed: without those being split (and the workers)."""
    for path in paths:
        if not workers and is_worker(path):
            continue
        yield path, parsed(path)


def test_no_function_is_over_80_lines() -> None:
    long = [f"{rel(p)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"  # type: ignore[operator]
            for p, tree in checked(package_files(), workers=False) for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]  # type: ignore[operator]
    assert not long, "functions over 80 lines:\n" + "\n".join(long)


def test_no_module_is_over_600_lines() -> None:
    long = [f"{rel(p)} ({n} lines)" for p in package_files()
            if not is_worker(p)
            and (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not long, "modules over 600 lines:\n" + "\n".join(long)


def test_every_public_module_level_function_and_class_has_a_docstring() -> None:
    missing = [f"{rel(p)}:{node.lineno} {node.name}" for p, tree in checked(package_files(), workers=False)
               for node in tree.body
               if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
               and not node.name.startswith("_") and ast.get_docstring(node) is None]
    assert not missing, f"{len(missing)} public names without a docstring:\n" + "\n".join(missing)


@functools.cache
def comments_and_docstrings(path: Path) -> tuple[tuple[int, str], ...]:
    """(line, text) of every comment and every docstring (module, class, function) of a file."""
    found = [(tok.start[0], tok.string.lstrip("#"))
             for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.append((body[0].lineno, body[0].value.value))
    return tuple(found)


def test_issue_number_pattern() -> None:
    for text in ("issue 14", "Issue 23, point 7", "(issue 16; a low quantile", "see #23", "issues 14"):
        assert ISSUE_NUMBER.search(text), text
    for text in ("color:#111", "stroke=\"#444\"", "point 6", "p99", "the #-th", "&#39;"):
        assert not ISSUE_NUMBER.search(text), text


def test_no_comment_or_docstring_names_an_issue_number() -> None:
    paths = [*package_files(), *sorted((ROOT / "tests").rglob("*.py")), *sorted((ROOT / "bench").glob("*.py"))]
    found = [f"{rel(p)}:{line}: {m.group(0)!r}" for p in paths
             for line, text in comments_and_docstrings(p)
             for m in ISSUE_NUMBER.finditer(text)]
    assert not found, "issue numbers in comments/docstrings (say what and why instead):\n" + "\n".join(found)


DOC_FILE = re.compile(r"\b[A-Z][A-Z-]*[A-Z]\.md\b")


def test_comments_and_docstrings_cite_only_documents_the_repository_has() -> None:
    """Every Markdown document named in a comment or docstring exists at the repository's root."""
    paths = [*package_files(), *sorted((ROOT / "tests").rglob("*.py")), *sorted((ROOT / "bench").glob("*.py"))]
    missing = [f"{rel(p)}:{line}: {m.group(0)}" for p in paths
               for line, text in comments_and_docstrings(p)
               for m in DOC_FILE.finditer(text) if not (ROOT / m.group(0)).exists()]
    assert not missing, "documents the repository does not have:\n" + "\n".join(missing)


def module_name(path: Path) -> str:
    """The dotted name of a module of the repository (``cloudbench.x.y``, ``bench.bench_echo``)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path: Path) -> str:
    """The dotted name of the package a module belongs to."""
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def private_imports(path: Path, tree: ast.Module) -> Iterator[str]:
    """``from cloudbench.M import _x`` where M is in another package than the importing module."""
    own = package_of(path)
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = own.split(".")[: len(own.split(".")) - node.level + 1]
            target = ".".join([*base, node.module] if node.module else base)
        else:
            target = node.module or ""
        if not target.startswith("cloudbench"):
            continue
        target_path = ROOT / Path(*target.split("."))
        target_pkg = target if target_path.is_dir() else target.rpartition(".")[0]
        for alias in node.names:
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if (private or any(p.startswith("_") and not p.startswith("__") for p in target.split("."))) \
                    and target_pkg != own:
                yield f"{rel(path)}:{node.lineno} from {target} import {alias.name}"


def test_no_private_name_is_imported_across_packages() -> None:
    paths = [*package_files(), *sorted((ROOT / "bench").glob("*.py"))]
    found = [hit for p, tree in checked(paths, workers=True) for hit in private_imports(p, tree)]
    assert not found, "private names imported from another package:\n" + "\n".join(found)


def test_the_private_import_check_sees_one() -> None:
    tree = ast.parse("from cloudbench.core.files import _tmp\nfrom .files import _tmp2\n")
    assert len(list(private_imports(PACKAGE / "report" / "build.py", tree))) == 1
    assert not list(private_imports(PACKAGE / "core" / "units.py", tree))


def test_public_api_is_one_list() -> None:
    import cloudbench  # here: the other tests of this file import nothing of the package

    api: dict[str, tuple[str, str]] = cloudbench._API
    assert cloudbench.__all__ == sorted({"__version__", *api})
    source = (PACKAGE / "__init__.py").read_text()
    tree = ast.parse(source)
    typed: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    for alias in stmt.names:
                        typed[alias.asname or alias.name] = (stmt.module, alias.name)
                else:  # `public = _imported`: a public name that differs from the module's
                    assert isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name), ast.dump(stmt)
                    target = stmt.targets[0]
                    assert isinstance(target, ast.Name)
                    typed[target.id] = typed.pop(stmt.value.id)
    assert typed == api, "the TYPE_CHECKING imports and _API name different objects"


VULTURE_PATHS = ("cloudbench", "bench", "stacks", "scripts", "tests", "noxfile.py")
VULTURE_WHITELIST = ROOT / "tests" / "vulture_whitelist.py"


def test_no_unused_definitions() -> None:
    if shutil.which("vulture", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("vulture is not installed (pip install -e '.[dev]')")
    out = subprocess.run([sys.executable, "-m", "vulture", *VULTURE_PATHS, str(VULTURE_WHITELIST),
                          "--min-confidence", "60"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    # tests/ is scanned for uses only (pytest finds tests and fixtures by name)
    unused = [line for line in out.stdout.splitlines()
              if not line.startswith("tests/")]
    assert not unused, ("unused definitions (delete them, or add a false positive to "
                        "tests/vulture_whitelist.py with the reason):\n" + "\n".join(unused))
