"""`htc test`: run a config's embedded tests (spec.tests).

The config is linted first, exactly as the controller lints a new HAProxyTemplateConfig: a
config the controller would refuse must not get a green suite, however its tests would fare.

Exit codes (the table in ``controller.cli.output``): 0 every selected test passed, 1 a test
failed or could not run, or lint found errors (the result then holds a failing ``lint``
entry), 2 the file could not be read or is not a valid HAProxyTemplateConfig (a failing
``lint`` entry is still written), has no tests, or none matches --filter. With ``-o FILE`` a result is
written in every case that judged the file, so CI never reads an old or missing file as a
pass.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from controller.cli.inputs import echo_diagnostics
from controller.cli.lint import load_located
from controller.cli.options import format_option, haproxy_option, output_option
from controller.cli.output import EXIT_USAGE, quiet_logs, write_output
from controller.diagnostics import Severity
from controller.render import disk_cache
from controller.validation import (
    TEST_FORMATS,
    SuiteReport,
    TestRunner,
    ValidationReport,
    format_suite,
    lint_report,
    lint_spec,
    select_tests,
    spec_failure_report,
)

EXIT_PASSED = 0
EXIT_FAILED = 1


@click.command(name="test")
@click.argument("config_path", metavar="CONFIG.yaml", type=click.Path(path_type=Path))
@click.option(
    "--filter",
    "pattern",
    metavar="NAME",
    help="Run only tests whose name contains NAME (or matches it, with * ? [ ]).",
)
@format_option(TEST_FORMATS)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=64),
    default=2,
    show_default=True,
    help="Tests run at the same time.",
)
@haproxy_option
@output_option("result")
def command(
    config_path: Path,
    pattern: str | None,
    fmt: str,
    workers: int,
    haproxy_binary: str | None,
    output: Path | None,
) -> None:
    """Run the embedded tests of CONFIG.yaml.

    \b
    htc test CONFIG.yaml [--filter NAME] [--format text|json|junit] [--workers N]

    Compiled templates and CEL rules are kept between runs as for `htc validate`
    (HTC_TEMPLATE_CACHE).
    """
    quiet_logs()
    loaded = load_located(config_path)
    if loaded.unreadable:
        echo_diagnostics(loaded.diagnostics)
        if output is not None:
            _emit(_refused(str(config_path), spec_failure_report(loaded.diagnostics)), fmt, output)
        raise SystemExit(EXIT_USAGE)
    if loaded.config is None or loaded.diagnostics:
        _emit(_refused(str(config_path), spec_failure_report(loaded.diagnostics)), fmt, output)
        raise SystemExit(EXIT_USAGE)  # not a config at all: nothing could be judged
    config = loaded.config
    with disk_cache():  # compiled templates kept between runs, as htc validate keeps them
        lint = lint_spec(config.spec, locate=loaded.locate, source=loaded.source)
        if lint.errors:
            _emit(_refused(config.metadata.name, lint_report(lint)), fmt, output)
            raise SystemExit(EXIT_FAILED)
        echo_diagnostics(d for d in lint.diagnostics if d.severity is Severity.WARNING)
        names = select_tests(config.spec.tests, pattern)
        if not names:
            what = f"matching {pattern!r}" if pattern else "in spec.tests"
            click.echo(f"{config_path}: no tests {what}", err=True)
            raise SystemExit(EXIT_USAGE)
        runner = TestRunner(config, haproxy_binary=haproxy_binary, locate=loaded.locate)
    report = asyncio.run(runner.run(names, workers=workers))
    _emit(report, fmt, output)
    raise SystemExit(EXIT_PASSED if report.passed else EXIT_FAILED)


def _refused(config: str, lint: ValidationReport) -> SuiteReport:
    return SuiteReport(config=config, passed=False, lint=lint, counts=_NO_TESTS)


_NO_TESTS = {"passed": 0, "failed": 0, "error": 0, "total": 0}


def _emit(report: SuiteReport, fmt: str, output: Path | None) -> None:
    if not write_output(format_suite(report, fmt), output, noun="the result"):
        return
    if report.lint is not None and not report.lint.valid:
        click.echo(f"lint failed, no test ran; result in {output}", err=True)
        return
    c = report.counts
    click.echo(f"{c['passed']}/{c['total']} passed; result in {output}", err=True)
