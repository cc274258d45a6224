"""The `perfdoctor` command line. Bad input: one line on stderr naming file, key and problem; exit 2."""
import re
import sys
from pathlib import Path

import click

from perfdoctor.errors import InputError

FORMATS = click.Choice(["text", "json", "markdown"])
PROM_DURATION = re.compile(r"(\d+(ms|s|m|h|d|w|y))+")


def fail(exc: InputError):
    click.echo(f"perfdoctor: error: {' '.join(str(exc).split())}", err=True)
    sys.exit(2)


def _engine():
    from perfdoctor.engine.rank import Engine
    return Engine.load()


@click.group()
def cli():
    """Rank root causes of a GPU inference or training slowdown from observed evidence."""


def evidence_options(fn):
    """Options shared by `diagnose`, `probe` and `snapshot`: every evidence source besides a snapshot file."""
    options = [
        click.option("--artifact", "artifacts", multiple=True, metavar="[HOST:][KIND=]FILE",
                     help="tool output (nvidia-smi -q/-x/dmon/topo, nccl-tests, ib_write_bw, iostat, Kineto "
                          "trace, vLLM or SGLang server log, serving benchmark result, saved /metrics page); "
                          "kind detected from content; HOST prefixes entity names"),
        click.option("--baseline-artifact", "baseline_artifacts", multiple=True, metavar="[HOST:][KIND=]FILE",
                     help="the same kind of tool output from before the regression: its readings are the baseline"),
        click.option("--split-at", metavar="TIME", help="cut each vLLM or SGLang server log given with --artifact at "
                     "this time: status lines before it are the baseline, from it on the current state "
                     "(14:05, 05-19 14:05 or 2025-05-19 14:05:30)"),
        click.option("--prometheus", metavar="URL", help="read every signal from this Prometheus server"),
        click.option("--window", default="10m", show_default=True, help="Prometheus range for rates and quantiles"),
        click.option("--baseline-offset", default="1h", show_default=True, help="baseline = the same window this far back"),
        click.option("--selector", default="", help='label matchers added to every query, e.g. namespace="llm"'),
        click.option("--timeout", default=10.0, show_default=True, help="seconds per Prometheus request or scrape"),
        click.option("--ca-file", type=click.Path(dir_okay=False), help="CA bundle to verify the Prometheus TLS certificate"),
        click.option("--insecure", is_flag=True, help="do not verify TLS certificates (not recommended)"),
        click.option("--scrape", "scrapes", multiple=True, metavar="URL",
                     help="a /metrics endpoint to scrape twice (vLLM, SGLang, TGI, dcgm-exporter, node_exporter)"),
        click.option("--interval", default="15s", show_default=True, help="time between the two scrapes"),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _seconds(text, key):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", text.strip())
    if not m:
        raise InputError(key, text, "expected a duration such as 15s, 500ms or 1m")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, None: 1, "m": 60}[m.group(2)]


def _gather(engine, snapshot, artifacts, baseline_artifacts=(), split_at=None, prometheus=None, window="10m", baseline_offset="1h", selector="",
            timeout=10.0, ca_file=None, insecure=False, scrapes=(), interval="15s"):
    """Every evidence source merged into one snapshot; credentials come from PERFDOCTOR_PROM_* only."""
    from perfdoctor.symptoms.evidence import gather
    from perfdoctor.symptoms.snapshot import load_snapshot
    base = load_snapshot(snapshot, engine.kb) if snapshot else None
    live = []
    if prometheus:
        for name, value in (("--window", window), ("--baseline-offset", baseline_offset)):
            if not PROM_DURATION.fullmatch(value):
                raise InputError(name, value, "expected a Prometheus duration such as 10m, 1h or 1h30m")
        from perfdoctor.symptoms.prometheus import build_snapshot, credentials_from_env
        live.append(build_snapshot(engine.kb, prometheus, window, baseline_offset, selector, timeout,
                                   ca_file=ca_file, verify=not insecure, context=base.context if base else None,
                                   **credentials_from_env()))
    if scrapes:
        from perfdoctor.symptoms.scrape import scrape_snapshot
        live.append(scrape_snapshot(engine.kb, list(scrapes), _seconds(interval, "--interval"), timeout))
    from perfdoctor.symptoms.engine_log import split_time
    split = split_time(split_at) if split_at is not None else None
    return gather(engine.kb, base, artifacts, live, baseline_artifacts, split)


