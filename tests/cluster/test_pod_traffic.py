"""A backend in a pod answers through a real HAProxy whose server line comes from an
EndpointSlice applied to the real API server.

The objects take the path a user's would: ``kubectl apply`` to the API server (which checks
them, and refuses loopback endpoints), read back as the server stored them, and handed to
``htc local``, which renders the quickstart templates, validates, and runs HAProxy."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.testbed.cluster import Namespace
from controller.testbed.podnet import Pod

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart" / "config.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def manifests(ns: str, pod_ip: str) -> str:
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {ns}}}
spec:
  ports: [{{name: http, port: 80, targetPort: 8080}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-x1
  namespace: {ns}
  labels: {{kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{{name: http, port: 8080, protocol: TCP}}]
endpoints: [{{addresses: ["{pod_ip}"], conditions: {{ready: true}}}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: web, namespace: {ns}}}
spec:
  ingressClassName: haproxy
  rules:
    - host: web.test
      http:
        paths:
          - {{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}
"""


def stored_objects(kube: Namespace) -> list[dict[str, Any]]:
    out = kube.plane.kubectl(
        "get", "services,endpointslices,ingresses", "-n", kube.name, "-o", "json"
    ).stdout
    return list(json.loads(out)["items"])


def get(port: int, host: str, path: str) -> tuple[int, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": host})
    try:
        with urllib.request.urlopen(req, timeout=3) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError as exc:
        return 0, str(exc)


def test_loopback_endpoints_are_refused_by_the_server(kube: Namespace) -> None:
    proc = kube.plane.kubectl(
        "apply", "-n", kube.name, "-f", "-", input=manifests(kube.name, "127.0.0.1"), check=False
    )
    assert proc.returncode != 0 and "loopback" in proc.stderr


def test_pod_backend_answers_through_haproxy(
    kube: Namespace, pod: Pod, haproxy_bin: str, tmp_path: Path
) -> None:
    echo = pod.start(
        [sys.executable, "-m", "controller.testbed.echo", "--name", "web-1", "--bind", pod.ip],
        stdout=subprocess.PIPE,
    )
    assert echo.stdout is not None and b"listening" in echo.stdout.readline()
    kube.apply(manifests(kube.name, pod.ip))

    site = tmp_path / "site"
    (site / "resources").mkdir(parents=True)
    config = yaml.safe_load(QUICKSTART.read_text())
    listen = free_port()
    config["spec"]["extraContext"]["listen"] = f"127.0.0.1:{listen}"
    (site / "config.yaml").write_text(yaml.safe_dump(config))
    objects = stored_objects(kube)
    assert {o["kind"] for o in objects} >= {"Service", "EndpointSlice", "Ingress"}
    (site / "resources" / "cluster.yaml").write_text(yaml.safe_dump_all(objects))

    work = tmp_path / "run"
    htc = Path(sys.executable).with_name("htc")
    argv = [str(htc), "local", str(site), "--haproxy", haproxy_bin, "--status-addr", "off"]
    proc = subprocess.Popen(
        [*argv, "--work-dir", str(work), "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while not any(line.startswith("deployed ") for line in seen):
            line = proc.stdout.readline()
            assert line and time.monotonic() < deadline, "htc local did not deploy:\n" + "".join(
                seen
            )
            seen.append(line)
        cfg = next(work.rglob("haproxy.cfg")).read_text()
        assert f"{pod.ip}:8080" in cfg  # the server line came from the stored EndpointSlice
        status, body = get(listen, "web.test", "/through/haproxy")
        assert status == 200, body
        answer = json.loads(body)
        assert answer["pod"] == "web-1"
        assert answer["path"] == "/through/haproxy"
        assert answer["host"] == "web.test"
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
