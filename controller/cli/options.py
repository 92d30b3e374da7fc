"""Options that several commands declare, so that their spelling and help never drift."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

__all__ = [
    "format_option",
    "haproxy_option",
    "output_option",
    "resources_option",
    "severity_option",
    "strict_option",
]

_Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def format_option(choices: Sequence[str]) -> _Decorator:
    return click.option(
        "--format", "fmt", type=click.Choice(choices), default="text", show_default=True
    )


def output_option(noun: str = "report") -> _Decorator:
    return click.option(
        "--output",
        "-o",
        type=click.Path(path_type=Path, dir_okay=False),
        help=f"Write the {noun} here.",
    )


resources_option = click.option(
    "--resources",
    "-r",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Manifest file or directory (repeatable; further paths after CONFIG count too).",
)

haproxy_option = click.option(
    "--haproxy", "haproxy_binary", help="haproxy binary for `haproxy -c`."
)

strict_option = click.option("--strict/--no-strict", default=None, help="Treat warnings as errors.")

severity_option = click.option(
    "--severity",
    type=click.Choice(["error", "warning", "info"]),
    help="Lowest severity shown (default from spec.validation.severityLevel).",
)
