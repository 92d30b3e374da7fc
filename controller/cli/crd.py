"""`htc crd`."""

from __future__ import annotations

import click


@click.command(name="crd")
def command() -> None:
    """Not implemented yet."""
    raise click.ClickException("htc crd is not implemented yet")
