"""`htc render`: render a config over manifests into a directory laid out like the deploy dir.

Exit codes: 0 everything rendered without a finding; 1 the render reported something (each
finding printed as ``template:line: ruleId severity message``); 2 the inputs could not be
used (unreadable YAML, invalid config, bad manifest — printed as ``file:line: ...``).

Outputs that did render are written even when others failed, so the result can be inspected;
nothing else in the directory is touched. Nothing here validates: that is ``htc validate``.
"""

from __future__ import annotations

from pathlib import Path

import click

from controller.cli.inputs import InputError, echo_diagnostics, load_inputs, render_inputs
from controller.render import FileSet

EXIT_OK = 0
EXIT_RENDER_FAILED = 1
EXIT_BAD_INPUT = 2


def write_files(files: FileSet, out: Path) -> list[Path]:
    """Write every file under ``out`` at its deploy path; returns what was written."""
    written: list[Path] = []
    for entry in files:
        target = out / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(entry.content)
        tmp.replace(target)
        written.append(target)
    return written


@click.command(name="render")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--resources",
    "-r",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Manifest file or directory (repeatable; further paths after CONFIG count too).",
)
@click.option(
    "--out",
    "-o",
    "out",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory to write haproxy.cfg, maps/, files/ and certs/ into.",
)
def command(paths: tuple[Path, ...], resources: tuple[Path, ...], out: Path) -> None:
    """Render CONFIG.yaml over --resources into --out.

    \b
    htc render CONFIG.yaml --resources PATH [PATH...] --out DIR
    """
    config_path, *extra = paths
    try:
        inputs = load_inputs(config_path, [*resources, *extra])
    except InputError as exc:
        echo_diagnostics(exc.diagnostics)
        raise SystemExit(EXIT_BAD_INPUT) from None
    echo_diagnostics(inputs.diagnostics)
    result = render_inputs(inputs)
    try:
        written = write_files(result.files, out)
    except OSError as exc:
        click.echo(f"{out}: cannot write: {exc.strerror or exc}", err=True)
        raise SystemExit(EXIT_BAD_INPUT) from None
    for path in written:
        click.echo(str(path))
    not_rendered = sorted(
        n for n, s in result.outputs.items() if s.state not in ("rendered", "skipped")
    )
    if result.diagnostics:
        echo_diagnostics(result.diagnostics)
        detail = f"; not rendered: {', '.join(not_rendered)}" if not_rendered else ""
        click.echo(f"render reported {len(result.diagnostics)} problem(s){detail}", err=True)
        raise SystemExit(EXIT_RENDER_FAILED)
    click.echo(f"rendered {len(written)} file(s) into {out} in {result.render_ms:.0f} ms", err=True)
