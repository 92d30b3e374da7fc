"""The admission webhook through the real API server: registered with ``htc webhook-config``
(a URL on loopback with a ``caBundle``), then exercised with ``kubectl``.

The config is the quickstart with ``admission: true`` on Ingresses and Services, the test's
own inline rule (Ingresses named ``forbidden*`` are refused) and an output rule (haproxy.cfg
must keep at least one server line), so that a refusal does not depend on what the shipped
library accepts. No traffic: EndpointSlices name a pod-network address no pod holds."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from controller.testbed.cluster import Namespace
from tests.operator.operator_kit import (
    Run,
    backend_manifests,
    config_doc,
    events,
    free_port,
    ingress,
    register,
    start_run,
)

pytestmark = pytest.mark.cluster

NOBODY = "10.244.200.202"
HTC = str(Path(sys.executable).with_name("htc"))


def write_certs(d: Path) -> tuple[Path, Path, Path]:
    """A CA, and a serving certificate for 127.0.0.1 signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "htc-test-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webhook")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
        .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    paths = d / "ca.crt", d / "tls.crt", d / "tls.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def admission_config(ns: str, listen: int) -> dict[str, Any]:
    doc = config_doc(ns, listen)
    watched = doc["spec"]["watchedResources"]
    for name in ("ingresses", "services"):
        watched[name]["admission"] = True
    validate = doc["spec"]["haproxyConfig"].setdefault("validate", {})
    validate.setdefault("rules", []).append(
        {
            "name": "keeps-a-server",
            "expression": "self.content.contains('\\n    server ')",
            "message": "this test needs at least one server line in haproxy.cfg",
        }
    )
    return doc


@dataclass
class Webhook:
    run: Run
    kube: Namespace
    port: int
    ca: Path
    name: str

    def apply(self, manifest: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.kube.plane.kubectl(
            "apply", "-n", self.kube.name, *args, "-f", "-", input=manifest, check=False
        )


@pytest.fixture
def webhook(kube: Namespace, tmp_path: Path) -> Iterator[Webhook]:
    ca, cert, key = write_certs(tmp_path)
    listen, port = free_port(), free_port()
    doc = admission_config(kube.name, listen)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(doc))
    kube.apply(yaml.safe_dump(doc))
    kube.apply(backend_manifests(kube.name, "web", NOBODY))
    kube.apply(ingress(kube.name, "web", "web.test", "web"))
    run = start_run(
        kube, "/usr/sbin/haproxy", tmp_path / "run", listen=listen,
        extra=("--webhook-addr", f"127.0.0.1:{port}", "--webhook-cert", str(cert),
               "--webhook-key", str(key)),
    )  # fmt: skip
    name = f"htc-{kube.name}"
    try:
        run.wait_serving()
        register(kube, config, port, ca, name, "Fail")
        yield Webhook(run, kube, port, ca, name)
    finally:
        kube.plane.kubectl("delete", "validatingwebhookconfiguration", name, check=False)
        run.stop()


def test_a_bad_ingress_is_refused_with_our_message(webhook: Webhook) -> None:
    proc = webhook.apply(ingress(webhook.kube.name, "forbidden-one", "bad.test", "web"))
    assert proc.returncode != 0
    assert "denied the request" in proc.stderr
    assert "this test forbids Ingresses named forbidden*" in proc.stderr
    assert "E5" in proc.stderr  # the rule id of a failed inline rule
    got = webhook.kube.plane.kubectl("get", "ingress", "-n", webhook.kube.name, "-o", "name")
    assert "forbidden-one" not in got.stdout


def test_a_good_ingress_passes_and_its_warnings_are_printed(webhook: Webhook) -> None:
    good = ingress(webhook.kube.name, "fine", "fine.test", "web")
    proc = webhook.apply(good)
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load(good)
    doc["metadata"]["annotations"] = {"nginx.ingress.kubernetes.io/some-unknown-option": "1"}
    warned = webhook.apply(yaml.safe_dump(doc))
    assert warned.returncode == 0, warned.stderr
    assert "Warning:" in warned.stderr and "some-unknown-option" in warned.stderr


def test_deleting_a_service_the_output_needs_is_denied(webhook: Webhook) -> None:
    proc = webhook.kube.plane.kubectl(
        "delete", "service", "web", "-n", webhook.kube.name, check=False
    )
    assert proc.returncode != 0
    assert "this test needs at least one server line" in proc.stderr


def test_dry_run_gets_the_same_answer_and_no_event(webhook: Webhook) -> None:
    before = len(events(webhook.kube))
    bad = ingress(webhook.kube.name, "forbidden-dry", "bad.test", "web")
    proc = webhook.apply(bad, "--dry-run=server")
    assert proc.returncode != 0 and "this test forbids Ingresses" in proc.stderr
    good = webhook.apply(ingress(webhook.kube.name, "dry", "dry.test", "web"), "--dry-run=server")
    assert good.returncode == 0 and "(server dry run)" in good.stdout
    assert len(events(webhook.kube)) == before


def test_a_config_with_a_template_error_is_refused(webhook: Webhook) -> None:
    doc = json.loads(
        webhook.kube.plane.kubectl(
            "get", "htc", "quickstart", "-n", webhook.kube.name, "-o", "json"
        ).stdout
    )
    doc["spec"]["haproxyConfig"]["template"] = "global\n{% if %}\n"
    for key in ("resourceVersion", "uid", "generation", "creationTimestamp", "managedFields"):
        doc["metadata"].pop(key, None)
    doc.pop("status", None)
    proc = webhook.apply(json.dumps(doc))
    assert proc.returncode != 0
    assert "denied the request" in proc.stderr and "E1" in proc.stderr  # a render/lint rule id
    bad_cel = json.loads(json.dumps(doc))
    bad_cel["spec"]["haproxyConfig"]["template"] = "global\n"
    bad_cel["spec"]["haproxyConfig"]["validate"]["rules"][0]["expression"] = "self.content.("
    proc = webhook.apply(json.dumps(bad_cel))
    assert proc.returncode != 0 and "denied the request" in proc.stderr


def test_malformed_reviews_get_a_400_and_the_server_lives_on(webhook: Webhook) -> None:
    ctx = ssl.create_default_context(cafile=str(webhook.ca))
    url = f"https://127.0.0.1:{webhook.port}/validate"
    for body in (b"not json", b"[]", b'{"request": {}}', b'{"request": {"uid": 7}}'):
        req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, context=ctx, timeout=5)
        assert err.value.code == 400
        assert b"error" in err.value.read()
    ok = webhook.apply(ingress(webhook.kube.name, "after", "after.test", "web"))
    assert ok.returncode == 0, ok.stderr


def test_webhook_down_fail_refuses_and_ignore_admits(webhook: Webhook, tmp_path: Path) -> None:
    webhook.run.stop()
    proc = webhook.apply(ingress(webhook.kube.name, "while-down", "down.test", "web"))
    assert proc.returncode != 0 and "failed calling webhook" in proc.stderr
    doc = json.loads(
        webhook.kube.plane.kubectl(
            "get", "validatingwebhookconfiguration", webhook.name, "-o", "json"
        ).stdout
    )
    doc["webhooks"][0]["failurePolicy"] = "Ignore"
    webhook.kube.plane.kubectl("replace", "-f", "-", input=json.dumps(doc))
    proc = webhook.apply(ingress(webhook.kube.name, "while-down", "down.test", "web"))
    assert proc.returncode == 0, proc.stderr
