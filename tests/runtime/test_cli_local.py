"""``htc local`` as a user runs it: a subprocess, real output, Ctrl-C, nothing left behind."""

from __future__ import annotations

import asyncio
import re
import socket
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from click.testing import CliRunner

from controller.cli.local import command
from controller.deploy.supervisor import PARENT_DEATH_SIGNAL
from tests.runtime.e2e_helpers import (
    Site,
    child,
    free_port,
    get,
    ingress_doc,
    interrupt,
    read_until,
)


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
        (["--status-addr", "garbage"], "--status-addr garbage: not host:port"),
        (["--status-addr", "127.0.0.1:99999"], "--status-addr 127.0.0.1:99999: not host:port"),
        (["--listen", "127.0.0.1"], "--listen 127.0.0.1: not host:port"),
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
    assert f"--status-addr 127.0.0.1:{taken}: the address is in use" in result.output
    assert "Traceback" not in result.output


@pytest.mark.usefixtures("_logging_restored")
def test_a_second_instance_on_the_same_listen_refuses(quickstart_dir: Path) -> None:
    # HAProxy's listener: SO_REUSEPORT, so a second HAProxy could bind it as well
    with socket.socket() as haproxy_like:
        haproxy_like.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        haproxy_like.bind(("127.0.0.1", 0))
        haproxy_like.listen()
        taken = haproxy_like.getsockname()[1]
        result = CliRunner().invoke(
            command, [str(quickstart_dir), "--listen", f"127.0.0.1:{taken}", "--status-addr", "off"]
        )
    assert result.exit_code == 2, result.output
    assert f"--listen 127.0.0.1:{taken}: the address is in use" in result.output
    assert "SO_REUSEPORT" in result.output


async def test_relative_work_dir_banner_recovery_and_one_report(
    haproxy_bin: str, site: Site, short_dir: Path
) -> None:
    """A relative --work-dir deploys; the banner says what to curl; a rejection is printed
    once (not also by the logger), and the recovery is printed with the gauge already 1."""
    htc = Path(sys.executable).with_name("htc")
    status = free_port()
    argv = [str(htc), "local", str(site.root), "--haproxy", haproxy_bin]
    argv += ["--status-addr", f"127.0.0.1:{status}", "--work-dir", "rel-work"]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        "--log-format",
        "json",
        cwd=short_dir,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=PARENT_DEATH_SIGNAL,
    )
    try:
        seen: list[str] = []
        await read_until(proc, "Ctrl-C", 20, seen)
        text = "".join(seen)
        assert "deployed " in text and (short_dir / "rel-work" / "config" / "haproxy.cfg").exists()
        assert f"frontend http://127.0.0.1:{site.listen}" in text
        curl = rf"try: curl -H 'Host: [a-z.]+' http://127\.0\.0\.1:{site.listen}/\n"
        assert re.search(curl, text), text
        good = (site.root / "resources" / "ing-echo.yaml").read_text()
        site.write("ing-echo", ingress_doc("echo", "Bad Host!", {"/": "echo"}))
        await read_until(proc, "rejected (", 20, seen)
        (site.root / "resources" / "ing-echo.yaml").write_text(good)
        await read_until(proc, "valid again: ", 20, seen)
        metrics = await asyncio.to_thread(_fetch, f"http://127.0.0.1:{status}/metrics")
        assert "htc_last_verdict_valid 1.0" in metrics
        _, err = await interrupt(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert "configuration rejected" not in err and '"kind": "rejected"' not in err, err
    assert "".join(seen).count("rejected (") == 1


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=3) as resp:
        return str(resp.read().decode())
