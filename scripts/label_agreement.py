"""How often an independent reader names a case's labelled cause: python scripts/label_agreement.py AUDIT.csv

AUDIT.csv (id,cause,confidence,second) holds one auditor's reading of each case: the one root cause the case's
summary, setup and reported changes establish, read without the label, the signals or perfdoctor's output.
Prints, for the library and the holdout: the share where the auditor's cause is the label, where it is the label
or an also_acceptable cause, and the same among the auditor's high-confidence readings.
"""
import csv
import sys
from pathlib import Path

import yaml

CASES = Path(__file__).resolve().parent.parent / "cases"


def main(audit_path: str) -> None:
    with open(audit_path, newline="") as f:
        audit = {row["id"]: row for row in csv.DictReader(f)}
    parts = {"library": [], "holdout": []}
    for path in sorted(CASES.rglob("*.yaml")):
        case = yaml.safe_load(path.read_text())
        row = audit.get(case["id"])
        if row is None:
            sys.exit(f"{audit_path}: no reading for case {case['id']}")
        expected = case["expected"]
        acceptable = {expected["root_cause"], *(expected.get("also_acceptable") or [])}
        part = "holdout" if "holdout" in path.relative_to(CASES).parts else "library"
        parts[part].append((row["cause"] == expected["root_cause"], row["cause"] in acceptable,
                            row["confidence"] == "high"))
    for part, rows in parts.items():
        high = [r for r in rows if r[2]]
        share = lambda hits, n: f"{sum(hits) / n:.3f}" if n else "n/a"   # noqa: E731
        print(f"{part} ({len(rows)} cases): auditor names the label {share([r[0] for r in rows], len(rows))}, "
              f"an acceptable cause {share([r[1] for r in rows], len(rows))}; high-confidence readings "
              f"{len(high)}, acceptable {share([r[1] for r in high], len(high))}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[0])
    main(sys.argv[1])
