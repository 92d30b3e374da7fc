"""`htc render`: render a config over manifests into a directory laid out like the deploy dir.

Exit codes: 0 the render is complete and written (warnings are printed); 1 the render failed
or produced no haproxy.cfg, and nothing was written (each finding printed as
``template:line: ruleId severity message``); 2 the inputs or the target directory could not
be used (unreadable YAML, invalid config, bad manifest, missing --http content — printed as
``file:line: ...``).

``--out`` is replaced as a whole (see :mod:`controller.cli.outdir`): after a success it holds
exactly this render's files, after a failure it is untouched. A directory that mixes files
of two renders, or keeps the file of an output that no longer exists, would be inspected or
deployed as if it were one candidate. Nothing here validates: that is ``htc validate``.
"""

from __future__ import annotations

from pathlib import Path

import click

from controller.cli.inputs import (
    InputError,
    echo_diagnostics,
    http_option,
    load_inputs,
    render_inputs,
)
from controller.cli.options import resources_option
from controller.cli.outdir import OutputDirError, replace_dir
from controller.cli.output import finish
from controller.diagnostics import Severity
from controller.render import MAIN_CONFIG, RenderResult, disk_cache

EXIT_OK = 0
EXIT_RENDER_FAILED = 1
EXIT_BAD_INPUT = 2


def _why_not_written(result: RenderResult) -> str | None:
    """Why this render must not be written, or None when it is complete."""
    not_rendered = sorted(
        n for n, s in result.outputs.items() if s.state not in ("rendered", "skipped")
    )
    if not result.ok or not_rendered:
        detail = f"; not rendered: {', '.join(not_rendered)}" if not_rendered else ""
        errors = sum(1 for d in result.diagnostics if d.severity.rank <= Severity.ERROR.rank)
        return f"render reported {errors or len(result.diagnostics)} problem(s){detail}"
    if MAIN_CONFIG not in result.files:
        main = result.outputs.get(MAIN_CONFIG)
        reason = f" ({main.reason})" if main is not None and main.reason else ""
        return f"{MAIN_CONFIG} was skipped{reason}, so there is no configuration to write"
    return None


@click.command(name="render")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@resources_option
@click.option(
    "--out",
    "-o",
    "out",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory to hold haproxy.cfg, maps/, files/ and certs/; replaced as a whole, "
    "and left untouched when the render fails.",
)
@http_option
def command(
    paths: tuple[Path, ...], resources: tuple[Path, ...], out: Path, http: tuple[str, ...]
) -> None:
    """Render CONFIG.yaml over --resources into --out.

    \b
    htc render CONFIG.yaml --resources PATH [PATH...] --out DIR [--http NAME=FILE]

    Compiled templates and CEL rules are kept between runs as for `htc validate`
    (HTC_TEMPLATE_CACHE).
    """
    config_path, *extra = paths
    try:
        inputs = load_inputs(config_path, [*resources, *extra], http)
    except InputError as exc:
        echo_diagnostics(exc.diagnostics)
        raise SystemExit(EXIT_BAD_INPUT) from None
    echo_diagnostics(inputs.diagnostics)
    with disk_cache():  # compiled templates kept between runs, as htc validate keeps them
        result = render_inputs(inputs)
    echo_diagnostics(result.diagnostics)
    why = _why_not_written(result)
    if why is not None:
        click.echo(f"{why}; nothing written to {out}", err=True)
        raise SystemExit(EXIT_RENDER_FAILED)
    try:
        written = replace_dir(result.files, out)
    except OutputDirError as exc:
        click.echo(f"{exc}; nothing written", err=True)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except OSError as exc:
        click.echo(f"{out}: cannot write: {exc.strerror or exc}; nothing written", err=True)
        raise SystemExit(EXIT_BAD_INPUT) from None
    for path in written:
        click.echo(str(path))
    click.echo(f"rendered {len(written)} file(s) into {out} in {result.render_ms:.0f} ms", err=True)
    finish(EXIT_OK)
