"""The run's directory is removed, and its uid freed, after the verdict rather than before it.

Removing a 10,000-Ingress candidate's 3 MB took 5-17 ms of wall time on a busy disk, on the
verdict's critical path. Once the program and its leftovers are dead, the removal goes to the
event loop's default executor; ``asyncio.run`` waits for that executor before it returns,
so a command still leaves nothing behind. A cancelled or failed run still cleans up at once.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from controller.render import FileEntry, FileKind, FileSet
from controller.validation.sandbox import SandboxPolicy, isolation_for, run_sandboxed
from controller.validation.sandbox.uids import uids

TOOLS = SandboxPolicy(exec_system=True)
FILES = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, b"x" * (1 << 20))])


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _dirs(where: Path) -> list[str]:
    return [p.name for p in where.iterdir() if p.name.startswith("htc-sandbox-")]


async def test_the_verdict_does_not_wait_for_the_removal(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolation_for(TOOLS)  # the probe's own trial runs first, unwatched
    returned = threading.Event()
    seen: list[bool] = []
    real = shutil.rmtree

    def slow_rmtree(path: str, ignore_errors: bool = False) -> None:
        seen.append(returned.wait(10))  # the result is out before the directory goes
        real(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(shutil, "rmtree", slow_rmtree)  # the module run.py calls
    result = await run_sandboxed(["/bin/sh", "-c", "echo ok"], FILES, timeout=5, policy=TOOLS)
    returned.set()
    assert result.returncode == 0 and result.stdout == "ok\n"
    for _ in range(200):  # bounded: 10 s
        if seen and not _dirs(scratch) and not uids._used:
            break
        await asyncio.sleep(0.05)
    assert seen == [True]
    assert _dirs(scratch) == [] and not uids._used


def test_a_command_leaves_no_directory_behind(scratch: Path) -> None:
    result = asyncio.run(
        run_sandboxed(["/bin/sh", "-c", "cat haproxy.cfg | wc -c"], FILES, timeout=5, policy=TOOLS)
    )
    assert result.stdout.strip() == str(1 << 20)
    assert _dirs(scratch) == [] and not uids._used  # asyncio.run waited for the removal


async def test_a_cancelled_run_cleans_up_before_it_returns(scratch: Path) -> None:
    task = asyncio.ensure_future(
        run_sandboxed(["/bin/sh", "-c", "sleep 30"], FILES, timeout=60, policy=TOOLS)
    )
    for _ in range(200):  # bounded: until the program runs
        if _dirs(scratch):
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 5
    assert _dirs(scratch) == [] and not uids._used
