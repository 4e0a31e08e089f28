"""The token-bucket workload's kind is ``tokenbucket``; the old spelling ``tbdrain`` stays
readable: in a spec (with the name it gave), and in the manifests of old runs (migrated)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudbench.errors import SpecError
from cloudbench.report.build import build_report
from cloudbench.store.manifest import migrate_kinds
from cloudbench.workloads import parse_spec, workload_kind
from cloudbench.workloads.tbdrain.params import TbDrainWorkload
from tests.workloads.throughput.test_workload import SPEC, fake_run, line_of

OLD = "  - kind: tbdrain\n"


def test_both_spellings_parse_to_the_one_kind_and_the_old_keeps_its_name() -> None:
    assert OLD in SPEC
    old = parse_spec(SPEC, "old.yaml").workload("tbdrain")
    new = parse_spec(SPEC.replace(OLD, "  - kind: tokenbucket\n"), "new.yaml").workload("tokenbucket")
    named = parse_spec(SPEC.replace(OLD, "  - kind: tbdrain\n    name: drain\n"), "n.yaml").workload("drain")
    for w in (old, new, named):
        assert isinstance(w, TbDrainWorkload) and w.kind == "tokenbucket"
    assert old.model_dump() == {**new.model_dump(), "name": "tbdrain"}
    assert workload_kind("tbdrain") is workload_kind("tokenbucket")


@pytest.mark.parametrize("kind", ["tbdrain", "tokenbucket"])
def test_a_bad_field_under_either_spelling_names_its_line(kind: str) -> None:
    text = SPEC.replace(OLD, f"  - kind: {kind}\n").replace("rest: 20s", "rest: soon")
    with pytest.raises(SpecError) as info:
        parse_spec(text, "bad.yaml")
    assert info.value.line == line_of(text, "rest: soon") and "bad duration" in str(info.value)


def _as_old(path: Path) -> None:
    """Rewrite a manifest as cloudbench wrote it before the rename: kind ``tbdrain`` everywhere."""
    doc = json.loads(path.read_text())
    for w in doc["spec"]["workloads"]:
        if w["kind"] == "tokenbucket":
            w["kind"] = "tbdrain"
            del w["name"]  # an entry without a name: the old kind named it
    for t in doc["trials"]:
        t["kind"] = "tbdrain" if t["workload"] == "tbdrain" else t["kind"]
    path.write_text(json.dumps(doc))


def test_an_old_manifest_is_migrated_and_still_reports(tmp_path: Path) -> None:
    new_run = fake_run(tmp_path / "new")
    new_run.manifest_path.write_text(new_run.manifest_path.read_text().replace('"kind": "tbdrain"',
                                                                               '"kind": "tokenbucket"'))
    old_run = fake_run(tmp_path / "old")
    _as_old(old_run.manifest_path)
    assert '"tbdrain"' in old_run.manifest_path.read_text()
    m = old_run.manifest()
    (w,) = m.workloads("tokenbucket")
    assert w["name"] == "tbdrain" and {t.kind for t in m.trials} == {"tokenbucket", "throughput"}
    old, new = build_report(old_run), build_report(new_run)
    sec = old["workloads"]["tbdrain"]
    assert sec["kind"] == "tokenbucket" and sec["drains"][0]["drained"]
    assert sec == new["workloads"]["tbdrain"]  # the same numbers as a run written with the new kind


def test_the_migration_leaves_other_kinds_and_named_entries_alone() -> None:
    doc = {"spec": {"workloads": [{"kind": "tbdrain", "name": "drain"}, {"kind": "echo"}]},
           "resolved": {"workloads": [{"kind": "tbdrain"}]}, "plan": {"trials": [{"kind": "tbdrain"}]},
           "trials": [{"kind": "echo"}]}
    out = migrate_kinds(doc)
    assert out["spec"]["workloads"] == [{"kind": "tokenbucket", "name": "drain"}, {"kind": "echo"}]
    assert out["resolved"]["workloads"] == [{"kind": "tokenbucket", "name": "tbdrain"}]
    assert out["plan"]["trials"] == [{"kind": "tokenbucket"}] and out["trials"] == [{"kind": "echo"}]
