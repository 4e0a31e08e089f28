from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cloudbench.cli import app
from cloudbench.core.units import parse_duration, parse_size
from cloudbench.errors import SpecError
from cloudbench.workloads import json_schema, load_spec, parse_spec
from tests.paths import QUICKSTART


def line_of(text: str, needle: str) -> int:
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


def error_of(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "bad.yaml")
    return info.value


def test_quickstart_is_valid() -> None:
    spec = load_spec(QUICKSTART)
    topo = spec.topology()
    assert len(topo) == 8
    assert topo.regions == ["r1", "r2", "r3"]
    assert topo.zones("r1") == ["r1-a", "r1-b", "r1-c"]
    assert topo.subnets_in("r1-a") == ["s1", "s2"]
    assert [h.name for h in topo if h.subnet == "s1"] == ["s1-1", "s1-2", "s1-3"]


@pytest.mark.parametrize(
    ("old", "new", "field", "needle", "words"),
    [
        ("seed: 42", "seed: 42\nsede: 1", "sede", "sede:", "unknown key"),
        ("self_loop: true", "self_lop: true", "workloads[0].self_lop", "self_lop", "unknown key"),
        ("rate: 100", "rate: fast", "workloads[0].rate", "rate: fast", "valid number"),
        ("duration: 20s", "duration: 10 mins", "workloads[0].duration", "10 mins", "bad duration"),
        ("repetitions: 2", "repetitions: 0", "repetitions", "repetitions: 0", "greater than or equal to 1"),
        ("payload: 1024", "payload: 65537", "workloads[0].payload", "65537", "less than or equal"),
        ("payload: 1024", "payload: 128KiB", "workloads[0].payload", "128KiB", "less than or equal"),
        ("rate: 100", "rate: 0", "workloads[0].rate", "rate: 0", "greater than 0"),
        ("rate: 100", "rate: -5", "workloads[0].rate", "rate: -5", "greater than 0"),
        ("s2: {hosts: 1}", "s2: {hosts: [s1-1]}", "hosts[0]", "s2: {hosts: [s1-1]}", "duplicate host name"),
        ("subnet1: [s1-1, s1-2, s1-3]", "subnet1: [s1-1, s1-2, s9-9]", "groups.subnet1[2]",
         "subnet1: [s1-1", "unknown host 's9-9'"),
        ("- group: subnet1", "- hosts: [s1-1, nohost]", "quorums[0].hosts[1]", "- hosts: [s1-1",
         "unknown host 'nohost'"),
        ("k: [2, 3]", "k: [2, 4]", "quorums[0].k[1]", "k: [2, 4]", "k=4 but each member gets at most 3"),
        ("rate: 100", "rate: .inf", "workloads[0].rate", "rate: .inf", "finite"),
        ("rate: 100", "rate: 2e6", "workloads[0].rate", "rate: 2e6", "less than or equal"),
        ("timeout: 1s", "timeout: 2h", "workloads[0].timeout", "timeout: 2h", "less than or equal"),
        ("s1: {hosts: 3}", "s1: {hosts: three}", "subnets.s1.hosts", "hosts: three", "number of hosts or a list"),
        ("s1: {hosts: 3}", "s1: {hosts: 100000}", "subnets.s1.hosts", "hosts: 100000", "1 to 240 hosts"),
        ("subnet1: [s1-1, s1-2, s1-3]", "all: [s1-1, s1-2, s1-3]", "groups.all", "all: [s1-1", "reserved"),
        ("self_loop: true", "self_loop: false", "quorums[0].k[1]", "k: [2, 3]", "self_loop is off"),
        ("subnet1: [s1-1, s1-2, s1-3]", "subnet1: [s1-1, s1-2, s1-2]", "quorums[0]", "- group: subnet1",
         "more than once"),
        ("fresh_hosts: repetition", "fresh_hosts: sometimes", "fresh_hosts", "sometimes", "repetition"),
        ("self_loop: true", "self_loop: true\n    rx_timestamp: nic", "workloads[0].rx_timestamp",
         "rx_timestamp: nic", "'kernel' or 'user'"),
    ],
)
def test_errors_name_file_line_and_field(
    quickstart_text: str, old: str, new: str, field: str, needle: str, words: str
) -> None:
    assert old in quickstart_text
    text = quickstart_text.replace(old, new, 1)
    e = error_of(text)
    assert e.path == "bad.yaml"
    assert e.line == line_of(text, needle), str(e)
    assert field in e.field, str(e)
    assert words in str(e)


def test_zone_under_wrong_region(quickstart_text: str) -> None:
    text = quickstart_text.replace("          r1-c:", "          r2-c:")
    e = error_of(text)
    assert e.line == line_of(text, "r2-c:")
    assert "zone 'r2-c' is under region 'r1'" in str(e)
    assert e.field.endswith("zones.r2-c")


