"""End-to-end helpers: the quickstart templates, loopback backends, a real HAProxy.

Each test gets a scratch copy of ``examples/quickstart/config.yaml`` (the product's own
templates) with resources written by the test, backends on free ports that answer with
their name, and a ``LocalApp`` running the binary under test. Nothing here is mocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from controller.deploy.supervisor import PARENT_DEATH_SIGNAL
from controller.local.app import LocalApp, LocalOptions
from controller.observability.metrics import Metrics

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart" / "config.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_options(
    site: Site, haproxy: str, work_dir: Path, out: io.StringIO, **overrides: Any
) -> LocalOptions:
    """``htc local`` options for a test: the site, a status server on a free port, and a
    directory watch tuned to notice an edit within tens of milliseconds."""
    settings: dict[str, Any] = {
        "status_addr": "127.0.0.1:0",
        "adapter_options": {"debounce_ms": 30, "step_ms": 10},
        **overrides,
    }
    return LocalOptions(
        directory=site.root, haproxy=haproxy, work_dir=work_dir, out=out, **settings
    )


@contextlib.asynccontextmanager
async def child(*argv: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """A real child process with piped output, killed on the way out if it still runs; it
    also dies with the test process, so an interrupted run leaves no HAProxy serving."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=PARENT_DEATH_SIGNAL,
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def read_until(
    proc: asyncio.subprocess.Process, marker: str, seconds: float, seen: list[str]
) -> list[str]:
    """Stdout lines appended to ``seen`` until one contains ``marker``; fails when the child
    exits first (with what it printed) or ``seconds`` pass."""
    assert proc.stdout is not None
    async with asyncio.timeout(seconds):
        while not any(marker in line for line in seen):
            line = (await proc.stdout.readline()).decode()
            assert line, "exited early:\n" + "".join(seen)
            seen.append(line)
    return seen


async def interrupt(proc: asyncio.subprocess.Process, seconds: float = 15) -> tuple[str, str]:
    """Ctrl-C, as a user stops it; the rest of stdout and stderr once it has exited."""
    proc.send_signal(signal.SIGINT)
    async with asyncio.timeout(seconds):
        out, err = await proc.communicate()
    return out.decode(), err.decode()


@dataclass
class Site:
    """A directory ``htc local`` watches, and helpers to edit it like a person would."""

    root: Path
    listen: int
    ports: dict[str, int]

    def write(self, name: str, *docs: dict[str, Any]) -> Path:
        path = self.root / "resources" / f"{name}.yaml"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        tmp.rename(path)  # editors save atomically too
        return path

    def remove(self, name: str) -> None:
        (self.root / "resources" / f"{name}.yaml").unlink()

    def service(self, name: str) -> None:
        """A Service ``name`` (port 80) with one ready loopback endpoint on its backend port."""
        self.write(
            f"svc-{name}",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            },
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{name}-1",
                    "namespace": "default",
                    "labels": {"kubernetes.io/service-name": name},
                },
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": self.ports[name]}],
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            },
        )

    def ingress(self, name: str, host: str, paths: dict[str, str], **spec: Any) -> None:
        """``paths``: "/path" (Prefix) or "=/path" (Exact) → Service name."""
        self.write(f"ing-{name}", ingress_doc(name, host, paths, **spec))

    def edit_config(self, edit: Callable[[dict[str, Any]], None]) -> None:
        path = self.root / "config.yaml"
        doc = yaml.safe_load(path.read_text())
        edit(doc)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
        tmp.rename(path)


def ingress_doc(name: str, host: str, paths: dict[str, str], **spec: Any) -> dict[str, Any]:
    rules = []
    for p, svc in paths.items():
        exact = p.startswith("=")
        rules.append(
            {
                "path": p.lstrip("="),
                "pathType": "Exact" if exact else "Prefix",
                "backend": {"service": {"name": svc, "port": {"number": 80}}},
            }
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "ingressClassName": "haproxy",
            "rules": [{"host": host, "http": {"paths": rules}}],
            **spec,
        },
    }


def get(port: int, host: str, path: str = "/") -> tuple[int, str]:
    """One HTTP request with a Host header; (0, reason) when nothing answers."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": host})
    try:
        with urllib.request.urlopen(req, timeout=3) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


@dataclass
class Running:
    app: LocalApp
    site: Site
    out: io.StringIO
    metrics: Metrics
    events: list[str] = field(default_factory=list)

    def get(self, host: str, path: str = "/") -> tuple[int, str]:
        return get(self.site.listen, host, path)

    async def aget(self, host: str, path: str = "/") -> tuple[int, str]:
        return await asyncio.to_thread(self.get, host, path)

    async def until(
        self, check: Callable[[], Awaitable[bool]], timeout: float = 10.0, what: str = ""
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await check():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}\n--- output ---\n{self.out.getvalue()}")

    async def serves(
        self, host: str, path: str, expected: tuple[int, str], timeout: float = 10.0
    ) -> None:
        async def ok() -> bool:
            got = await self.aget(host, path)
            return got[0] == expected[0] and got[1].startswith(expected[1])

        await self.until(ok, timeout, f"{host}{path} -> {expected}")

    async def printed(self, text: str, timeout: float = 10.0) -> None:
        async def ok() -> bool:
            return text in self.out.getvalue()

        await self.until(ok, timeout, repr(text))

    def reloads(self, result: str = "success") -> float:
        return self.metrics.sample("htc_reloads_total", {"target": "local", "result": result})
