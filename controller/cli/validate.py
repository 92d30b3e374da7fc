"""`htc validate`: the pipeline's verdict on a config + resources, or on a hand-written file set.

Exit codes are the contract for CI: 0 valid (warnings allowed), 1 invalid or analysis
incomplete, 2 the command could not judge anything (usage error, unreadable or invalid input,
no usable haproxy binary).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import click

from controller.cli.inputs import (
    InputError,
    Inputs,
    echo_diagnostics,
    http_option,
    load_inputs,
    load_raw,
)
from controller.cli.options import (
    format_option,
    haproxy_option,
    output_option,
    resources_option,
    severity_option,
    strict_option,
)
from controller.cli.output import EXIT_USAGE, finish, quiet_logs, write_output
from controller.cli.progress import loaded_summary, step
from controller.cli.settings import load_settings
from controller.diagnostics import Diagnostic
from controller.render import RenderResult, disk_cache
from controller.spec import HAProxyTemplateConfigSpec, Locate, ValidationSettings
from controller.validation import (
    FORMATS,
    Counts,
    InvalidOptionError,
    Pipeline,
    PipelineSetupError,
    ReportMetadata,
    ReportStatus,
    ValidationOptions,
    ValidationReport,
    config_origin,
    default_engine,
    evaluate,
    format_report,
    paused_gc,
    with_origins,
)

EXIT_VALID = 0
EXIT_INVALID = 1


def _fail_inputs(diagnostics: Sequence[Diagnostic], fmt: str, output: Path | None) -> NoReturn:
    """Exit 2 with the reasons on stderr; with a machine format also as a report, because a
    CI job that parses stdout (or --output) must see *why* nothing was judged."""
    echo_diagnostics(diagnostics)
    if fmt != "text":
        _emit(input_error_report(diagnostics), fmt, output, None)
    raise SystemExit(EXIT_USAGE)


def input_error_report(diagnostics: Sequence[Diagnostic]) -> ValidationReport:
    """The report for inputs that could not be judged: status error, no stage ran."""
    shown = sorted(diagnostics, key=lambda d: d.sort_key())
    return ValidationReport(
        valid=False,
        status=ReportStatus.ERROR,
        diagnostics=shown,
        metadata=ReportMetadata(counts=Counts.of(shown)),
    )


@click.command(name="validate")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@resources_option
@click.option(
    "--raw",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Validate a hand-written haproxy.cfg instead of rendering a config.",
)
@click.option(
    "--aux",
    type=click.Path(path_type=Path, file_okay=False),
    help="With --raw: directory whose files all join the file set at their relative paths "
    "(kind from maps/, certs/, files/ or the extension).",
)
@click.option(
    "--settings",
    "settings_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="With --raw: YAML file with a `validation:` block (as in spec.validation).",
)
@click.option(
    "--allow",
    multiple=True,
    metavar="NAME",
    help="With --raw: allow a denied directive (repeatable; adds to policy.allowDirectives).",
)
@http_option
@haproxy_option
@format_option(FORMATS)
@output_option()
@strict_option
@severity_option
@click.option(
    "--disable-builtin-rules/--builtin-rules",
    "disable_builtin",
    default=None,
    help="Drop the built-in syntax and schema findings filters may drop; HAProxy, the policy, "
    "CEL rules and validators still judge (default from spec.validation.disableBuiltinRules).",
)
def command(
    paths: tuple[Path, ...],
    resources: tuple[Path, ...],
    raw: Path | None,
    aux: Path | None,
    settings_file: Path | None,
    allow: tuple[str, ...],
    http: tuple[str, ...],
    haproxy_binary: str | None,
    fmt: str,
    output: Path | None,
    strict: bool | None,
    severity: str | None,
    disable_builtin: bool | None,
) -> None:
    """Validate CONFIG.yaml rendered over --resources, or a --raw haproxy.cfg.

    \b
    htc validate CONFIG.yaml --resources DIR [--format json] [--strict]
    htc validate --raw haproxy.cfg [--aux DIR] [--settings FILE] [--allow NAME]

    Compiled templates and CEL rules are kept for the next run in ~/.cache/htc/templates, a
    folder only you can write (HTC_TEMPLATE_CACHE: another folder, or off; docs/cli.md).
    """
    quiet_logs()
    if raw is not None:
        if paths or resources or http:
            raise click.UsageError(
                "--raw validates a file set on its own; drop CONFIG/--resources/--http"
            )
        spec = None
        try:
            settings = _raw_settings(settings_file, allow)
            render = load_raw(raw, aux)
        except InputError as exc:
            _fail_inputs(exc.diagnostics, fmt, output)
    else:
        if not paths:
            raise click.UsageError("give CONFIG.yaml (or --raw haproxy.cfg)")
        for flag, given in (("--aux", aux), ("--settings", settings_file), ("--allow", allow)):
            if given:
                raise click.UsageError(
                    f"{flag} only goes with --raw (a config carries spec.validation)"
                )
        config_path, *extra = paths
        try:
            with step("loading manifests"), paused_gc():
                inputs = load_inputs(config_path, [*resources, *extra], http)
                # What was loaded lives until the command exits and holds no cycles to free:
                # kept out of the collector's sight, so that the collections the render and
                # the stages trigger do not walk every stored object again (6,000 objects:
                # some 160,000 containers). Frozen before the pause ends, since the first
                # allocation after it would otherwise collect them all at once (and promote
                # them to be collected again): 9 collections, about 30 ms.
                gc.freeze()
        except InputError as exc:
            _fail_inputs(exc.diagnostics, fmt, output)
        echo_diagnostics(inputs.diagnostics)
        click.echo(_loaded(inputs, bool(resources or extra)), err=True)
        spec = inputs.config.spec
        settings = spec.validation
    options = _options(settings, strict, severity, disable_builtin)
    if spec is None:
        try:
            pipeline = Pipeline.from_settings(settings, haproxy_binary=haproxy_binary)
        except PipelineSetupError as exc:
            _fail_inputs(exc.diagnostics, fmt, output)
        with step("validating"):
            report = asyncio.run(pipeline.validate(render, options=options))
        _emit(report, fmt, output, render)
        finish(EXIT_VALID if report.valid else EXIT_INVALID)
    # The controller's own engine, as reconcile builds it (without the warm-up a long-running
    # process pays once: this command judges one candidate). Its templates compile once per
    # source and user: later runs load the code (controller.render.codecache). It lives until
    # the command exits, too: built with the collector paused, and frozen like the inputs.
    try:
        with disk_cache(), paused_gc():
            engine = default_engine(haproxy_binary, locate=inputs.locate, warm=False)(spec)
            gc.freeze()
    except PipelineSetupError as exc:
        _fail_inputs(exc.diagnostics, fmt, output)
    with step("rendering and validating"):
        judged, verdict = asyncio.run(
            evaluate(engine, inputs.store.snapshot(), inputs.http, options=options)
        )
    report = with_config_lines(verdict.report, spec, inputs.locate, config_path)
    _emit(report, fmt, output, judged)
    finish(EXIT_VALID if report.valid else EXIT_INVALID)


def _options(
    settings: ValidationSettings,
    strict: bool | None,
    severity: str | None,
    disable_builtin: bool | None,
) -> ValidationOptions:
    """The spec's (or --settings') options with the command line's on top."""
    try:
        return ValidationOptions.from_settings(settings).replace(
            strict=strict, severity_level=severity, disable_builtin_rules=disable_builtin
        )
    except InvalidOptionError as exc:
        raise click.UsageError(str(exc)) from None


