"""Helpers for deploy tests: real HAProxy processes, real sockets, validated file sets.

File sets are validated by a real :class:`Pipeline` with no stages. That keeps these tests
about deploying (they feed configurations that ``haproxy -c`` would accept but a reload
refuses, like a port in use) while still going through the only constructor of
``ValidatedFileSet``.
"""

from __future__ import annotations

import asyncio
import socket
import urllib.request

from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.validation import Pipeline, ValidatedFileSet

CONFIG = """\
global
    log stderr format raw local0
defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
frontend fe
    bind 127.0.0.1:{port}
{extra}    http-request return status 200 content-type text/plain string "{body}"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def validated(files: FileSet) -> ValidatedFileSet:
    verdict = await Pipeline([], haproxy_version=None, cache=None, allow_partial=True).check(
        RenderResult(files)
    )
    assert verdict.validated is not None
    return verdict.validated


def config_set(
    port: int, body: str, extra: str = "", maps: dict[str, str] | None = None
) -> FileSet:
    entries = [
        FileEntry(
            "haproxy.cfg",
            FileKind.CONFIG,
            CONFIG.format(port=port, body=body, extra=extra).encode(),
        )
    ]
    for name, text in (maps or {}).items():
        entries.append(FileEntry(f"maps/{name}", FileKind.MAP, text.encode()))
    return FileSet.of(entries)


def get(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=3) as resp:
            body: bytes = resp.read()
            return body.decode()
    except OSError as exc:
        return f"error: {exc}"


async def aget(port: int) -> str:
    return await asyncio.to_thread(get, port)


async def aget_eventually(port: int, expected: str, timeout: float = 5.0) -> str:
    """Poll until the port answers ``expected`` or ``timeout`` passes; return the last answer.

    For moments where HAProxy is legitimately between processes (a restarted master whose new
    worker is still binding): the answer must arrive, but not necessarily on the first try.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        answer = await aget(port)
        if answer == expected or loop.time() >= deadline:
            return answer
        await asyncio.sleep(0.05)
