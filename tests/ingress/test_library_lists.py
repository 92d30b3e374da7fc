"""The quickstart library names its supported annotations in several places that CEL and
Jinja2 cannot share (the pattern map of the rule annotation-values and of its message, the
lists of the rule unknown-annotations, ingress-facts' _SUPPORTED), and its certificate slots
twice (routing's `slots` and the outputs under `certificates`). These tests hold each set
equal, so an annotation cannot be rendered without a pattern or warned about while served."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import yaml
from annotated_types import MaxLen

from controller.cli.inputs import load_inputs, render_inputs
from controller.spec.models import HAProxyTemplateConfigSpec
from tests.ingress.ingress_kit import NGINX, QUICKSTART, ingress, rule, self_signed

SPEC: dict[str, Any] = yaml.safe_load(QUICKSTART.read_text())["spec"]
RULES = {r["name"]: r for r in SPEC["watchedResources"]["ingresses"]["validate"]["rules"]}
ROUTING: str = SPEC["templateSnippets"]["routing"]["template"]
FACTS: str = SPEC["templateSnippets"]["ingress-facts"]["template"]


def pattern_keys(text: str) -> set[str]:
    """The keys of the CEL map literal `{'name': 'pattern', ...}` in ``text``."""
    [body] = re.findall(r"\{('ssl-redirect'.*?)\}\[\?", text, re.S)
    return set(re.findall(r"'([a-z-]+)': '", body))


def listed(text: str) -> list[set[str]]:
    """Every CEL list literal of annotation names in ``text``."""
    return [
        set(re.findall(r"'([a-z-]+)'", m))
        for m in re.findall(r"\[('ssl-redirect'.*?)\]", text, re.S)
    ]


def test_every_supported_annotation_has_a_pattern_and_is_not_warned_about() -> None:
    [supported_text] = re.findall(r"\{% set _SUPPORTED = \[(.*?)\] %\}", FACTS, re.S)
    supported = set(re.findall(r"'([a-z-]+)'", supported_text)) - {"backend-snippet"}
    values = RULES["annotation-values"]
    assert pattern_keys(values["expression"]) == supported
    assert pattern_keys(values["messageExpression"]) == supported
    unknown = RULES["unknown-annotations"]
    assert listed(unknown["expression"]) == [supported]
    assert listed(unknown["messageExpression"]) == [supported]


def test_certificate_slots_match_the_certificate_outputs() -> None:
    [slots] = re.findall(r"\{% set slots = (\d+) %\}", ROUTING)
    [limit] = [
        m.max_length
        for m in HAProxyTemplateConfigSpec.model_fields["certificates"].metadata
        if isinstance(m, MaxLen)
    ]
    names = sorted(SPEC["certificates"])
    assert len(names) == int(slots) == limit  # as many slots as the spec allows
    assert names == sorted(f"tls-{n:02d}.pem" for n in range(limit))
    for n, name in enumerate(sorted(names, key=lambda x: int(x[4:-4]))):
        assert f"path_for('cert', '{name}')" in SPEC["certificates"][name]["when"]
        assert f"{{% set slot = {n} %}}" in SPEC["certificates"][name]["template"]


def test_secrets_beyond_the_last_slot_are_reported(tmp_path: Path) -> None:
    """258 usable TLS Secrets: 256 are served, one file each; the other two are named in the
    crt-list comment that the warning rule tls-secrets-usable reports."""
    tls = self_signed(tmp_path, "many.test")
    docs: list[dict[str, Any]] = [tls.secret(f"s-{n:03d}") for n in range(258)]
    docs.append(
        ingress(
            "many",
            {
                "ingressClassName": "haproxy",
                "tls": [{"hosts": [f"h{n}.test"], "secretName": f"s-{n:03d}"} for n in range(258)],
                "rules": [rule("h0.test", ("/", "Prefix", "app"))],
            },
        )
    )
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all(docs))
    r = render_inputs(load_inputs(QUICKSTART, [tmp_path / "objects.yaml"]))
    assert r.ok, r.diagnostics
    certs = sorted(f.path for f in r.files if f.path.startswith("certs/"))
    assert len(certs) == 256
    crt_list = next(f.content.decode() for f in r.files if f.path == "files/crt-list")
    for n in (256, 257):
        assert (
            f"# unusable TLS Secret default/s-{n} (all 256 certificate slots are in use), "
            "used by default/many" in crt_list
        )
    assert crt_list.count("certs/tls-") == 257  # the default certificate's line, then 256


def test_proxy_ssl_slots_match_the_file_outputs() -> None:
    """routing's `proxy_slots` and the proxy-ca-NN.pem / proxy-crt-NN.pem outputs agree, and
    each slot's `when` and template name that slot."""
    [slots] = re.findall(r"\{% set proxy_slots = (\d+) %\}", ROUTING)
    for kind in ("proxy-ca", "proxy-crt"):
        names = sorted(n for n in SPEC["files"] if n.startswith(kind + "-"))
        assert names == [f"{kind}-{n:02d}.pem" for n in range(int(slots))]
        for name in names:
            assert f"path_for('file', '{name}')" in SPEC["files"][name]["when"]
            assert f"{{% set slot = '{name}' %}}" in SPEC["files"][name]["template"]


def test_proxy_ssl_secrets_beyond_the_last_slot_deny(tmp_path: Path) -> None:
    """33 Ingresses verifying with 33 CA Secrets: 32 get a CA file each; the last one has no
    slot, so it answers 503 (never unverified) and the warning proxy-ssl-usable names it."""
    tls = self_signed(tmp_path, "ca.test")
    pem = base64.b64encode(tls.cert.encode()).decode()
    docs: list[dict[str, Any]] = []
    for n in range(33):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": f"ca-{n:02d}",
                    "namespace": "default",
                    "labels": {"haproxy-template.dev/proxy-ssl-secret": "true"},
                },
                "type": "Opaque",
                "data": {"ca.crt": pem},
            }
        )
        docs.append(
            ingress(
                f"v-{n:02d}",
                {
                    "ingressClassName": "haproxy",
                    "rules": [rule(f"v{n}.test", ("/", "Prefix", "app"))],
                },
                **{
                    NGINX + "backend-protocol": "HTTPS",
                    NGINX + "proxy-ssl-secret": f"ca-{n:02d}",
                    NGINX + "proxy-ssl-verify": "on",
                },
            )
        )
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all(docs))
    r = render_inputs(load_inputs(QUICKSTART, [tmp_path / "objects.yaml"]))
    assert r.ok, r.diagnostics
    cas = sorted(f.path for f in r.files if f.path.startswith("files/proxy-ca-"))
    assert cas == [f"files/proxy-ca-{n:02d}.pem" for n in range(32)]
    cfg = next(f.content.decode() for f in r.files if f.path == "haproxy.cfg")
    assert (
        "# unusable proxy-ssl settings of Ingress default/v-32 (every request answers 503): "
        "Secret default/ca-32: all 32 CA slots are in use" in cfg
    )
    last = cfg[cfg.index("backend rt_default_v-32_0_0") :]
    assert "http-request deny status 503" in last.split("\nbackend ")[0]
