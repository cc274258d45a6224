"""`perfdoctor eval`: hit rates on a labeled incident library, and probes needed versus a fixed checklist."""
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import mean, median

from perfdoctor.engine.rank import Engine
from perfdoctor.errors import InputError
from perfdoctor.symptoms.snapshot import Snapshot, parse_snapshot
from perfdoctor.yamlio import load_file

CONFIDENT = 0.7
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass
class CaseResult:
    id: str
    path: str
    holdout: bool
    expected: str
    acceptable: set
    rank: int                      # 1-based rank of the best acceptable cause
    top: str
    top_probability: float
    probes: int | None             # probes perfdoctor took until diagnosis, or until none was left
    probes_solved: bool
    checklist_probes: int | None   # the same for the fixed checklist
    checklist_solved: bool


@dataclass
class Report:
    results: list[CaseResult] = field(default_factory=list)


def load_cases(folder: Path) -> list[tuple[Path, dict]]:
    """Every case file under `folder` (recursively), validated for the keys eval needs."""
    paths = sorted(Path(folder).rglob("*.yaml"))
    if not paths:
        raise InputError(str(folder), "", "no case files (*.yaml) found")
    cases = []
    for path in paths:
        case = load_file(path)
        if not isinstance(case, dict) or "snapshot" not in case or "expected" not in case:
            raise InputError(str(path), "", "a case needs 'expected' and 'snapshot'")
        expected = case["expected"]
        if not isinstance(expected, dict) or "root_cause" not in expected:
            raise InputError(str(path), "expected.root_cause", "missing")
        for key, value in (("expected.also_acceptable", expected.get("also_acceptable", [])),
                           ("initial", case.get("initial", []))):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InputError(str(path), key, "must be a list of names")
        cases.append((path, case))
    return cases


def without_test_outcomes(engine: Engine, snap: Snapshot) -> Snapshot:
    """`snap` without the outcomes of deliberate A/B tests (signals marked controlled_test: a rollback, a swapped
    part, a raised cap): the evidence an on-call engineer has before anyone has tried a fix."""
    tests = {sid for sid, s in engine.kb.signals.items() if s.controlled_test}
    keep = lambda part: {k: v for k, v in part.items() if k not in tests}
    return replace(snap, current=keep(snap.current), baseline=keep(snap.baseline))


