"""An API server that is not there at startup: ``htc run`` keeps retrying with back-off, says
so in its log, is alive but not ready, and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

HTC = str(Path(sys.executable).with_name("htc"))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again on return: nothing listens there


def probe(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def test_unreachable_api_server_is_retried_with_backoff(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": f"https://127.0.0.1:{closed_port()}",
                                              "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "u", "user": {"token": "x"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )  # fmt: skip
    status = closed_port()
    proc = subprocess.Popen(
        [HTC, "run", "--kubeconfig", str(kubeconfig), "--namespace", "ns", "--config", "c",
         "--haproxy", "/usr/sbin/haproxy", "--status-addr", f"127.0.0.1:{status}",
         "--no-leader-election", "--log-format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while probe(f"http://127.0.0.1:{status}/healthz") != 200:
            assert time.monotonic() < deadline and proc.poll() is None, "no /healthz"
            time.sleep(0.2)
        assert probe(f"http://127.0.0.1:{status}/readyz") == 503
        time.sleep(4)  # retries at 1 s, then 2 s
        assert proc.poll() is None
        assert probe(f"http://127.0.0.1:{status}/readyz") == 503
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-2000:]
    logs = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    retries = [e for e in logs if e.get("event") == "API server unreachable; retrying"]
    assert len(retries) >= 2, err[-2000:]
    assert [e["retry_in"] for e in retries[:2]] == [1.0, 2.0]  # back-off doubles
    assert "127.0.0.1" in retries[0]["error"]
