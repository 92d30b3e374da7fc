"""The `htc` command line. One module per command; this module only assembles the group.

Commands are imported when they run, not when ``htc`` starts: ``htc validate`` should not
pay for the operator's imports (kopf, the Kubernetes client), nor ``htc run`` for Jinja.
"""

from __future__ import annotations

import gc
import importlib
from types import ModuleType
from typing import Any

import click

from controller import __version__
from controller.cli.output import is_own_process, own_process

__all__ = ["COMMANDS", "main"]

#: command name → module defining ``command``, in the order ``htc --help`` lists them.
COMMANDS: dict[str, str] = {
    "render": "controller.cli.render",
    "validate": "controller.cli.validate",
    "lint": "controller.cli.lint",
    "test": "controller.cli.test",
    "local": "controller.cli.local",
    "run": "controller.cli.run",
    "webhook-config": "controller.cli.webhook_config",
    "crd": "controller.cli.crd",
}


class _LazyGroup(click.Group):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The ``htc`` program's entry (its script calls the group; test runners call
        :meth:`main`): the process is the command's alone, so it may end without tearing the
        interpreter down (``controller.cli.output.finish``)."""
        own_process()
        return self.main(*args, **kwargs)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *(n for n in super().list_commands(ctx) if n not in COMMANDS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return super().get_command(ctx, cmd_name)
        command = _load(module).command
        assert isinstance(command, click.Command) and command.name == cmd_name
        return command


def _load(name: str) -> ModuleType:
    """A command's module. In the ``htc`` program its imports run with the collector off,
    and what they built (modules, classes, functions: never garbage) is then frozen out of
    its sight: otherwise some 120 collections walk the growing heap while ``htc validate``
    starts (about 25-50 ms CPU), and every later one walks it again. Not in a test runner's
    process, whose own objects must stay collectable."""
    if not is_own_process():
        return importlib.import_module(name)
    enabled = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module(name)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="htc")
def main() -> None:
    """haproxy-template-controller: templates in, validated HAProxy configurations out."""