def test_all_errors_are_reported(quickstart_text: str) -> None:
    text = quickstart_text.replace("rate: 100", "rate: 0").replace("repetitions: 2", "repetitions: 0")
    e = error_of(text)
    assert "repetitions" in str(e) and "workloads[0].rate" in str(e)


def test_duplicate_yaml_key_is_an_error(quickstart_text: str) -> None:
    text = quickstart_text.replace("seed: 42", "seed: 42\nseed: 43")
    e = error_of(text)
    assert "duplicate key 'seed'" in str(e)
    assert e.line == line_of(text, "seed: 43")


def test_not_yaml_and_empty() -> None:
    assert error_of("name: [unclosed\n").line is not None
    assert "empty" in str(error_of(""))


def test_missing_file() -> None:
    with pytest.raises(SpecError, match="no such file"):
        load_spec("/nonexistent/spec.yaml")


def test_units() -> None:
    assert parse_duration("500ms") == 0.5
    assert parse_duration("10m") == 600
    assert parse_duration(3) == 3.0
    assert parse_size("64KiB") == 65536
    assert parse_size("1k") == 1024
    for bad in ("10 mins", "fast", "-1s"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_validate_cli_fails_and_creates_nothing(tmp_path: Path, quickstart_text: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(quickstart_text.replace("rate: 100", "rate: 0"))
    before = sorted(tmp_path.iterdir())
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2
    assert f"{bad}:{line_of(bad.read_text(), 'rate: 0')}" in r.output
    assert "workloads[0].rate" in r.output
    assert "Traceback" not in r.output
    assert sorted(tmp_path.iterdir()) == before


@pytest.mark.parametrize(("old", "new", "shown"), [
    ("repetitions: 2", "repetitions: 0", "[repetitions]"),
    ("name: quickstart", 'name: "[/x]"', "[name]"),
])
def test_validate_cli_shows_fields_verbatim(tmp_path: Path, quickstart_text: str, old: str, new: str,
                                            shown: str) -> None:
    """Field names in brackets and odd input must reach the terminal as written."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(quickstart_text.replace(old, new))
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2, r.output
    assert f"{bad}:{line_of(bad.read_text(), new)}: {shown}" in r.output
    assert "Traceback" not in r.output


def test_validate_cli_ok(tmp_path: Path, quickstart_text: str) -> None:
    # A long path: messages are one line however long, never wrapped at the console width.
    deep = tmp_path / ("a-directory-with-a-rather-long-name-" * 3) / "quickstart.yaml"
    deep.parent.mkdir()
    deep.write_text(quickstart_text)
    r = CliRunner().invoke(app, ["validate", str(deep)])
    assert r.exit_code == 0, r.output
    assert r.stdout.count("\n") == 1, r.output
    assert f"ok: {deep}: campaign 'quickstart', 8 hosts, 2 trials" in r.stdout
    # the quickstart's 2 repetitions: a warning, one line on stderr
    assert r.stderr.count("\n") == 1 and "repetitions: 2 give 2 value(s) per series" in r.stderr


def test_schema_cli_prints_a_json_schema() -> None:
    r = CliRunner().invoke(app, ["schema"])
    assert r.exit_code == 0
    schema = json.loads(r.output)
    assert schema["title"] == "cloudbench campaign spec"
    assert "workloads" in schema["properties"]
    assert schema == json.loads(json.dumps(json_schema()))


def test_one_provider_per_campaign(quickstart_text: str) -> None:
    text = quickstart_text.replace("groups:", """  aws:
    controller_cidr: 203.0.113.7/32
    regions:
      us-east-1:
        zones:
          us-east-1a:
            subnets:
              c1: {hosts: 1, vm_type: m5.large}
groups:""")
    e = error_of(text)
    assert "one provider" in str(e) and "netns, aws" in str(e)
    assert e.line == line_of(text, "providers:")


def test_unknown_keys_in_workloads_list_the_kinds_keys_and_locations_name_only_fields() -> None:
    text = """
name: t
providers: {netns: {regions: {r1: {zones: {r1-a: {subnets: {s1: {hosts: 2}}}}}}}}
workloads:
  - kind: echo
    rat: 100
  - kind: throughput
    pattern: {send: 10s, sleep: 30s}
"""
    with pytest.raises(SpecError) as info:
        parse_spec(text, "t.yaml")
    msgs = str(info.value).splitlines()
    assert any(m.startswith("t.yaml:6: [workloads[0].rat] unknown key 'rat'; known keys: ") and "rate" in m
               for m in msgs), msgs
    assert "t.yaml:8: [workloads[1].pattern.sleep] unknown key 'sleep'; known keys: pause, send" in msgs
    assert not any("Model" in m for m in msgs), msgs
