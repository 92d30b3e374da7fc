"""``make demo`` (``python -m controller.demo``) on both binaries, as a newcomer runs it."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import sys

from e2e_helpers import free_port, get

from controller.local.supervisor import PARENT_DEATH_SIGNAL


async def test_demo_serves_the_quickstart_and_stops_cleanly(haproxy_bin: str) -> None:
    listen = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.demo",
        "--free-ports",
        "--haproxy",
        haproxy_bin,
        "--listen",
        f"127.0.0.1:{listen}",
        "--status-addr",
        "127.0.0.1:0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=PARENT_DEATH_SIGNAL,  # an interrupted test run must not leave it running
    )
    assert proc.stdout is not None
    out: list[str] = []
    try:
        async with asyncio.timeout(30):
            while not any("Ctrl-C stops all" in line for line in out):
                line = (await proc.stdout.readline()).decode()
                assert line, "demo exited early:\n" + "".join(out)
                out.append(line)
        text = "".join(out)
        assert f"curl -H 'Host: echo.local' http://127.0.0.1:{listen}/" in text
        assert "other.local" not in text  # the Ingress of another class is not advertised
        status, body = await asyncio.to_thread(get, listen, "echo.local", "/")
        assert status == 200 and re.match(r"echo \(127\.0\.0\.1:\d+\) GET /", body), body
        status, body = await asyncio.to_thread(get, listen, "api.local", "/v1/users")
        assert status == 200 and body.startswith("api "), body
        proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(15):
            rest, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    assert rest.decode().strip().endswith("demo stopped")


async def _demo(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.demo",
        "--free-ports",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=PARENT_DEATH_SIGNAL,
    )


async def test_a_taken_status_port_exits_2_without_a_traceback() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        proc = await _demo(
            "--listen", f"127.0.0.1:{free_port()}", "--status-addr", f"127.0.0.1:{taken}"
        )
        async with asyncio.timeout(30):
            out, err = await proc.communicate()
    assert proc.returncode == 2, err.decode()
    assert "demo: cannot start:" in err.decode()
    assert "Traceback" not in err.decode() and "curl -H" not in out.decode()


async def test_what_to_curl_is_printed_only_once_haproxy_serves() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        listen = holder.getsockname()[1]
        proc = await _demo("--listen", f"127.0.0.1:{listen}", "--status-addr", "127.0.0.1:0")
        assert proc.stdout is not None
        out: list[str] = []
        try:
            async with asyncio.timeout(30):
                while not any("not serving yet" in line for line in out):
                    line = (await proc.stdout.readline()).decode()
                    assert line, "demo exited early:\n" + "".join(out)
                    out.append(line)
            assert not any("curl -H" in line for line in out), out
            assert any("no validated configuration is serving yet" in line for line in out)
        except BaseException:
            proc.kill()
            raise
    # The port is free now: the retry brings HAProxy up, and then the demo says what to curl.
    try:
        async with asyncio.timeout(20):
            while not any("Ctrl-C stops all" in line for line in out):
                line = (await proc.stdout.readline()).decode()
                assert line, "demo exited early:\n" + "".join(out)
                out.append(line)
        assert f"curl -H 'Host: echo.local' http://127.0.0.1:{listen}/" in "".join(out)
        proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(15):
            await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
