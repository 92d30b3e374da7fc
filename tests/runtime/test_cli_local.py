"""``htc local`` as a user runs it: a subprocess, real output, Ctrl-C, nothing left behind."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from e2e_helpers import Site, get

from controller.local.supervisor import PARENT_DEATH_SIGNAL


def haproxy_processes(marker: str) -> list[int]:
    """PIDs whose command line mentions ``marker`` (our work directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if marker in cmdline and "haproxy" in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


async def test_ctrl_c_stops_everything(haproxy_bin: str, site: Site, short_dir: Path) -> None:
    work = short_dir / "cli-run"
    htc = Path(sys.executable).with_name("htc")
    proc = await asyncio.create_subprocess_exec(
        str(htc),
        "local",
        str(site.root),
        "--haproxy",
        haproxy_bin,
        "--status-addr",
        "127.0.0.1:0",
        "--work-dir",
        str(work),
        "--log-format",
        "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=PARENT_DEATH_SIGNAL,  # an interrupted test run must not leave it running
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(20):
            while not any("Ctrl-C" in line for line in lines):
                line = (await proc.stdout.readline()).decode()
                assert line, "htc local exited early:\n" + "".join(lines)
                lines.append(line)
        assert any(line.startswith("deployed ") for line in lines), lines
        assert await asyncio.to_thread(get, site.listen, "echo.local", "/") == (200, "echo /")
        assert haproxy_processes(str(work))

        proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(15):
            rest, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    assert rest.decode().strip().endswith("stopped")
    assert haproxy_processes(str(work)) == []
    assert not (work / "master.sock").exists()
    status, _ = await asyncio.to_thread(get, site.listen, "echo.local", "/")
    assert status == 0  # nothing listens any more
