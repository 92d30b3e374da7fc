"""File sets for the fleet tests, validated by a real (stage-less) Pipeline.

Like tests/deploy, these tests are about deploying: they feed configurations that
``haproxy -c`` accepts but a reload may refuse (a port in use), still through the only
constructor of ``ValidatedFileSet``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

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
    bind {addr}:{port}
{extra}    http-request return status 200 content-type text/plain string "{body}"
"""


async def validated(files: FileSet) -> ValidatedFileSet:
    verdict = await Pipeline([], haproxy_version=None, cache=None, allow_partial=True).check(
        RenderResult(files)
    )
    assert verdict.validated is not None
    return verdict.validated


def config_set(
    addr: str,
    port: int,
    body: str,
    extra: str = "",
    aux: dict[str, tuple[FileKind, bytes]] | None = None,
) -> FileSet:
    text = CONFIG.format(addr=addr, port=port, body=body, extra=extra).encode()
    entries = [FileEntry("haproxy.cfg", FileKind.CONFIG, text)]
    for path, (kind, content) in (aux or {}).items():
        entries.append(FileEntry(path, kind, content))
    return FileSet.of(entries)


async def eventually(probe: Callable[[], str], expected: str, timeout: float = 10.0) -> str:
    """Poll ``probe`` (in a thread) until it returns ``expected`` or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        answer = await asyncio.to_thread(probe)
        if answer == expected or time.monotonic() >= deadline:
            return answer
        await asyncio.sleep(0.05)
