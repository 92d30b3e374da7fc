"""``htc local`` as a user runs it: a subprocess, real output, Ctrl-C, nothing left behind."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from click.testing import CliRunner
from e2e_helpers import Site, child, get, interrupt, read_until

from controller.cli.local import command


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
    argv = ["local", str(site.root), "--haproxy", haproxy_bin, "--status-addr", "127.0.0.1:0"]
    async with child(str(htc), *argv, "--work-dir", str(work), "--log-format", "json") as proc:
        lines = await read_until(proc, "Ctrl-C", 20, [])
        assert any(line.startswith("deployed ") for line in lines), lines
        assert await asyncio.to_thread(get, site.listen, "echo.local", "/") == (200, "echo /")
        assert haproxy_processes(str(work))
        rest, err = await interrupt(proc)
    assert proc.returncode == 0, err
    assert rest.strip().endswith("stopped")
    assert haproxy_processes(str(work)) == []
    assert not (work / "master.sock").exists()
    status, _ = await asyncio.to_thread(get, site.listen, "echo.local", "/")
    assert status == 0  # nothing listens any more


@pytest.fixture
def _logging_restored() -> Iterator[None]:
    yield
    structlog.reset_defaults()  # the command configures logging process-wide


@pytest.mark.usefixtures("_logging_restored")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--haproxy", "nosuch"], "haproxy binary 'nosuch' not found"),
        (["--haproxy", "/bin/true"], "true is not a working haproxy binary"),
        (["--status-addr", "garbage"], "invalid address 'garbage'"),
        (["--status-addr", "127.0.0.1:99999"], "invalid address"),
    ],
)
def test_unusable_input_exits_2_with_a_message(
    quickstart_dir: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(command, [str(quickstart_dir), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.usefixtures("_logging_restored")
def test_a_taken_status_port_exits_2(quickstart_dir: Path, short_dir: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        result = CliRunner().invoke(
            command,
            [
                str(quickstart_dir),
                "--status-addr",
                f"127.0.0.1:{taken}",
                "--work-dir",
                str(short_dir / "w"),
            ],
        )
    assert result.exit_code == 2, result.output
    assert "cannot start:" in result.output and "address already in use" in result.output.lower()
    assert "Traceback" not in result.output
