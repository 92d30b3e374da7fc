"""`htc test`: run a config's embedded tests (spec.tests).

Exit codes: 0 every selected test passed, 1 a test failed or could not run, 2 the config
could not be read, has no tests, or none matches --filter.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from controller.cli.inputs import echo_diagnostics
from controller.cli.lint import EXIT_USAGE, load_located
from controller.cli.validate import _quiet_logs as quiet_logs
from controller.validation.testing import TEST_FORMATS, TestRunner, format_suite, select_tests

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
@click.option("--format", "fmt", type=click.Choice(TEST_FORMATS), default="text", show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=64),
    default=2,
    show_default=True,
    help="Tests run at the same time.",
)
@click.option("--haproxy", "haproxy_binary", help="haproxy binary for `haproxy -c`.")
@click.option(
    "--output", "-o", type=click.Path(path_type=Path, dir_okay=False), help="Write the result here."
)
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
    """
    quiet_logs()
    loaded = load_located(config_path)
    if loaded.config is None or loaded.diagnostics:
        echo_diagnostics(loaded.diagnostics)
        raise SystemExit(EXIT_USAGE)
    config = loaded.config
    names = select_tests(config.spec.tests, pattern)
    if not names:
        what = f"matching {pattern!r}" if pattern else "in spec.tests"
        click.echo(f"{config_path}: no tests {what}", err=True)
        raise SystemExit(EXIT_USAGE)
    runner = TestRunner(config, haproxy_binary=haproxy_binary, locate=loaded.locate)
    report = asyncio.run(runner.run(names, workers=workers))
    text = format_suite(report, fmt)
    if output is None:
        sys.stdout.write(text)
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            click.echo(f"{output}: cannot write: {exc.strerror or exc}", err=True)
            raise SystemExit(EXIT_USAGE) from None
        c = report.counts
        click.echo(f"{c['passed']}/{c['total']} passed; result in {output}", err=True)
    raise SystemExit(EXIT_PASSED if report.passed else EXIT_FAILED)