def evaluate_library(engine: Engine, folder: Path, probes: bool = True, jobs: int = 1,
                     before_fixes: bool = False) -> Report:
    """Score every case; with jobs > 1 the cases are scored in that many worker processes (same results, in order).

    `before_fixes` scores each case without its A/B test outcomes (see without_test_outcomes).
    """
    checklist = load_file(engine.kb.root / "checklist.yaml")["order"]
    work = []
    for path, case in load_cases(folder):   # validate everything here, so a bad case fails before any work starts
        where = str(path)
        snap = parse_snapshot(case["snapshot"], engine.kb, where)
        if before_fixes:
            snap = without_test_outcomes(engine, snap)
        expected = case["expected"]["root_cause"]
        ok = {expected, *(case["expected"].get("also_acceptable") or [])}
        for cause in sorted(ok):
            if cause not in engine.kb.root_causes:
                key = "expected.root_cause" if cause == expected else "expected.also_acceptable"
                raise InputError(where, key, f"unknown root cause '{cause}'")
        holdout = "holdout" in path.relative_to(folder).parts
        work.append((case.get("id", path.stem), where, holdout, expected, ok, snap, case.get("initial") or []))
    args = [(w, probes, checklist) for w in work]
    if jobs > 1 and len(work) > 1:
        # Fresh (spawned) workers with one BLAS thread each: the matrices are small, so BLAS threads only add
        # contention (measured: 2 BLAS threads gave the same wall time as 1), while processes scale with cores.
        saved = {k: os.environ.get(k) for k in BLAS_THREAD_VARS}
        os.environ.update({k: "1" for k in BLAS_THREAD_VARS})
        try:
            with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                     initializer=_start_worker, initargs=(engine.kb.root,)) as pool:
                results = list(pool.map(_score_in_worker, args, chunksize=max(1, len(args) // (4 * jobs))))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    else:
        results = [_score_case(engine, *a) for a in args]
    return Report(results=results)


_worker_engine: Engine | None = None


def _start_worker(kb_root):
    global _worker_engine
    _worker_engine = Engine.load(kb_root)


def _score_in_worker(args) -> "CaseResult":
    return _score_case(_worker_engine, *args)


def _score_case(engine: Engine, item: tuple, probes: bool, checklist: list) -> CaseResult:
    case_id, where, holdout, expected, ok, snap, initial = item
    d = engine.diagnose(snap, with_probes=False)
    ids = [h.id for h in d.hypotheses]
    rank = min(ids.index(c) for c in ok if c in ids) + 1
    ours = probes_to_diagnosis(engine, snap, initial, ok, None) if probes else (None, False)
    theirs = probes_to_diagnosis(engine, snap, initial, ok, checklist) if probes else (None, False)
    return CaseResult(id=case_id, path=where, holdout=holdout, expected=expected, acceptable=ok, rank=rank,
                      top=ids[0], top_probability=d.hypotheses[0].probability, probes=ours[0],
                      probes_solved=ours[1], checklist_probes=theirs[0], checklist_solved=theirs[1])


def _reveal(full: Snapshot, signals: set, changes_known: bool) -> Snapshot:
    keep = lambda part: {s: v for s, v in part.items() if s in signals}
    return Snapshot(source=full.source, context=full.context, changes=full.changes if changes_known else None,
                    baseline=keep(full.baseline), current=keep(full.current))


def probes_to_diagnosis(engine: Engine, full: Snapshot, initial: list, ok: set, order: list | None) -> tuple[int, bool]:
    """Probes taken until an acceptable cause is first with P >= 0.7, revealing signals from the full snapshot.

    Notes
    -----
    1. Start from the `initial` signals only (current and baseline values), with `changes` hidden.
    2. Take perfdoctor's best next probe (or, with `order`, the next checklist probe not yet taken).
    3. Reveal every signal it fills that the full snapshot has; a probe whose signals the incident did not
       record still counts as a probe taken.
    4. Stop when an acceptable cause ranks first with probability >= 0.7 (solved), or when no probe is
       left (not solved); return the number of probes taken and whether it was solved.
    """
    known, asked = set(initial), set()
    changes_known = "changes" in initial
    for taken in range(len(engine.kb.probes) + 1):
        snap = _reveal(full, known, changes_known)
        d = engine.diagnose(snap, top=1, with_probes=order is None, asked=asked | known)
        if d.hypotheses and d.hypotheses[0].id in ok and d.hypotheses[0].probability >= CONFIDENT:
            return taken, True
        if order is None:
            nxt = next((p.id for p in d.next_probes), None)
        else:
            nxt = next((p for p in order if p not in asked), None)
        if nxt is None:
            return taken, False
        asked.add(nxt)
        fills = engine.kb.probes[nxt].fills
        known |= set(fills)
        changes_known = changes_known or "changes" in fills
    return taken, False


def summary(report: Report, holdout: bool | None = None) -> dict:
    rs = [r for r in report.results if holdout is None or r.holdout == holdout]
    if not rs:
        return {"cases": 0}
    n = len(rs)
    ac = lambda k: sum(r.rank <= k for r in rs) / n
    counted = [r for r in rs if r.probes is not None]
    out = {
        "cases": n, "ac_at_1": round(ac(1), 3), "ac_at_3": round(ac(3), 3),
        "avg_at_5": round(mean(ac(k) for k in range(1, 6)), 3),
        "brier_top": round(mean((r.top_probability - (r.top in r.acceptable)) ** 2 for r in rs), 4),
    }
    if counted:
        out.update({
            "probes_median": median(r.probes for r in counted), "probes_mean": round(mean(r.probes for r in counted), 2),
            "probes_solved": sum(r.probes_solved for r in counted),
            "checklist_median": median(r.checklist_probes for r in counted),
            "checklist_mean": round(mean(r.checklist_probes for r in counted), 2),
            "checklist_solved": sum(r.checklist_solved for r in counted),
        })
    return out


CALIBRATION_BANDS = (0.0, 0.3, 0.5, 0.7, 0.85, 1.0)


def calibration(report: Report, holdout: bool | None = None) -> list[dict]:
    """Reliability of the top probability: per band of it, the cases, their mean top P, and the share whose
    top cause is an acceptable one (a calibrated engine is right about as often as it says)."""
    rs = [r for r in report.results if holdout is None or r.holdout == holdout]
    bands = []
    for low, high in zip(CALIBRATION_BANDS, CALIBRATION_BANDS[1:]):
        inside = [r for r in rs if low <= r.top_probability < high or (high == 1.0 and r.top_probability == 1.0)]
        if inside:
            bands.append({"band": [low, high], "cases": len(inside),
                          "mean_probability": round(mean(r.top_probability for r in inside), 3),
                          "right": round(mean(r.top in r.acceptable for r in inside), 3)})
    return bands


def per_root_cause(report: Report) -> dict:
    table = {}
    for r in report.results:
        row = table.setdefault(r.expected, {"cases": 0, "ac_at_1": 0, "ac_at_3": 0})
        row["cases"] += 1
        row["ac_at_1"] += r.rank == 1
        row["ac_at_3"] += r.rank <= 3
    return dict(sorted(table.items()))
