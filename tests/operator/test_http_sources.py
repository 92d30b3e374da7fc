"""HTTP sources in ``htc run``: a refresh is a proposal. Valid new content is promoted and
deployed; invalid content is rejected once (its checksum remembered), the accepted content keeps
serving, and a Warning Event names the source; unchanged content is a 304.

The source is a loopback HTTP server of this test whose content the test changes. The config
writes the block list into haproxy.cfg and carries an output rule that refuses ``0.0.0.0``."""

from __future__ import annotations

import hashlib
import re
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.testbed.cluster import Namespace
from tests.operator.operator_kit import (
    Run,
    backend_manifests,
    condition,
    config_doc,
    config_status,
    events,
    eventually,
    free_port,
    ingress,
    start_run,
    with_blocklist,
)

pytestmark = pytest.mark.cluster

NOBODY = "10.244.200.204"


class Source:
    """The remote list: content, ETag, and a count of what was served; ``status`` other than
    200 makes it fail."""

    def __init__(self, etag: bool) -> None:
        self.etag = etag
        self.body = "10.0.0.1\n"
        self.status = 200
        self.not_modified = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/blocklist"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        source = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if source.status != 200:
                    self.send_response(source.status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = source.body.encode()
                etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
                if source.etag and self.headers.get("If-None-Match") == etag:
                    source.not_modified += 1
                    self.send_response(304)
                    self.end_headers()
                    return
                self.send_response(200)
                if source.etag:
                    self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@pytest.fixture(params=[True, False], ids=["etag", "no-etag"])
def source(request: pytest.FixtureRequest) -> Iterator[Source]:
    s = Source(etag=request.param)
    yield s
    s.server.shutdown()


def metric(run: Run, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{run.status}/metrics", timeout=3) as resp:
        text = resp.read().decode()
    return sum(float(m) for m in re.findall(rf"^{re.escape(name)} (\S+)$", text, re.M))


def deployed(work: Path) -> str:
    path = work / "config" / "haproxy.cfg"
    return path.read_text() if path.exists() else ""


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def apply_config(kube: Namespace, source: Source, listen: int, **extra: object) -> None:
    """The quickstart with the block list in haproxy.cfg and a rule refusing 0.0.0.0, and
    one Ingress to a Service."""
    doc = config_doc(kube.name, listen)
    spec = doc["spec"]
    with_blocklist(spec, source.url, **extra)
    kube.apply(yaml.safe_dump(doc))
    kube.apply(backend_manifests(kube.name, "web", NOBODY))
    kube.apply(ingress(kube.name, "web", "web.test", "web"))


def test_a_refresh_is_validated_before_it_is_used(
    kube: Namespace, source: Source, tmp_path: Path
) -> None:
    listen = free_port()
    apply_config(kube, source, listen)
    work = tmp_path / "run"
    run = start_run(kube, "/usr/sbin/haproxy", work, listen=listen)
    try:
        run.wait_serving()
        assert "# deny 10.0.0.1" in deployed(work)
        if source.etag:  # unchanged content: conditional requests answered 304
            eventually(lambda: source.not_modified >= 1, "a 304")
        # valid new content: promoted, then deployed
        source.body = "10.0.0.2\n"
        eventually(lambda: "# deny 10.0.0.2" in deployed(work), "the new list deployed")
        eventually(
            lambda: (
                config_status(kube).get("httpSources", [{}])[0].get("acceptedChecksum")
                == sha("10.0.0.2\n")
            ),
            "status.httpSources to name the accepted content",
        )
        # invalid new content: rejected once, the accepted content keeps serving
        source.body = "0.0.0.0\n"
        eventually(
            lambda: (
                config_status(kube)["httpSources"][0].get("pendingRejected") == sha("0.0.0.0\n")
            ),
            "the rejection in status",
        )
        # later refreshes (304 for the same ETag, or the remembered checksum) never validate
        # the same bad content again
        if source.etag:
            fetches = 'htc_http_fetches_total{result="unchanged",source="blocklist"}'
            seen = metric(run, fetches)
            eventually(lambda: metric(run, fetches) >= seen + 3, "three more refreshes")
        else:
            known = 'htc_http_rejections_total{reason="known",source="blocklist"}'
            eventually(lambda: metric(run, known) >= 3, "three refreshes of the known content")
        invalid = 'htc_http_rejections_total{reason="invalid",source="blocklist"}'
        assert metric(run, invalid) == 1
        text = deployed(work)
        assert "# deny 10.0.0.2" in text and "0.0.0.0" not in text
        eventually(
            lambda: any(e.get("reason") == "HTTPSourceRejected" and "blocklist" in e.get("note", "")
                        for e in events(kube)),
            "a Warning Event naming the source",
        )  # fmt: skip
        assert config_status(kube)["conditions"][0]["status"] == "True"  # Valid stays
    finally:
        run.stop()
    assert any("HTTP source content promoted" in line for line in run.errors)


@pytest.mark.parametrize("source", [True], indirect=True, ids=["etag"])
def test_a_critical_source_down_at_start_holds_the_first_render(
    kube: Namespace, source: Source, tmp_path: Path
) -> None:
    source.status = 503
    listen = free_port()
    apply_config(kube, source, listen, critical=True)
    work = tmp_path / "run"
    run = start_run(kube, "/usr/sbin/haproxy", work, listen=listen)

    def ready() -> dict[str, Any]:
        return condition(kube, "Ready")

    try:
        eventually(lambda: ready().get("reason") == "WaitingForHTTPSources", "Ready says why")
        assert ready()["status"] == "False"
        assert "critical HTTP source(s) blocklist" in ready()["message"]
        assert f"HTTP 503 from {source.url}" in ready()["message"]
        assert config_status(kube)["httpSources"][0]["lastError"] == f"HTTP 503 from {source.url}"
        eventually(
            lambda: any(e.get("reason") == "HTTPSourceUnavailable"
                        and "blocklist" in e.get("note", "") for e in events(kube)),
            "a Warning Event naming the source",
        )  # fmt: skip
        assert deployed(work) == "" and run.readyz() != 200
        source.status = 200
        run.wait_serving()
        eventually(lambda: "# deny 10.0.0.1" in deployed(work), "the list deployed")
        eventually(lambda: ready().get("status") == "True", "Ready once it serves")
    finally:
        run.stop()
