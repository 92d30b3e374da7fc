"""`htc local DIR`: serve a directory of manifests through a real, supervised HAProxy."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import click

from controller.deploy.binary import HAProxyNotFound
from controller.local.app import LocalApp, LocalOptions
from controller.observability.logging import configure


class CannotStart(click.ClickException):
    """Exit status 2: the input (binary, address) or the environment (a taken port) does not
    let ``htc local`` start at all, as opposed to 1 for a failure while it ran."""

    exit_code = 2


@click.command(name="local")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--haproxy", "haproxy", metavar="BIN", help="haproxy binary to run and validate with."
)
@click.option(
    "--listen",
    metavar="ADDR",
    help="Frontend address (sets extraContext.listen), e.g. 127.0.0.1:8080.",
)
@click.option(
    "--status-addr",
    metavar="ADDR",
    default="127.0.0.1:9180",
    show_default=True,
    help="Address of /metrics, /healthz, /readyz and /status; 'off' disables it.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the deployed files and the master socket go (default: a temporary directory).",
)
@click.option(
    "--status-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the /status document to this file after every event.",
)
@click.option(
    "--log-format",
    type=click.Choice(["auto", "json", "console"]),
    default="auto",
    show_default=True,
    help="Logs go to stderr: console on a terminal, JSON lines otherwise.",
)
@click.option("--log-level", default="warning", show_default=True, help="Lowest level logged.")
def command(
    directory: Path,
    haproxy: str | None,
    listen: str | None,
    status_addr: str,
    work_dir: Path | None,
    status_file: Path | None,
    log_format: str,
    log_level: str,
) -> None:
    """Run HAProxy on the manifests in DIRECTORY and keep it in sync with every edit.

    Every change is rendered and validated; a valid result is deployed and reloaded (one
    summary line), an invalid one is reported in full while the last good configuration
    keeps serving. Ctrl-C stops everything, HAProxy included.
    """
    configure(fmt=log_format, level=log_level, stream=sys.stderr)  # type: ignore[arg-type]
    options = LocalOptions(
        directory=directory,
        haproxy=haproxy,
        listen=listen,
        status_addr=None if status_addr == "off" else status_addr,
        work_dir=work_dir,
        status_file=status_file,
    )
    try:
        app = LocalApp(options)
    except (HAProxyNotFound, ValueError) as exc:  # an unusable binary; a malformed address
        raise CannotStart(str(exc)) from None
    try:
        asyncio.run(serve(app))
    except OSError as exc:  # the status address is taken, the work directory not writable
        raise CannotStart(f"cannot start: {exc}") from None


async def serve(app: LocalApp) -> None:
    """Run ``app`` until SIGINT or SIGTERM; HAProxy is stopped on every way out."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, app.request_stop)
    try:
        await app.start()
        click.echo(banner(app))
        await app.wait_stopped()
    finally:
        await app.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    click.echo("stopped")


def banner(app: LocalApp) -> str:
    lines = [f"htc local: watching {app.options.directory} (haproxy {app.binary})"]
    if app.status_url:
        lines.append(f"  status {app.status_url}/status, metrics {app.status_url}/metrics")
    lines.append(f"  deployed files in {app.deploy_dir}; Ctrl-C stops everything")
    return "\n".join(lines)