def _loaded(inputs: Inputs, given: bool) -> str:
    """What was loaded, per kind; with nothing loaded, why that may be."""
    text = loaded_summary(inputs.store, inputs.files if given else None)
    unwatched = sum(1 for d in inputs.diagnostics if d.rule_id == "I8014")
    if unwatched > 0:
        text += f"; {unwatched} not watched"
    if not given:
        text += " (no --resources given: every watched collection is empty)"
    return text


def with_config_lines(
    report: ValidationReport,
    spec: HAProxyTemplateConfigSpec,
    locate: Locate | None,
    config_path: Path,
) -> ValidationReport:
    """The report with every template location completed by the config file's line."""
    if locate is None:
        return report
    try:
        lines: list[str] | None = config_path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError):
        lines = None
    origin = config_origin(spec, locate, lines)
    return report.model_copy(update={"diagnostics": with_origins(report.diagnostics, origin)})


def _raw_settings(path: Path | None, allow: Sequence[str]) -> ValidationSettings:
    settings = load_settings(path) if path is not None else ValidationSettings()
    if not allow:
        return settings
    names = [*settings.policy.allow_directives, *(a for a in allow if a)]
    policy = settings.policy.model_copy(update={"allow_directives": list(dict.fromkeys(names))})
    return settings.model_copy(update={"policy": policy})


def _emit(
    report: ValidationReport, fmt: str, output: Path | None, render: RenderResult | None
) -> None:
    if not write_output(format_report(report, fmt, render=render), output):
        return
    c = report.metadata.counts
    verdict = "valid" if report.valid else f"invalid ({report.status.value})"
    click.echo(
        f"{verdict}: {c.error + c.fatal} errors, {c.warning} warnings; report in {output}",
        err=True,
    )
