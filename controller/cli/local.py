"""`htc local`."""

from __future__ import annotations

import click


@click.command(name="local")
def command() -> None:
    """Not implemented yet."""
    raise click.ClickException("htc local is not implemented yet")
