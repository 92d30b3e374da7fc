"""``make demo`` (``python -m controller.demo``) on both binaries, as a newcomer runs it."""

from __future__ import annotations

import asyncio
import re
import signal
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
