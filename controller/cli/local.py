"""`htc local DIR`: serve a directory of manifests through a real, supervised HAProxy."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import signal
import socket
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import click
import structlog

from controller.cli.progress import loaded_summary
from controller.deploy import HAProxyNotFound
from controller.local import LocalApp, LocalOptions
from controller.observability import configure


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
    "--secrets-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Credentials of httpSources[].secretRef: DIR/<secret>/<key>, as a mounted Secret.",
)
@click.option(
    "--log-format",
    type=click.Choice(["auto", "json", "console"]),
    default="auto",
    show_default=True,
    help="Logs go to stderr: console on a terminal, JSON lines otherwise.",
)
@click.option(
    "--log-level",
    default="warning",
    show_default=True,
    help="Lowest level logged (verdicts and deploys are the console's, not logged twice).",
)
def command(
    directory: Path,
    haproxy: str | None,
    listen: str | None,
    status_addr: str,
    work_dir: Path | None,
    status_file: Path | None,
    secrets_dir: Path | None,
    log_format: str,
    log_level: str,
) -> None:
    """Run HAProxy on the manifests in DIRECTORY and keep it in sync with every edit.

    Every change is rendered and validated; a valid result is deployed and reloaded (one
    summary line), an invalid one is reported in full while the last good configuration
    keeps serving. Ctrl-C stops everything, HAProxy included.
    """
    configure(fmt=log_format, level=log_level, stream=sys.stderr)  # type: ignore[arg-type]
    _console_owns_verdicts()
    status = None if status_addr == "off" else status_addr
    for option, addr in (("--listen", listen), ("--status-addr", status)):
        if addr is not None:
            check_free(option, addr)
    options = LocalOptions(
        directory=directory,
        haproxy=haproxy,
        listen=listen,
        status_addr=status,
        work_dir=work_dir.resolve() if work_dir is not None else None,
        status_file=status_file,
        secrets_dir=secrets_dir,
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
    lines.append(f"  {loaded_summary(app.store)}")
    urls = frontend_urls(app.deploy_dir / "haproxy.cfg") if app.board.ready else []
    if urls:
        lines.append(f"  frontend {', '.join(urls)}")
        host = first_host(app)
        header = f"-H 'Host: {host}' " if host else ""
        lines.append(
            f"  try: curl {'-k ' if urls[0].startswith('https') else ''}{header}{urls[0]}/"
        )
    else:
        lines.append("  no frontend is serving yet (nothing deployed, or no bind line)")
    if app.status_url:
        lines.append(f"  status {app.status_url}/status, metrics {app.status_url}/metrics")
    lines.append(f"  deployed files in {app.deploy_dir}; Ctrl-C stops everything")
    return "\n".join(lines)


def frontend_urls(config: Path) -> list[str]:
    """``http://127.0.0.1:8080`` per ``bind`` line of the deployed configuration."""
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    urls: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 2 or words[0] != "bind" or ":" not in words[1]:
            continue
        addr = words[1].split("@", 1)[-1]
        host, _, port = addr.rpartition(":")
        if host in ("", "*", "0.0.0.0", "::", "[::]"):
            host = "127.0.0.1"
        scheme = "https" if "ssl" in words[2:] else "http"
        url = f"{scheme}://{host}:{port}"
        if url not in urls:
            urls.append(url)
    return urls


def first_host(app: LocalApp) -> str | None:
    """A host name a watched Ingress routes and the deployed files name (an Ingress of
    another class is watched too, but not routed): what to put in the Host header."""
    deployed = _deployed_text(app.deploy_dir)
    store = app.store
    for name in store.names():
        for obj in store.collection(name).list():
            if not isinstance(obj, Mapping) or obj.get("kind") != "Ingress":
                continue
            for rule in (obj.get("spec") or {}).get("rules") or []:
                host = rule.get("host") if isinstance(rule, Mapping) else None
                if not isinstance(host, str) or not host or host.startswith("*"):
                    continue
                if host in deployed:
                    return host
    return None


def _deployed_text(deploy_dir: Path) -> str:
    parts: list[str] = []
    for path in sorted(deploy_dir.rglob("*")):
        if path.is_file() and path.suffix != ".pem":
            with contextlib.suppress(OSError):
                parts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


def check_free(option: str, addr: str) -> None:
    """Refuse an address that is malformed or already taken, naming the option that set it.

    HAProxy binds its frontends with SO_REUSEPORT, so a second ``htc local`` on the same
    ``--listen`` would not fail: the kernel would quietly split the connections between the
    two. A plain bind (without SO_REUSEPORT) fails on a port any listener holds.
    """
    host, sep, port_text = addr.rpartition(":")
    host = host.split("@", 1)[-1].strip("[]")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise CannotStart(f"{option} {addr}: not host:port with a port from 0 to 65535")
    if int(port_text) == 0:
        return  # any free port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    bind_host = host if host not in ("", "*") else ("::" if family == socket.AF_INET6 else "")
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bind_host, int(port_text)))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                why = (
                    "; HAProxy would share it silently (SO_REUSEPORT), so this one stops here"
                    if option == "--listen"
                    else ""
                )
                raise CannotStart(
                    f"{option} {addr}: the address is in use (another htc local or HAProxy?)" + why
                ) from None
            raise CannotStart(f"{option} {addr}: {exc.strerror or exc}") from None


def _console_owns_verdicts() -> None:
    """The console prints every verdict and deploy in full; the publisher's log line about
    the same event would print it a second time on the same terminal."""
    config = structlog.get_config()
    processors = list(config["processors"])
    if _drop_published not in processors:
        structlog.configure(processors=[_drop_published, *processors])


def _drop_published(
    _logger: Any, _name: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    if event.get("component") == "controller.publish" and "kind" in event:
        raise structlog.DropEvent
    return event
