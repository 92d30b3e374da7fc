"""The one-pipeline invariant, proven on ``htc run``: every checksum that was deployed, announced
as valid in status or Events, promoted from an HTTP source refresh, or admitted by the webhook,
was shown to the configured external validator.

The validator is of type ``http`` (a loopback server of this test records every checksum it is
posted): a ``command`` validator runs in the ``haproxy -c`` sandbox, which lets it write nothing
outside its own directory, so it could not keep a record. The sequence covers startup, a
create, an update and a delete (each through the admission webhook, registered on the real API
server), a refresh of an HTTP source (valid content promoted, invalid content rejected), and a
config change."""

from __future__ import annotations

import json
import threading
import time
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
    config_doc,
    config_status,
    events,
    eventually,
    free_port,
    ingress,
    register,
    start_run,
    with_blocklist,
)

pytestmark = pytest.mark.cluster

# A pod-network address no pod holds: rendered into server lines, never sent traffic (the
# quickstart adds no health checks).
NOBODY = "10.244.200.200"


@pytest.fixture
def blocklist() -> Iterator[tuple[str, list[str]]]:
    """An HTTP source: the test sets ``body[0]``, the list served."""
    body = ["10.0.0.1\n"]

    class Serve(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = body[0].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Serve)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/blocklist", body
    finally:
        server.shutdown()


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[str]]]:
    shown: list[str] = []

    class Record(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            shown.append(json.loads(body)["checksum"])
            answer = b'{"diagnostics": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Record)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/validate", shown
    finally:
        server.shutdown()


def test_every_announced_checksum_passed_the_validator(
    kube: Namespace,
    recorder: tuple[str, list[str]],
    blocklist: tuple[str, list[str]],
    tmp_path: Path,
) -> None:
    url, shown = recorder
    source, body = blocklist
    listen, port = free_port(), free_port()
    doc = config_doc(kube.name, listen)
    spec = doc["spec"]
    spec["validation"] = {"externalValidators": [{"name": "recorder", "type": "http", "url": url}]}
    for name in ("ingresses", "services"):
        spec["watchedResources"][name]["admission"] = True
    with_blocklist(spec, source)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(doc))
    kube.apply(yaml.safe_dump(doc))
    kube.apply(backend_manifests(kube.name, "web", NOBODY))
    kube.apply(ingress(kube.name, "web", "web.test", "web"))
    ca, cert, key = serving_certs(tmp_path)
    work = tmp_path / "run"
    run = start_run(
        kube, "/usr/sbin/haproxy", work, listen=listen,
        extra=("--webhook-addr", f"127.0.0.1:{port}", "--webhook-cert", str(cert),
               "--webhook-key", str(key)),
    )  # fmt: skip
    hook = f"htc-{kube.name}"
    announced: set[str] = set()

    def watch_status() -> bool:
        """Record the announced checksum; always True, to chain with a check."""
        lv = config_status(kube).get("lastValidated") or {}
        if lv.get("checksum"):
            announced.add(lv["checksum"])
        return True

    def settle(what: str) -> None:
        time.sleep(0.5)
        eventually(lambda: watch_status() and run.readyz() == 200, what)
        watch_status()

    def deployed_text() -> str:
        path = work / "config" / "haproxy.cfg"
        return path.read_text() if path.exists() else ""

    def admitted() -> list[dict[str, Any]]:
        return [e for e in run.logs() if e.get("event") == "admission allowed"]

    try:
        run.wait_serving()
        register(kube, config, port, ca, hook, "Fail")
        settle("startup")
        kube.apply(ingress(kube.name, "two", "two.test", "web"))  # create, admitted first
        settle("create")
        kube.apply(ingress(kube.name, "two", "two.test", "web", path="/v2"))  # update
        settle("update")
        kube.plane.kubectl("delete", "ingress", "two", "-n", kube.name)  # delete
        settle("delete")
        assert len(admitted()) >= 3, admitted()  # the webhook judged all three
        body[0] = "10.0.0.2\n"  # an HTTP source refresh: validated, promoted, deployed
        eventually(lambda: "# deny 10.0.0.2" in deployed_text(), "the refreshed list deployed")
        settle("refresh")
        body[0] = "0.0.0.0\n"  # invalid content: validated, rejected
        eventually(
            lambda: bool(config_status(kube)["httpSources"][0].get("pendingRejected")),
            "the bad list rejected",
        )
        spec["haproxyConfig"]["template"] += "\n# config change\n"
        kube.apply(yaml.safe_dump(doc))  # config change (admitted by the webhook too)
        eventually(
            lambda: watch_status() and config_status(kube).get("observedGeneration") == 2,
            "the config change to be adopted",
        )
        settle("config change")
    finally:
        kube.plane.kubectl("delete", "validatingwebhookconfiguration", hook, check=False)
        run.stop()

    logs = run.logs()
    deployed = {e["checksum"] for e in logs if e.get("event") == "deployed" and e.get("checksum")}
    noted = {
        e["note"].split()[2] for e in events(kube) if e.get("reason") == "Deployed"
    }  # "validated configuration <12 hex> deployed"
    promoted = {e["checksum"] for e in logs if e.get("event") == "HTTP source content promoted"}
    allowed = {
        e["checksum"] for e in logs if e.get("event") == "admission allowed" and e.get("checksum")
    }
    assert len(deployed) >= 5, deployed  # startup, create, update, refresh, config change
    assert deployed <= set(shown), f"deployed but never validated: {deployed - set(shown)}"
    assert announced <= set(shown), f"announced but never validated: {announced - set(shown)}"
    assert noted and noted <= {c[:12] for c in shown}, noted
    assert promoted and promoted <= set(shown), (
        f"promoted, never validated: {promoted - set(shown)}"
    )
    assert len(allowed) >= 3, allowed  # create, update, config change rendered differently
    assert allowed <= set(shown), f"admitted but never validated: {allowed - set(shown)}"
