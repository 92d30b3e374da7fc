"""The `htc` command line. One module per command; this module only assembles the group."""

from __future__ import annotations

import click

from controller import __version__
from controller.cli import crd, lint, local, render, run, test, validate, webhook_config


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="htc")
def main() -> None:
    """haproxy-template-controller: templates in, validated HAProxy configurations out."""


for _module in (render, validate, lint, test, local, run, webhook_config, crd):
    main.add_command(_module.command)
