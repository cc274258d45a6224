"""The `perfdoctor` command line. Bad input: one line on stderr naming file, key and problem; exit 2."""
import sys

import click

from perfdoctor.errors import InputError

FORMATS = click.Choice(["text", "json", "markdown"])


def fail(exc: InputError):
    click.echo(f"perfdoctor: error: {exc}", err=True)
    sys.exit(2)


def _engine():
    from perfdoctor.engine.rank import Engine
    return Engine.load()


@click.group()
def cli():
    """Rank root causes of a GPU inference or training slowdown from observed evidence."""


@cli.command()
@click.argument("snapshot", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("--top", default=5, show_default=True, help="hypotheses shown in text and markdown")
def diagnose(snapshot, fmt, top):
    """Diagnose SNAPSHOT (YAML or JSON): ranked causes, chains, evidence, remedies, next probes."""
    from perfdoctor import report
    from perfdoctor.symptoms.snapshot import load_snapshot
    try:
        engine = _engine()
        d = engine.diagnose(load_snapshot(snapshot, engine.kb))
    except InputError as exc:
        fail(exc)
    if fmt == "json":
        click.echo(report.to_json(d))
    elif fmt == "markdown":
        click.echo(report.to_markdown(d, engine.kb, show=top), nl=False)
    else:
        click.echo(report.to_text(d, show=top), nl=False)


@cli.command()
@click.argument("snapshot", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--count", default=5, show_default=True)
def probe(snapshot, fmt, count):
    """What to measure next for SNAPSHOT, by expected information gain per minute."""
    import json

    from perfdoctor import report
    from perfdoctor.symptoms.snapshot import load_snapshot
    try:
        engine = _engine()
        d = engine.diagnose(load_snapshot(snapshot, engine.kb), top=0)
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


def main():
    cli(prog_name="perfdoctor")


if __name__ == "__main__":
    main()
