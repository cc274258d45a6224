"""Load the YAML knowledge base into one read-only object, collecting every schema error."""
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from perfdoctor.errors import InputError
from perfdoctor.kb import schema
from perfdoctor.yamlio import load_file

KB_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Issue:
    """One problem found in the KB: where it is, which entry, which field, what is wrong."""
    file: str
    entry: str
    field: str
    message: str
    severity: str = "error"

    def __str__(self):
        parts = [self.file, self.entry, self.field, self.message]
        return ": ".join(p for p in parts if p)


@dataclass
class KB:
    """The knowledge base: entries by id, plus the file each came from (for messages)."""
    root: Path
    classes: schema.Classes | None = None
    signals: dict[str, schema.Signal] = field(default_factory=dict)
    findings: dict[str, schema.Finding] = field(default_factory=dict)
    finding_signal: dict[str, str] = field(default_factory=dict)
    changes: dict[str, schema.Change] = field(default_factory=dict)
    mechanisms: dict[str, schema.Mechanism] = field(default_factory=dict)
    root_causes: dict[str, schema.RootCause] = field(default_factory=dict)
    probes: dict[str, schema.Probe] = field(default_factory=dict)
    technologies: dict[str, schema.Technology] = field(default_factory=dict)
    source_file: dict[str, str] = field(default_factory=dict)
    issues: list[Issue] = field(default_factory=list)


CHANGE_PREFIX = "changed_"


def change_finding_id(change_id: str) -> str:
    return CHANGE_PREFIX + change_id


def _loc(err) -> str:
    """The error's key path, without pydantic's tags for which member of a union it tried (list[Condition],
    function-after[_one_bound(), Condition])."""
    out = ""
    for part in err["loc"]:
        if isinstance(part, str) and ("[" in part or isinstance(getattr(schema, part, None), type)):
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _shown(path: Path, root: Path) -> str:
    try:
        return str(Path(root.name) / path.relative_to(root))
    except ValueError:
        return str(path)


def load_kb(root: Path | str = KB_DIR) -> KB:
    """Read every KB file under `root`. Schema problems are collected in `kb.issues`, never raised."""
    root = Path(root)
    kb = KB(root=root)
    _load_list(kb, root / "signals", "*.yaml", schema.Signal, kb.signals)
    _load_list(kb, root, "changes.yaml", schema.Change, kb.changes)
    _load_list(kb, root, "mechanisms.yaml", schema.Mechanism, kb.mechanisms)
    _load_list(kb, root, "probes.yaml", schema.Probe, kb.probes)
    _load_each(kb, root / "root_causes", schema.RootCause, kb.root_causes)
    _load_each(kb, root / "technologies", schema.Technology, kb.technologies)
    classes_path = root / "classes.yaml"
    if classes_path.exists():
        data = _read(kb, classes_path)
        if data is not None:
            kb.classes = _validate(kb, schema.Classes, data, _shown(classes_path, root), "")
    for signal in kb.signals.values():
        for finding in signal.findings:
            _register(kb, kb.findings, finding.id, finding, kb.source_file[signal.id], "finding")
            kb.finding_signal[finding.id] = signal.id
    for change in kb.changes.values():
        fid = change_finding_id(change.id)
        finding = schema.Finding(id=fid, title=f"changed before the regression: {change.title}",
                                 rule=schema.Rule(contains_any=[change.id]), leak=change.leak)
        _register(kb, kb.findings, fid, finding, kb.source_file[change.id], "finding")
        kb.finding_signal[fid] = "changes"
    _load_translations(kb)
    return kb


TRANSLATED = {  # catalog file in kb/i18n/<lang>/ -> the KB table it translates
    "root_causes": "root_causes", "mechanisms": "mechanisms", "signals": "signals", "findings": "findings",
    "probes": "probes", "changes": "changes", "technologies": "technologies",
}


def _load_translations(kb):
    """Attach kb/i18n/zh/<table>.yaml (entry id -> Translation fields) to each entry as its `zh`."""
    folder = kb.root / "i18n" / "zh"
    for name, table_name in TRANSLATED.items():
        path = folder / f"{name}.yaml"
        if not path.exists():
            continue
        data = _read(kb, path) or {}
        table, shown = getattr(kb, table_name), _shown(path, kb.root)
        for entry_id, fields in data.items():
            if entry_id not in table:
                kb.issues.append(Issue(shown, str(entry_id), "", f"translation of an unknown {name[:-1]}"))
                continue
            zh = _validate(kb, schema.Translation, fields, shown, str(entry_id))
            if zh is not None:
                table[entry_id] = table[entry_id].model_copy(update={"zh": zh})
        if table_name == "findings":
            for sid, signal in kb.signals.items():
                kb.signals[sid] = signal.model_copy(update={"findings": [kb.findings[f.id] for f in signal.findings]})


def require_valid(kb: KB) -> KB:
    """Raise InputError on the first error issue (for commands other than `kb check`)."""
    for issue in kb.issues:
        if issue.severity == "error":
            raise InputError(issue.file, ".".join(p for p in (issue.entry, issue.field) if p), issue.message)
    return kb


def _read(kb, path):
    try:
        return load_file(path, _shown(path, kb.root))
    except InputError as exc:
        kb.issues.append(Issue(exc.where, "", exc.key, exc.problem))
        return None


def _validate(kb, model, data, shown, entry_id):
    try:
        return model(**data) if isinstance(data, dict) else model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # a union (one condition or a list of them) reports every member it tried: where one member got the
        # right kind of input, the others' "should be a valid list/dict" errors at the same key are noise
        real = {_loc(e) for e in errors if not e["type"].endswith("_type")}
        for err in errors:
            if not (err["type"].endswith("_type") and _loc(err) in real):
                kb.issues.append(Issue(shown, entry_id, _loc(err), err["msg"]))
        return None


def _register(kb, table, entry_id, entry, shown, what):
    if entry_id in table:
        kb.issues.append(Issue(shown, entry_id, "id", f"duplicate {what} id (also in {kb.source_file.get(entry_id)})"))
        return
    table[entry_id] = entry
    kb.source_file.setdefault(entry_id, shown)


def _load_list(kb, folder, pattern, model, table):
    for path in sorted(folder.glob(pattern)):
        shown = _shown(path, kb.root)
        data = _read(kb, path)
        if data is None:
            continue
        if not isinstance(data, list):
            kb.issues.append(Issue(shown, "", "", "expected a list of entries"))
            continue
        for index, item in enumerate(data):
            entry_id = item.get("id", f"[{index}]") if isinstance(item, dict) else f"[{index}]"
            entry = _validate(kb, model, item, shown, str(entry_id))
            if entry is not None:
                _register(kb, table, entry.id, entry, shown, model.__name__.lower())


def _load_each(kb, folder, model, table):
    for path in sorted(folder.glob("*.yaml")):
        shown = _shown(path, kb.root)
        data = _read(kb, path)
        if data is None:
            continue
        if not isinstance(data, dict):
            kb.issues.append(Issue(shown, "", "", "expected one entry (a mapping)"))
            continue
        entry = _validate(kb, model, data, shown, str(data.get("id", path.stem)))
        if entry is None:
            continue
        if entry.id != path.stem:
            kb.issues.append(Issue(shown, entry.id, "id", f"must equal the file name '{path.stem}'"))
        _register(kb, table, entry.id, entry, shown, model.__name__.lower())
