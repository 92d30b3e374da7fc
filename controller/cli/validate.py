"""`htc validate`: the pipeline's verdict on a config + resources, or on a hand-written file set.

Exit codes are the contract for CI: 0 valid (warnings allowed), 1 invalid or analysis
incomplete, 2 the command could not judge anything (usage error, unreadable or invalid input,
no usable haproxy binary).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import click

from controller.cli.inputs import InputError, Inputs, echo_diagnostics, load_inputs, load_raw
from controller.diagnostics import Diagnostic
from controller.observability.logging import configure as configure_logging
from controller.render import RenderResult
from controller.spec.models import ValidationSettings
from controller.validation import (
    FORMATS,
    InvalidOptionError,
    Pipeline,
    PipelineSetupError,
    ValidationOptions,
    ValidationReport,
    format_report,
)

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


class _LiveStderr:
    """Whatever ``sys.stderr`` is at write time (test runners swap it per invocation)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def _quiet_logs() -> None:
    # stdout carries the report (JSON, SARIF, JUnit are parsed by machines): logs go to
    # stderr, and only when something is wrong.
    configure_logging(level="warning", stream=_LiveStderr())  # type: ignore[arg-type]


def _fail_inputs(diagnostics: Sequence[Diagnostic]) -> NoReturn:
    echo_diagnostics(diagnostics)
    raise SystemExit(EXIT_USAGE)


@click.command(name="validate")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--resources",
    "-r",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Manifest file or directory (repeatable; further paths after CONFIG count too).",
)
@click.option(
    "--raw",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Validate a hand-written haproxy.cfg instead of rendering a config.",
)
@click.option(
    "--aux",
    type=click.Path(path_type=Path, file_okay=False),
    help="With --raw: directory whose maps/, certs/ and files/ join the file set.",
)
@click.option("--haproxy", "haproxy_binary", help="haproxy binary for `haproxy -c`.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option(
    "--output", "-o", type=click.Path(path_type=Path, dir_okay=False), help="Write the report here."
)
@click.option("--strict/--no-strict", default=None, help="Treat warnings as errors.")
@click.option(
    "--severity",
    type=click.Choice(["error", "warning", "info"]),
    help="Lowest severity shown (default from spec.validation.severityLevel).",
)
def command(
    paths: tuple[Path, ...],
    resources: tuple[Path, ...],
    raw: Path | None,
    aux: Path | None,
    haproxy_binary: str | None,
    fmt: str,
    output: Path | None,
    strict: bool | None,
    severity: str | None,
) -> None:
    """Validate CONFIG.yaml rendered over --resources, or a --raw haproxy.cfg.

    \b
    htc validate CONFIG.yaml --resources DIR [--format json] [--strict]
    htc validate --raw haproxy.cfg [--aux DIR]
    """
    _quiet_logs()
    if raw is not None:
        if paths or resources:
            raise click.UsageError("--raw validates a file set on its own; drop CONFIG/--resources")
        settings = ValidationSettings()
        spec = None
        try:
            render = load_raw(raw, aux)
        except InputError as exc:
            _fail_inputs(exc.diagnostics)
    else:
        if not paths:
            raise click.UsageError("give CONFIG.yaml (or --raw haproxy.cfg)")
        if aux is not None:
            raise click.UsageError("--aux only goes with --raw")
        config_path, *extra = paths
        try:
            inputs = load_inputs(config_path, [*resources, *extra])
        except InputError as exc:
            _fail_inputs(exc.diagnostics)
        echo_diagnostics(inputs.diagnostics)
        spec = inputs.config.spec
        settings = spec.validation
        render = _render_with_rules(inputs)
    try:
        pipeline = (
            Pipeline.from_spec(spec, haproxy_binary=haproxy_binary)
            if spec is not None
            else Pipeline.from_settings(settings, haproxy_binary=haproxy_binary)
        )
        options = ValidationOptions.from_settings(settings).replace(
            strict=strict, severity_level=severity
        )
    except PipelineSetupError as exc:
        _fail_inputs(exc.diagnostics)
    except InvalidOptionError as exc:
        raise click.UsageError(str(exc)) from None
    report = asyncio.run(pipeline.validate(render, options=options))
    _emit(report, fmt, output, render)
    raise SystemExit(EXIT_VALID if report.valid else EXIT_INVALID)


def _render_with_rules(inputs: Inputs) -> RenderResult:
    """Render as reconcile does: inline rules on the loaded objects first, then on each
    output right after it renders (the pipeline runs the deferred ones)."""
    from controller.validation.rules import RuledRenderer

    return RuledRenderer.from_spec(inputs.config.spec).render(inputs.store.snapshot())


def _emit(report: ValidationReport, fmt: str, output: Path | None, render: RenderResult) -> None:
    text = format_report(report, fmt, render=render)
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        click.echo(f"{output}: cannot write the report: {exc.strerror or exc}", err=True)
        raise SystemExit(EXIT_USAGE) from None
    c = report.metadata.counts
    verdict = "valid" if report.valid else f"invalid ({report.status.value})"
    click.echo(
        f"{verdict}: {c.error + c.fatal} errors, {c.warning} warnings; report in {output}",
        err=True,
    )
