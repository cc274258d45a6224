"""The audit forms in benchmarks/forms/ stay readable by the current KB: every form names a public source and
a known cause, and its snapshot parses without a warning (a renamed signal would otherwise drop a reading)."""
from pathlib import Path

import pytest
import yaml

from perfdoctor.symptoms.snapshot import parse_snapshot

FORMS = sorted((Path(__file__).resolve().parent.parent / "benchmarks" / "forms").rglob("*.yaml"))


def test_there_are_forms():
    assert len(FORMS) >= 500


@pytest.mark.parametrize("path", FORMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_form_parses_cleanly(kb, path):
    form = yaml.safe_load(path.read_text())
    assert str(form.get("source", "")).startswith("http"), "a form names the public source it comes from"
    causes = {form["expected"]["root_cause"], *(form["expected"].get("also_acceptable") or [])}
    assert causes <= set(kb.root_causes)
    snap = parse_snapshot(form["snapshot"], kb, str(path))
    assert snap.warnings == []