@cli.command()
@click.argument("snapshot", type=click.Path(dir_okay=False), required=False)
@evidence_options
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("--top", default=5, show_default=True, type=click.IntRange(1), help="hypotheses shown in text and markdown")
def diagnose(snapshot, fmt, top, **sources):
    """Diagnose SNAPSHOT (YAML or JSON) and/or live evidence: ranked causes, chains, evidence, remedies, probes.

    Prometheus credentials come from the environment only: PERFDOCTOR_PROM_TOKEN or
    PERFDOCTOR_PROM_TOKEN_FILE (bearer), or PERFDOCTOR_PROM_USER and PERFDOCTOR_PROM_PASSWORD (basic).
    """
    from perfdoctor import report
    try:
        engine = _engine()
        d = engine.diagnose(_gather(engine, snapshot, **sources))
    except InputError as exc:
        fail(exc)
    if fmt == "json":
        click.echo(report.to_json(d))
    elif fmt == "markdown":
        click.echo(report.to_markdown(d, engine.kb, show=top), nl=False)
    else:
        click.echo(report.to_text(d, show=top), nl=False)


@cli.command("snapshot")
@evidence_options
@click.option("--from", "snapshot", type=click.Path(dir_okay=False), help="start from this snapshot file")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write here instead of stdout")
def snapshot_cmd(snapshot, output, **sources):
    """Build a snapshot from the evidence sources, to attach to a ticket or diagnose later (no credentials)."""
    from perfdoctor.symptoms.snapshot import dump_snapshot
    try:
        engine = _engine()
        text = dump_snapshot(_gather(engine, snapshot, **sources))
    except InputError as exc:
        fail(exc)
    if output:
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            fail(InputError(output, "", f"cannot write: {exc.strerror}"))
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)


@cli.command()
@click.argument("snapshot", type=click.Path(dir_okay=False), required=False)
@evidence_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--count", default=5, show_default=True, type=click.IntRange(1))
def probe(snapshot, fmt, count, **sources):
    """What to measure next for SNAPSHOT, by expected information gain per minute."""
    import json

    from perfdoctor import report
    try:
        engine = _engine()
        d = engine.diagnose(_gather(engine, snapshot, **sources), top=0)
    except InputError as exc:
        fail(exc)
    probes = d.next_probes[:count]
    if fmt == "json":
        click.echo(json.dumps({"next_probes": [report.probe_dict(p) for p in probes], "warnings": d.warnings}, indent=2))
    else:
        for w in d.warnings:
            click.echo(f"warning: {w}")
        click.echo(report.probes_text(probes))


