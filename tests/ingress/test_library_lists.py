"""The quickstart library names its supported annotations in several places that CEL and
Jinja2 cannot share (the pattern map of the rule annotation-values and of its message, the
lists of the rule unknown-annotations, the template's SUPPORTED), and its certificate slots
twice (routing's `slots` and the outputs under `certificates`). These tests hold each set
equal, so an annotation cannot be rendered without a pattern or warned about while served."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from annotated_types import MaxLen

from controller.cli.inputs import load_inputs, render_inputs
from controller.spec.models import HAProxyTemplateConfigSpec
from tests.ingress.ingress_kit import QUICKSTART, ingress, rule, self_signed

SPEC: dict[str, Any] = yaml.safe_load(QUICKSTART.read_text())["spec"]
RULES = {r["name"]: r for r in SPEC["watchedResources"]["ingresses"]["validate"]["rules"]}
ROUTING: str = SPEC["templateSnippets"]["routing"]["template"]


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
    [supported_text] = re.findall(r"\{% set SUPPORTED = \[(.*?)\] %\}", ROUTING, re.S)
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
