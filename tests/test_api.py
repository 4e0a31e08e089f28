"""The public API: every name resolves, is documented, and `import cloudbench` stays light."""

from __future__ import annotations

import inspect
import subprocess
import sys

import cloudbench


def test_every_public_name_resolves_and_has_a_docstring() -> None:
    for name in cloudbench.__all__:
        obj = getattr(cloudbench, name)
        if name == "__version__":
            assert isinstance(obj, str) and obj.count(".") == 2
            continue
        doc = inspect.getdoc(obj)
        assert doc and not doc.startswith(f"{name}("), f"{name} has no docstring of its own"


def test_unknown_names_are_attribute_errors() -> None:
    try:
        _ = cloudbench.no_such_thing  # type: ignore[attr-defined]
    except AttributeError as e:
        assert "no_such_thing" in str(e)
    else:
        raise AssertionError("cloudbench.no_such_thing resolved")


def test_import_is_lazy() -> None:
    code = ("import sys, cloudbench; heavy = [m for m in ('pyarrow', 'pydantic', 'asyncssh', "
            "'cloudbench.runner', 'cloudbench.workloads') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
