"""The one-pipeline invariant, proven on ``htc run``: every checksum that was deployed, or
announced as valid in status or Events, was shown to the configured external validator.

The validator is of type ``http`` (a loopback server of this test records every checksum it is
posted): a ``command`` validator runs in the ``haproxy -c`` sandbox, which lets it write nothing
outside its own directory, so it could not keep a record. The sequence covers startup, a
create, an update, a delete and a config change; the admission and HTTP-source issues extend
it with their paths."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from controller.testbed.cluster import Namespace
from tests.operator.operator_kit import (
    backend_manifests,
    config_doc,
    config_status,
    events,
    eventually,
    free_port,
    ingress,
    start_run,
)

pytestmark = pytest.mark.cluster

# A pod-network address no pod holds: rendered into server lines, never sent traffic (the
# quickstart adds no health checks).
NOBODY = "10.244.200.200"


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
    kube: Namespace, recorder: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, shown = recorder
    listen = free_port()
    doc = config_doc(kube.name, listen)
    doc["spec"]["validation"] = {
        "externalValidators": [{"name": "recorder", "type": "http", "url": url}]
    }
    kube.apply(yaml.safe_dump(doc))
    kube.apply(backend_manifests(kube.name, "web", NOBODY))
    kube.apply(ingress(kube.name, "web", "web.test", "web"))
    run = start_run(kube, "/usr/sbin/haproxy", tmp_path / "run", listen=listen)
    announced: set[str] = set()

    def watch_status() -> None:
        lv = config_status(kube).get("lastValidated") or {}
        if lv.get("checksum"):
            announced.add(lv["checksum"])

    def settle(what: str) -> None:
        time.sleep(0.5)
        eventually(lambda: (watch_status(), run.readyz() == 200)[1], what)
        watch_status()

    try:
        run.wait_serving()
        settle("startup")
        kube.apply(ingress(kube.name, "two", "two.test", "web"))  # create
        settle("create")
        kube.apply(ingress(kube.name, "two", "two.test", "web", path="/v2"))  # update
        settle("update")
        kube.plane.kubectl("delete", "ingress", "two", "-n", kube.name)  # delete
        settle("delete")
        spec = doc["spec"]
        spec["haproxyConfig"]["template"] += "\n# config change\n"
        kube.apply(yaml.safe_dump(doc))  # config change
        eventually(
            lambda: (watch_status(), config_status(kube).get("observedGeneration") == 2)[1],
            "the config change to be adopted",
        )
        settle("config change")
    finally:
        run.stop()

    deployed = {
        e["checksum"] for e in run.logs() if e.get("event") == "deployed" and e.get("checksum")
    }
    noted = {
        e["note"].split()[2] for e in events(kube) if e.get("reason") == "Deployed"
    }  # "validated configuration <12 hex> deployed"
    assert len(deployed) >= 4, deployed  # startup, create, update, config change
    assert deployed <= set(shown), f"deployed but never validated: {deployed - set(shown)}"
    assert announced <= set(shown), f"announced but never validated: {announced - set(shown)}"
    assert noted and noted <= {c[:12] for c in shown}, noted
