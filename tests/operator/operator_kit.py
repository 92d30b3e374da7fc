"""What the operator's end-to-end tests share: a quickstart config in a test namespace, an
``htc run`` subprocess, and reads of its status, Events and traffic.

Everything is real: the control plane of ``controller.testbed``, ``htc run`` as a user starts
it, a real HAProxy, and backends in pods of the test pod network."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from controller.testbed.cluster import Namespace
from controller.testbed.podnet import Pod

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart" / "config.yaml"
HTC = str(Path(sys.executable).with_name("htc"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config_doc(namespace: str, listen: int) -> dict[str, Any]:
    """The quickstart, confined to ``namespace`` (other tests' objects stay out of its render)
    and with quick reconcile timings."""
    doc = yaml.safe_load(QUICKSTART.read_text())
    doc["metadata"] = {"name": "quickstart", "namespace": namespace}
    for watched in doc["spec"]["watchedResources"].values():
        own = [watched["fieldSelector"]] if watched.get("fieldSelector") else []
        watched["fieldSelector"] = ",".join([*own, f"metadata.namespace={namespace}"])
    doc["spec"]["extraContext"]["listen"] = f"127.0.0.1:{listen}"
    doc["spec"]["reconcile"] = {"debounce": "50ms", "minInterval": "100ms"}
    # An inline rule of the test's own, so that "an invalid change" does not depend on what
    # the shipped library accepts.
    rules = doc["spec"]["watchedResources"]["ingresses"].setdefault("validate", {})
    rules.setdefault("rules", []).append(
        {
            "name": "no-forbidden-names",
            "expression": "!self.metadata.name.startsWith('forbidden')",
            "message": "this test forbids Ingresses named forbidden*",
        }
    )
    return dict(doc)


def backend_manifests(ns: str, service: str, pod_ip: str, port: int = 8080) -> str:
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: {service}, namespace: {ns}}}
spec:
  ports: [{{name: http, port: 80, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {service}-x1
  namespace: {ns}
  labels: {{kubernetes.io/service-name: {service}}}
addressType: IPv4
ports: [{{name: http, port: {port}, protocol: TCP}}]
endpoints: [{{addresses: ["{pod_ip}"], conditions: {{ready: true}}}}]
"""


def ingress(ns: str, name: str, host: str, service: str, path: str = "/") -> str:
    return f"""
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: {name}, namespace: {ns}}}
spec:
  ingressClassName: haproxy
  rules:
    - host: "{host}"
      http:
        paths:
          - {{path: {path}, pathType: Prefix, backend: {{service: {{name: {service}, port: {{number: 80}}}}}}}}
"""


def start_echo(pod: Pod, name: str, port: int = 8080) -> None:
    proc = pod.start(
        [sys.executable, "-m", "controller.testbed.echo", "--name", name, "--bind", pod.ip,
         "--port", str(port)],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and b"listening" in proc.stdout.readline()


def get(port: int, host: str, path: str = "/") -> tuple[int, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": host})
    try:
        with urllib.request.urlopen(req, timeout=3) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError as exc:
        return 0, str(exc)


def eventually(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@dataclass
class Run:
    """One ``htc run`` process and what it printed."""

    proc: subprocess.Popen[str]
    listen: int
    status: int
    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def pump(self) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None

        def read(stream: Any, into: list[str]) -> None:
            for line in stream:
                into.append(line)

        threading.Thread(target=read, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=read, args=(self.proc.stderr, self.errors), daemon=True).start()

    def wait_serving(self, timeout: float = 60.0) -> None:
        eventually(
            lambda: (
                any(line.startswith("htc run: serving") for line in self.lines)
                or self.proc.poll() is not None
            ),
            "htc run to start:\n" + "".join(self.errors[-30:]),
            timeout,
        )
        assert self.proc.poll() is None, "htc run exited:\n" + "".join(self.errors[-40:])

    def get(self, host: str, path: str = "/") -> tuple[int, str]:
        return get(self.listen, host, path)

    def readyz(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.status}/readyz", timeout=3) as r:
                return int(r.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return 0

    def logs(self) -> list[dict[str, Any]]:
        out = []
        for line in list(self.errors):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_run(
    kube: Namespace,
    haproxy: str,
    work: Path,
    *,
    listen: int,
    kubeconfig: Path | None = None,
    extra: tuple[str, ...] = (),
) -> Run:
    status = free_port()
    argv = [
        HTC, "run",
        "--kubeconfig", str(kubeconfig or kube.plane.kubeconfig),
        "--namespace", kube.name, "--config", "quickstart",
        "--haproxy", haproxy,
        "--listen", f"127.0.0.1:{listen}",
        "--status-addr", f"127.0.0.1:{status}",
        "--work-dir", str(work),
        "--log-format", "json", "--log-level", "info",
        *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "KUBECONFIG": ""},
        start_new_session=True,
    )
    run = Run(proc, listen, status)
    run.pump()
    return run


def config_status(kube: Namespace) -> dict[str, Any]:
    out = kube.plane.kubectl("get", "htc", "quickstart", "-n", kube.name, "-o", "json").stdout
    return dict(json.loads(out).get("status") or {})


def condition(kube: Namespace, type_: str) -> dict[str, Any]:
    for c in config_status(kube).get("conditions", []):
        if c["type"] == type_:
            return dict(c)
    return {}


def events(kube: Namespace) -> list[dict[str, Any]]:
    out = kube.plane.kubectl("get", "events.v1.events.k8s.io", "-n", kube.name, "-o", "json").stdout
    return list(json.loads(out)["items"])


def register(kube: Namespace, config: Path, port: int, ca: Path, name: str, policy: str) -> None:
    """Register the webhook of an ``htc run`` on loopback ``port`` with ``htc webhook-config``
    (the generator the chart uses), confined to ``kube``'s namespace."""
    out = subprocess.run(
        [HTC, "webhook-config", str(config), "--url", f"https://127.0.0.1:{port}",
         "--ca-file", str(ca), "--name", name, "--failure-policy", policy,
         "--config-failure-policy", policy],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    doc = yaml.safe_load(out)
    # Both entries (collections, config) confined to this test's namespace, so that no other
    # test ever calls them.
    for entry in doc["webhooks"]:
        entry["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": kube.name}}
    kube.plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))


def with_blocklist(spec: dict[str, Any], url: str, **source: Any) -> None:
    """An HTTP source ``blocklist`` at ``url`` written into haproxy.cfg as ``# deny <ip>`` lines,
    and an output rule that refuses ``0.0.0.0`` (so "invalid content" does not depend on what
    the library accepts)."""
    spec["httpSources"] = {
        "blocklist": {"url": url, "refreshInterval": "1s", "timeout": "2s", **source}
    }
    spec["haproxyConfig"]["template"] += (
        "\n{% for ip in http['blocklist'].split() %}# deny {{ ip | haproxy_arg }}\n{% endfor %}"
    )
    spec["haproxyConfig"].setdefault("validate", {}).setdefault("rules", []).append(
        {
            "name": "never-block-everything",
            "expression": "!self.content.contains('# deny 0.0.0.0')",
            "message": "the block list must not block every address",
        }
    )
