"""Check case files' format without diagnosing them: python scripts/check_case.py FILE...

id equals the file name, the keys are there, causes and signals exist, `initial` signals are in
`current`, and no other case uses the same source. Prints FILE: OK or the problems; exit 1 on any.
"""
import sys
from pathlib import Path

import yaml

from perfdoctor.errors import InputError
from perfdoctor.kb.loader import load_kb
from perfdoctor.symptoms.snapshot import parse_snapshot

CASES = Path(__file__).resolve().parent.parent / "cases"


def problems(path: Path, kb, sources: dict) -> list[str]:
    out = []
    case = yaml.safe_load(path.read_text())
    if not isinstance(case, dict):
        return ["not a mapping"]
    out += [f"missing {k}" for k in ("id", "source", "summary", "expected", "initial", "snapshot") if k not in case]
    if case.get("id") != path.stem:
        out.append(f"id {case.get('id')!r} is not the file name {path.stem!r}")
    exp = case.get("expected") or {}
    out += [f"unknown root cause {rc!r}" for rc in [exp.get("root_cause"), *(exp.get("also_acceptable") or [])]
            if rc not in kb.root_causes]
    try:
        out += parse_snapshot(case.get("snapshot") or {}, kb, str(path)).warnings
    except InputError as exc:
        out.append(str(exc))
    config = ((case.get("snapshot") or {}).get("context") or {}).get("model_config")
    if isinstance(config, str) and not (path.parent / config).is_file():
        out.append(f"context.model_config {config!r} is not a file: it is the path of a Hugging Face config.json")
    current = (case.get("snapshot") or {}).get("current") or {}
    out += [f"initial {s} is not in current" for s in case.get("initial") or [] if s not in current]
    others = [p for p in sources.get(case.get("source"), []) if p != path.name]
    if others and case.get("source") != "synthetic":
        out.append(f"source also used by {', '.join(others)}")
    return out


def main(paths: list[str]) -> int:
    kb = load_kb()
    sources = {}
    for p in list(CASES.glob("*.yaml")) + list((CASES / "holdout").glob("*.yaml")) + [Path(a) for a in paths]:
        source = (yaml.safe_load(p.read_text()) or {}).get("source")
        if p.name not in sources.setdefault(source, []):
            sources[source].append(p.name)
    bad = 0
    for arg in paths:
        found = problems(Path(arg), kb, sources)
        bad += bool(found)
        print(f"{arg}: " + ("OK" if not found else "; ".join(map(str, found))))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
