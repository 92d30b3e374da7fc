"""`htc validate`."""

from __future__ import annotations

import click


@click.command(name="validate")
def command() -> None:
    """Not implemented yet."""
    raise click.ClickException("htc validate is not implemented yet")
