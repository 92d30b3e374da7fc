"""The quoting filters against the real thing: HAProxy must read back exactly the value.

A config with one ``http-request return ... string <haproxy_arg(value)>`` rule per value
(``string`` is taken literally) is served by a real haproxy on a loopback port; each response
body must equal its value byte for byte. The same rule carries the value as a log-format
header (``hdr X-Value <haproxy_arg(value, logformat=True)>``), which must come back unexpanded.
"""

from __future__ import annotations

import http.client
import random
import socket
import subprocess
import time
from pathlib import Path

import pytest

from controller.render.filters import haproxy_arg, haproxy_quote
from tests.render.haproxy_model import HOSTILE

POOL = "ab Z09 \t'\"\\#$%{}[]()!;,|&<>=@:/.-_~`^*?\x0b\x0cé中"


def _samples() -> list[str]:
    rng = random.Random(20240501)
    generated = ["".join(rng.choice(POOL) for _ in range(rng.randint(1, 24))) for _ in range(40)]
    return [*HOSTILE, *generated]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _header_safe(value: str) -> bool:
    return value.isascii() and value.isprintable() and value == value.strip()


def test_served_values_equal_the_originals(haproxy_bin: str, tmp_path: Path) -> None:
    samples = _samples()
    port = _free_port()
    lines = [
        "defaults",
        "    mode http",
        "    timeout connect 1s",
        "    timeout client 5s",
        "    timeout server 5s",
        "frontend echo",
        f"    bind 127.0.0.1:{port}",
    ]
    for i, value in enumerate(samples):
        quote = haproxy_arg if i % 2 else haproxy_quote
        lines.append(
            f"    http-request return status 200 content-type text/plain "
            f"hdr X-Value {quote(value, logformat=True)} string {quote(value)} if {{ path /{i} }}"
        )
        # an extra argument here would be a parse error: set-header takes a name and a value
        lines.append(f"    http-response set-header X-Test {quote(value, logformat=True)}")
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text("\n".join(lines) + "\n")
    check = subprocess.run([haproxy_bin, "-c", "-f", str(cfg)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "WARNING" not in check.stdout + check.stderr

    proc = subprocess.Popen(
        [haproxy_bin, "-db", "-f", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 5
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"haproxy did not start: {proc.communicate(timeout=2)}")
                time.sleep(0.02)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        for i, value in enumerate(samples):
            conn.request("GET", f"/{i}")
            resp = conn.getresponse()
            body = resp.read().decode()
            assert resp.status == 200
            assert body == value, f"sample {i}: {value!r} came back as {body!r}"
            if _header_safe(value):
                assert resp.getheader("X-Value") == value, f"sample {i} header"
        conn.close()
    finally:
        proc.terminate()
        proc.communicate(timeout=5)
