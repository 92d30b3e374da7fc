"""`htc lint`."""

from __future__ import annotations

import click


@click.command(name="lint")
def command() -> None:
    """Not implemented yet."""
    raise click.ClickException("htc lint is not implemented yet")
