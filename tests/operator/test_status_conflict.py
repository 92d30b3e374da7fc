"""A status write that the API server answers with 409 Conflict is retried.

A merge patch of the status subresource carries no resourceVersion, so the API server has no
reason of its own to refuse one. The conflict is injected by the API server's own admission
chain instead: a validating webhook on ``haproxytemplateconfigs/status`` (served here, on
loopback) refuses the first writes with code 409, which the real API server hands to the
client as a real ``409 Conflict``. Everything else is real: ``htc run``, HAProxy, kubectl."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.testbed.cluster import Namespace
from controller.testbed.tls import serving_certs
from tests.operator.operator_kit import (
    backend_manifests,
    condition,
    config_doc,
    eventually,
    free_port,
    ingress,
    start_run,
)

pytestmark = pytest.mark.cluster

NOBODY = "10.244.200.203"
REFUSALS = 2


class ConflictingWebhook(ThreadingHTTPServer):
    """Answers the first ``REFUSALS`` status writes with 409, then admits everything."""

    def __init__(self, cert: Path, key: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.lock = threading.Lock()
        self.seen = 0

    def judge(self) -> dict[str, Any]:
        with self.lock:
            self.seen += 1
            if self.seen <= REFUSALS:
                return {
                    "allowed": False,
                    "status": {"code": 409, "reason": "Conflict", "message": "injected"},
                }
        return {"allowed": True}


class _Handler(BaseHTTPRequestHandler):
    server: ConflictingWebhook

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        response = {"uid": review["request"]["uid"], **self.server.judge()}
        body = json.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def conflicting(kube: Namespace, tmp_path: Path) -> Iterator[ConflictingWebhook]:
    ca, cert, key = serving_certs(tmp_path)
    server = ConflictingWebhook(cert, key)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    name = f"htc-conflict-{kube.name}"
    registration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "status-conflict.htc.test",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{server.server_address[1]}/status",
                    "caBundle": base64.b64encode(ca.read_bytes()).decode(),
                },
                "rules": [
                    {
                        "apiGroups": ["haproxy-template.dev"],
                        "apiVersions": ["*"],
                        "operations": ["UPDATE"],
                        "resources": ["haproxytemplateconfigs/status"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": kube.name}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }
    kube.plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(registration))
    try:
        yield server
    finally:
        kube.plane.kubectl("delete", "validatingwebhookconfiguration", name, check=False)
        server.shutdown()


def test_a_status_write_refused_with_409_is_retried(
    kube: Namespace, conflicting: ConflictingWebhook, tmp_path: Path
) -> None:
    listen = free_port()
    kube.apply(yaml.safe_dump(config_doc(kube.name, listen)))
    kube.apply(backend_manifests(kube.name, "web", NOBODY))
    kube.apply(ingress(kube.name, "web", "web.test", "web"))
    run = start_run(kube, "/usr/sbin/haproxy", tmp_path / "run", listen=listen)
    try:
        run.wait_serving()
        eventually(
            lambda: condition(kube, "Deployed").get("status") == "True",
            "the status to be written despite the refusals",
            timeout=30,
        )
        assert conflicting.seen > REFUSALS
        with urllib.request.urlopen(f"http://127.0.0.1:{run.status}/metrics", timeout=3) as r:
            metrics = r.read().decode()
        conflicts = [
            line for line in metrics.splitlines()
            if line.startswith('htc_status_writes_total{result="conflict"}')
        ]  # fmt: skip
        assert conflicts and float(conflicts[0].split()[-1]) >= REFUSALS, metrics[:2000]
        assert not any('"status write' in line for line in run.errors), run.errors[-20:]
    finally:
        run.stop()
