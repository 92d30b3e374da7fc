"""`htc lint`: static checks of a config, with no resources and no haproxy binary needed.

Exit codes follow the table in ``controller.cli.output``: 0 no errors (warnings and infos
allowed; with --strict, no warnings either), 1 lint errors found, 2 the file could not be
read, is not a valid HAProxyTemplateConfig, or the command was misused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from controller.cli.inputs import echo_diagnostics
from controller.cli.options import format_option, output_option, severity_option, strict_option
from controller.cli.output import EXIT_USAGE, write_output
from controller.diagnostics import Diagnostic, Location, Phase, make
from controller.render import disk_cache
from controller.spec import (
    KIND,
    HAProxyTemplateConfig,
    PathKey,
    not_exactly_one,
    parse_config,
    read_documents,
)
from controller.validation import (
    FORMATS,
    InvalidOptionError,
    Locator,
    ValidationOptions,
    ValidationReport,
    format_report,
    lint_report,
    lint_spec,
    sarif_log,
    spec_failure_report,
    spec_locator,
)

EXIT_CLEAN = 0
EXIT_FINDINGS = 1


@dataclass
class Loaded:
    """A config file read with its YAML line index, so findings point at spec lines."""

    config: HAProxyTemplateConfig | None
    diagnostics: list[Diagnostic]
    locate: Locator | None
    unreadable: bool = False
    """True when not even the YAML could be read (exit 2)."""
    source: str | None = None
    """The file's text, so findings in templates can point at their YAML lines."""


def load_located(path: Path) -> Loaded:
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        diag = make("E8002", Phase.SPEC, f"cannot read: {reason}", location=Location(file=file))
        return Loaded(None, [diag], None, unreadable=True)
    docs, problems = read_documents(text, file)
    if problems:
        return Loaded(None, problems, None, unreadable=True, source=text)
    wrong = not_exactly_one(file, docs)
    if wrong is not None:
        return Loaded(None, [wrong], None, source=text)
    ours: list[tuple[Mapping[str, object], Mapping[PathKey, int]]] = [
        (d, lines) for d, lines in docs if isinstance(d, Mapping) and d.get("kind") == KIND
    ]
    doc, lines = ours[0]
    config, diags = parse_config(doc, file=file, lines=lines)
    return Loaded(config, diags, spec_locator(file, lines), source=text)


@click.command(name="lint")
@click.argument("config_path", metavar="CONFIG.yaml", type=click.Path(path_type=Path))
@format_option(FORMATS)
@output_option()
@strict_option
@severity_option
def command(
    config_path: Path, fmt: str, output: Path | None, strict: bool | None, severity: str | None
) -> None:
    """Check CONFIG.yaml without resources: templates, snippets, render cycles, CEL rules,
    `when` conditions, policy-denied directives, embedded tests.

    \b
    htc lint CONFIG.yaml [--format text|json|sarif|junit] [--strict] [--severity info]

    Infos (advice with nothing to fix) show with --severity info.

    Compiled templates and CEL rules are kept between runs as for `htc validate`
    (HTC_TEMPLATE_CACHE).
    """
    loaded = load_located(config_path)
    if loaded.unreadable:
        echo_diagnostics(loaded.diagnostics)
        raise SystemExit(EXIT_USAGE)
    if loaded.config is None or loaded.diagnostics:
        write_output(format_report(spec_failure_report(loaded.diagnostics), fmt), output)
        raise SystemExit(EXIT_USAGE)  # not a valid config: nothing could be linted
    spec = loaded.config.spec
    try:
        options = ValidationOptions.from_settings(spec.validation).replace(
            strict=strict, severity_level=severity or _lint_default(spec.validation.severity_level)
        )
    except InvalidOptionError as exc:
        raise click.UsageError(str(exc)) from None
    with disk_cache():  # compiled templates kept between runs, as htc validate keeps them
        found = lint_spec(spec, locate=loaded.locate, source=loaded.source)
    report = lint_report(found, options)
    text = _sarif(report, str(config_path)) if fmt == "sarif" else format_report(report, fmt)
    write_output(text, output)
    raise SystemExit(EXIT_CLEAN if report.valid else EXIT_FINDINGS)


def _lint_default(level: str) -> str:
    """Lint's infos are advice with nothing to fix (I8052 "deferred rules do not fail fast"):
    a config is lint-clean when it has no warnings, so infos show on request
    (``--severity info``) rather than on every run."""
    return "warning" if level == "info" else level


def _sarif(report: ValidationReport, config_file: str) -> str:
    """SARIF whose results point at the config file, the file a repository holds.

    The report format puts the template first (it is written for rendered candidates, whose
    files exist nowhere); lint findings carry the config file's line, so that becomes the
    primary location, as a plain relative URI a code-scanning UI resolves in the checkout,
    and the template the related one.
    """
    log = sarif_log(report)
    for result, d in zip(log["runs"][0]["results"], report.diagnostics, strict=True):
        loc = d.location
        if loc is None or loc.file != config_file:
            continue
        physical: dict[str, Any] = {"artifactLocation": {"uri": quote(loc.file, safe="/@-._~")}}
        if loc.line:
            physical["region"] = {"startLine": loc.line}
        related = [x for x in result.get("locations", []) if _is_template(x)]
        for i, x in enumerate(related, start=1):
            x["id"] = i
            x["message"] = {"text": "template"}
        result["locations"] = [{"physicalLocation": physical}]
        if related:
            result["relatedLocations"] = related
        else:
            result.pop("relatedLocations", None)
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _is_template(location: dict[str, Any]) -> bool:
    artifact = location.get("physicalLocation", {}).get("artifactLocation", {})
    return bool(artifact.get("uriBaseId") == "TEMPLATES")
