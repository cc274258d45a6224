"""Rewrite the case table and the per-cause counts in cases/README.md from the case files."""
from collections import Counter
from pathlib import Path

import yaml

CASES = Path(__file__).resolve().parent.parent / "cases"


def rows():
    for path in sorted(CASES.glob("*.yaml")) + sorted((CASES / "holdout").glob("*.yaml")):
        case = yaml.safe_load(path.read_text())
        exp = case["expected"]
        split = "holdout" if path.parent.name == "holdout" else "library"
        yield case["id"], exp["root_cause"], ", ".join(exp.get("also_acceptable") or []) or "-", split, case["source"]


def main():
    table = list(rows())
    table.sort(key=lambda r: (int(r[0].split("_")[0]), r[0]))
    counts = Counter(r[1] for r in table)
    held = sum(r[3] == "holdout" for r in table)
    out = ["## Cases", "", "| id | root cause | also acceptable | split | source |", "|---|---|---|---|---|"]
    out += [f"| {' | '.join(r)} |" for r in table]
    out += ["", "## Count per root cause", "", f"{len(table)} cases in total ({held} in holdout).", "",
            "| root cause | cases |", "|---|---|"] + [f"| {c} | {n} |" for c, n in sorted(counts.items())] + [""]
    readme = (CASES / "README.md").read_text()
    head, _, rest = readme.partition("## Cases\n")
    _, _, tail = rest.partition("## Validation")
    (CASES / "README.md").write_text(head + "\n".join(out) + "\n## Validation" + tail)


if __name__ == "__main__":
    main()
