"""Rank the audit forms in benchmarks/forms/ and print AC@1 / AC@3, overall and per expected cause.

The forms are short synthetic incidents that knowledge-audit helpers wrote from public sources (each names its
source), in the sparse style of an on-call report. They are a development set beside cases/: a KB edit should
lose none of them. `--kb-baseline DIR` scores a second KB (say, `git archive HEAD~1 kb | tar -x -C /tmp/old`)
on the same forms in the same run.

usage: python benchmarks/bench_forms.py [--kb DIR] [--kb-baseline DIR] [--misses]
"""
import argparse
import collections
from pathlib import Path

import yaml

from perfdoctor.engine.rank import Engine
from perfdoctor.symptoms.snapshot import parse_snapshot

ROOT = Path(__file__).resolve().parent.parent
FORMS = ROOT / "benchmarks" / "forms"


def rank_forms(kb_dir: Path) -> dict[str, tuple[str, int, str]]:
    """Form path -> (expected cause, rank of the expected or an acceptable cause, cause ranked first)."""
    engine = Engine.load(kb_dir)
    out = {}
    for path in sorted(FORMS.rglob("*.yaml")):
        form = yaml.safe_load(path.read_text())
        expected = form["expected"]
        ok = {expected["root_cause"], *(expected.get("also_acceptable") or [])}
        diagnosis = engine.diagnose(parse_snapshot(form["snapshot"], engine.kb, str(path)), with_probes=False)
        ids = [h.id for h in diagnosis.hypotheses]
        out[str(path.relative_to(FORMS))] = (expected["root_cause"], min(ids.index(c) for c in ok) + 1, ids[0])
    return out


def summary(ranks: dict) -> str:
    n = len(ranks)
    at = lambda k: sum(r <= k for _, r, _ in ranks.values()) / n
    return f"{n} forms  AC@1 {at(1):.3f}  AC@3 {at(3):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", type=Path, default=ROOT / "kb")
    ap.add_argument("--kb-baseline", type=Path)
    ap.add_argument("--misses", action="store_true", help="list the forms whose expected cause is not first")
    args = ap.parse_args()
    ranks = rank_forms(args.kb)
    print(f"{args.kb}: {summary(ranks)}")
    if args.kb_baseline:
        base = rank_forms(args.kb_baseline)
        print(f"{args.kb_baseline}: {summary(base)}")
        for form, (cause, rank, top) in ranks.items():
            if base[form][1] != rank:
                print(f"  {form} [{cause}] rank {base[form][1]} -> {rank}")
    per_cause = collections.defaultdict(lambda: [0, 0, 0])
    for cause, rank, _ in ranks.values():
        row = per_cause[cause]
        row[0] += 1
        row[1] += rank == 1
        row[2] += rank <= 3
    print("per expected cause (forms, first, top 3):")
    for cause, (n, first, top3) in sorted(per_cause.items()):
        print(f"  {cause:35s} {n:3d} {first:3d} {top3:3d}")
    if args.misses:
        for form, (cause, rank, top) in ranks.items():
            if rank > 1:
                print(f"  miss {form} [{cause}] rank {rank}, first {top}")


if __name__ == "__main__":
    main()
