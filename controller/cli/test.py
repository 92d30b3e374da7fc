"""`htc test`."""

from __future__ import annotations

import click


@click.command(name="test")
def command() -> None:
    """Not implemented yet."""
    raise click.ClickException("htc test is not implemented yet")