@cli.command()
@click.argument("snapshot", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def ceiling(snapshot, fmt):
    """Hardware ceilings for SNAPSHOT: decode, prefill, KV capacity, training step and all-reduce floors."""
    import json

    from perfdoctor import report
    from perfdoctor.engine.ceilings import compute_ceilings
    from perfdoctor.kb.loader import load_kb, require_valid
    from perfdoctor.symptoms.snapshot import load_snapshot
    try:
        snap = load_snapshot(snapshot, require_valid(load_kb()))
        ceilings, notes = compute_ceilings(snap.context, snap.current, base_dir=Path(snapshot).parent)
    except InputError as exc:
        fail(exc)
    if fmt == "json":
        click.echo(json.dumps({"ceilings": [report.ceiling_dict(c) for c in ceilings], "warnings": snap.warnings + notes},
                              indent=2))
        return
    for w in snap.warnings + notes:
        click.echo(f"note: {w}")
    click.echo(report.ceilings_text(ceilings))


@cli.command()
@click.argument("name", required=False)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def tech(name, fmt):
    """Technology-to-bottleneck map: all as a table, or NAME in detail."""
    import json

    from perfdoctor.kb.loader import load_kb, require_valid
    try:
        kb = require_valid(load_kb())
        if name and name not in kb.technologies:
            raise InputError("tech", name, f"unknown technology or action (known: {', '.join(sorted(kb.technologies))})")
    except InputError as exc:
        fail(exc)
    entries = [kb.technologies[name]] if name else sorted(kb.technologies.values(), key=lambda t: (t.kind, t.id))
    if fmt == "json":
        click.echo(json.dumps([t.model_dump(exclude_none=True) for t in entries], indent=2, ensure_ascii=False))
        return
    if name:
        t = entries[0]
        click.echo(f"{t.title} ({t.id}, {t.kind}, layer {t.layer})\n{t.description}\n")
        click.echo(f"relieves:       {', '.join(t.relieves)}")
        click.echo(f"can worsen:     {', '.join(t.can_worsen) or '-'}")
        click.echo("cannot fix:     " + "\n                ".join(t.cannot_fix))
        click.echo(f"counterexample: {t.counterexample}")
        click.echo(f"re-test:        {', '.join(t.retest)}")
        click.echo(f"used against:   {', '.join(sorted(rc.id for rc in kb.root_causes.values() if t.id in rc.remedies)) or '-'}")
        click.echo("sources:        " + "\n                ".join(t.sources))
        return
    rows = [("id", "kind", "layer", "relieves", "can worsen")] + \
           [(t.id, t.kind, t.layer, ",".join(t.relieves), ",".join(t.can_worsen) or "-") for t in entries]
    widths = [max(len(r[c]) for r in rows) for c in range(5)]
    for r in rows:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


@cli.command("eval")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--probes/--no-probes", default=True, show_default=True, help="also measure probes to diagnosis")
@click.option("--min-ac3", type=float, default=None,
              help="exit 1 when AC@3 on the library (the cases outside holdout/) is below this")
@click.option("--show-holdout-misses", is_flag=True,
              help="also list holdout misses (off by default: the holdout is for scoring, not for tuning)")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="worker processes to score cases in (default: one per CPU)")
@click.option("--before-fixes", is_flag=True,
              help="drop every case's A/B test outcomes (rollback, swapped part, raised cap, isolation...): "
                   "the evidence before anyone tried a fix")
def eval_cmd(folder, fmt, probes, min_ac3, show_holdout_misses, jobs, before_fixes):
    """Score the ranking on a labeled incident library FOLDER (cases/*.yaml, holdout/ scored apart)."""
    import json
    import os

    from perfdoctor.engine.evaluation import calibration, evaluate_library, per_root_cause, summary
    try:
        engine = _engine()
        report = evaluate_library(engine, Path(folder), probes=probes, jobs=jobs or os.cpu_count() or 1,
                                  before_fixes=before_fixes)
    except InputError as exc:
        fail(exc)
    whole, tuned, held = summary(report), summary(report, holdout=False), summary(report, holdout=True)
    misses = [r for r in report.results if r.rank > 1 and (show_holdout_misses or not r.holdout)]
    hidden = sum(r.rank > 1 and r.holdout for r in report.results) if not show_holdout_misses else 0
    if fmt == "json":
        click.echo(json.dumps({"all": whole, "library": tuned, "holdout": held, "per_root_cause": per_root_cause(report),
                               "calibration": {"library": calibration(report, holdout=False),
                                               "holdout": calibration(report, holdout=True)},
                               "misses": [{"id": r.id, "expected": r.expected, "rank": r.rank, "top": r.top,
                                           "top_probability": round(r.top_probability, 3)} for r in misses]}, indent=2))
    else:
        for name, s in (("all cases", whole), ("tuned part", tuned), ("holdout", held)):
            if s["cases"]:
                click.echo(f"{name}: {s['cases']} cases  AC@1 {s['ac_at_1']:.3f}  AC@3 {s['ac_at_3']:.3f}  "
                           f"Avg@5 {s['avg_at_5']:.3f}  Brier(top) {s['brier_top']:.3f}")
                if probes:
                    click.echo(f"  probes until the expected cause is first with P >= 0.7 (or none is left): "
                               f"perfdoctor median {s['probes_median']}, mean {s['probes_mean']}, solved "
                               f"{s['probes_solved']}; checklist median {s['checklist_median']}, mean "
                               f"{s['checklist_mean']}, solved {s['checklist_solved']}")
        for name, part in (("library", False), ("holdout", True)):
            bands = calibration(report, holdout=part)
            if bands:
                click.echo(f"calibration, {name} (top P band: cases, mean P, share right): " + "; ".join(
                    f"{b['band'][0]:.2f}-{b['band'][1]:.2f}: {b['cases']}, {b['mean_probability']:.2f}, {b['right']:.2f}"
                    for b in bands))
        click.echo("\nper root cause (cases, hits@1, hits@3):")
        for rc, row in per_root_cause(report).items():
            click.echo(f"  {rc:34s} {row['cases']:3d} {row['ac_at_1']:3d} {row['ac_at_3']:3d}")
        click.echo("\nmisses (expected rank > 1):")
        for r in misses:
            click.echo(f"  {r.id}: expected {r.expected} at rank {r.rank}; first {r.top} P={r.top_probability:.2f}")
        if hidden:
            click.echo(f"  and {hidden} holdout misses, not listed (--show-holdout-misses)")
    gated = tuned if tuned["cases"] else whole
    if min_ac3 is not None and gated["ac_at_3"] < min_ac3:
        click.echo(f"perfdoctor: AC@3 {gated['ac_at_3']:.3f} on the library is below the required {min_ac3}", err=True)
        sys.exit(1)


