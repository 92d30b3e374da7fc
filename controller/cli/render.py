"""`htc render`."""

from __future__ import annotations

import click


@click.command(name="render")
def command() -> None:
    """Not implemented yet."""
    raise click.ClickException("htc render is not implemented yet")
