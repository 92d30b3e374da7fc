"""``make demo`` (``python -m controller.demo``) on both binaries, as a newcomer runs it."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import sys

from tests.runtime.e2e_helpers import child, free_port, get, interrupt, read_until

DEMO = (sys.executable, "-m", "controller.demo", "--free-ports")


async def test_demo_serves_the_quickstart_and_stops_cleanly(haproxy_bin: str) -> None:
    listen = free_port()
    argv = ["--haproxy", haproxy_bin, "--listen", f"127.0.0.1:{listen}"]
    async with child(*DEMO, *argv, "--status-addr", "127.0.0.1:0") as proc:
        text = "".join(await read_until(proc, "Ctrl-C stops all", 30, []))
        assert f"curl -H 'Host: echo.local' http://127.0.0.1:{listen}/" in text
        assert "other.local" not in text  # the Ingress of another class is not advertised
        status, body = await asyncio.to_thread(get, listen, "echo.local", "/")
        assert status == 200 and re.match(r"echo \(127\.0\.0\.1:\d+\) GET /", body), body
        status, body = await asyncio.to_thread(get, listen, "api.local", "/v1/users")
        assert status == 200 and body.startswith("api "), body
        rest, err = await interrupt(proc)
    assert proc.returncode == 0, err
    assert rest.strip().endswith("demo stopped")


async def test_a_taken_status_port_exits_2_without_a_traceback() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        argv = ["--listen", f"127.0.0.1:{free_port()}", "--status-addr", f"127.0.0.1:{taken}"]
        async with child(*DEMO, *argv) as proc, asyncio.timeout(30):
            out, err = await proc.communicate()
    assert proc.returncode == 2, err.decode()
    assert "demo: cannot start:" in err.decode()
    assert "Traceback" not in err.decode() and "curl -H" not in out.decode()


async def test_what_to_curl_is_printed_only_once_haproxy_serves() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        listen = holder.getsockname()[1]
        argv = ["--listen", f"127.0.0.1:{listen}", "--status-addr", "127.0.0.1:0"]
        async with contextlib.AsyncExitStack() as stack:
            proc = await stack.enter_async_context(child(*DEMO, *argv))
            out = await read_until(proc, "not serving yet", 30, [])
            assert not any("curl -H" in line for line in out), out
            assert any("no validated configuration is serving yet" in line for line in out)
            running = stack.pop_all()  # keep it running once the port is released
    # The port is free now: the retry brings HAProxy up, and then the demo says what to curl.
    async with running:
        await read_until(proc, "Ctrl-C stops all", 20, out)
        assert f"curl -H 'Host: echo.local' http://127.0.0.1:{listen}/" in "".join(out)
        await interrupt(proc)