@cli.group()
def kb():
    """Check or draw the knowledge base."""


@kb.command("check")
def kb_check():
    """Validate every KB entry and the causal graph; exit 2 on any error."""
    from perfdoctor.kb.check import check_kb
    from perfdoctor.kb.loader import load_kb
    loaded = load_kb()
    issues = check_kb(loaded)
    for issue in issues:
        click.echo(f"{issue.severity}: {issue}")
    errors = sum(i.severity == "error" for i in issues)
    warnings = len(issues) - errors
    click.echo(f"{len(loaded.root_causes)} root causes, {len(loaded.mechanisms)} mechanisms, {len(loaded.findings)} findings, "
               f"{len(loaded.signals)} signals, {len(loaded.probes)} probes, {len(loaded.technologies)} technologies: "
               f"{errors} errors, {warnings} warnings")
    sys.exit(2 if errors else 0)


@kb.command("graph")
def kb_graph():
    """Print the causal graph (root causes -> mechanisms -> findings) as Graphviz DOT."""
    from perfdoctor.engine.graph import build_graph, to_dot
    from perfdoctor.kb.loader import load_kb
    click.echo(to_dot(build_graph(load_kb())), nl=False)


@cli.command()
@click.option("--port", default=8501, show_default=True, type=int, help="port to listen on")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to bind; the default keeps the app on this machine because it shows incident data "
                   "(host names, metrics, what changed). Bind 0.0.0.0 only on a trusted network.")
@click.option("--snapshot", type=click.Path(exists=True, dir_okay=False), help="snapshot preloaded into Diagnose")
def ui(port, host, snapshot):
    """Open the browser front end (Streamlit): diagnose by questions, live Prometheus ranking, the KB."""
    import os
    from pathlib import Path
    try:
        from streamlit.web import cli as stcli
    except ImportError:
        fail(InputError("ui", "streamlit", "not installed: pip install 'perfdoctor[ui]'"))
    import perfdoctor.ui
    app = Path(perfdoctor.ui.__file__).resolve().parent / "app.py"
    if snapshot:
        os.environ["PERFDOCTOR_SNAPSHOT"] = str(Path(snapshot).resolve())
    sys.argv = ["streamlit", "run", str(app), "--server.address", host, "--server.port", str(port),
                "--server.headless", "true", "--browser.gatherUsageStats", "false",
                "--server.fileWatcherType", "none", "--global.developmentMode", "false",
                "--client.toolbarMode", "minimal"]
    sys.exit(stcli.main())


def main():
    cli(prog_name="perfdoctor")


if __name__ == "__main__":
    main()
