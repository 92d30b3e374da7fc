"""Hostile values in the annotations that act only beside another one (cors-* with
enable-cors, session-cookie-name with affinity, canary-* on a canary Ingress): with their
companion switched on, the templates alone (no CEL rule) keep each value inert. Every line
still tokenizes, carries no environment expansion, starts with a keyword the benign render
with the same companions has, and no payload directive is a line of its own. The CEL rule
annotation-values then refuses each such value, naming the annotation (last test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.render import Renderer, RenderResult
from controller.resources import Store
from controller.spec.loader import load_config
from controller.validation.syntax.tokenizer import tokenize
from tests.ingress.ingress_kit import NGINX, QUICKSTART

PAYLOADS = {
    "newline": "x\n    lua-load /tmp/evil.lua",
    "single-quote": "x' lua-load '/tmp/evil.lua",
    "double-quote": 'x" lua-load "/tmp/evil.lua',
    "hash": "x #lua-load",
    "env": "${HOME}/$PATH",
    "log-format": "%[env(HOME)]",
    "braces": "x } lua-load { y",
    "flag": "-f /etc/passwd",
    "unicode-separators": "x\u2028lua-load\u2029\u0085y",
    "very-long": "a" * 100_000,
}

# Groups of annotations that act together: (the companions that make them act, the
# annotations that carry the payload, all at once).
GROUPS: dict[str, tuple[dict[str, str], list[str]]] = {
    "cors": (
        {"enable-cors": "true"},
        [
            "cors-allow-origin",
            "cors-allow-methods",
            "cors-allow-headers",
            "cors-expose-headers",
            "cors-max-age",
            "cors-allow-credentials",
        ],
    ),
    "affinity": ({"affinity": "cookie"}, ["session-cookie-name", "load-balance"]),
    "canary-header": ({"canary": "true"}, ["canary-by-header", "canary-weight-total"]),
    "canary-value": (
        {"canary": "true", "canary-by-header": "X-Canary", "canary-weight": "10"},
        ["canary-by-header-value"],
    ),
    "canary-weight": ({"canary": "true", "canary-weight-total": "50"}, ["canary-weight"]),
    "plain": (
        {},
        [
            "upstream-vhost",
            "x-forwarded-prefix",
            "limit-rps",
            "limit-connections",
            "ssl-passthrough",
        ],
    ),
}

HTC = str(Path(sys.executable).with_name("htc"))
SPEC = load_config(QUICKSTART)[0].spec  # type: ignore[union-attr]
RENDERER = Renderer(SPEC)  # built once: construction compiles every output's template


def _ingress(name: str, service: str, annotations: dict[str, str]) -> dict[str, Any]:
    path = {"path": "/", "pathType": "Prefix"}
    path["backend"] = {"service": {"name": service, "port": {"number": 80}}}  # type: ignore[assignment]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {NGINX + k: v for k, v in annotations.items()},
        },
        "spec": {
            "ingressClassName": "haproxy",
            "rules": [{"host": "web.local", "http": {"paths": [path]}}],
        },
    }


def _objects(annotations: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    canary = annotations.get("canary") == "true"
    objs = [("ingresses", _ingress("web", "web", {} if canary else annotations))]
    if canary:
        objs.append(("ingresses", _ingress("web-canary", "preview", annotations)))
    for svc in ("web", "preview"):
        objs.append(
            (
                "services",
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": svc, "namespace": "default"},
                    "spec": {"ports": [{"name": "http", "port": 80}]},
                },
            )
        )
    return objs


def _render(annotations: dict[str, str]) -> RenderResult:
    store = Store.from_spec(SPEC)
    for collection, obj in _objects(annotations):
        store.apply(collection, obj)
    return RENDERER.render(store.snapshot())


def _keywords(result: RenderResult) -> set[str]:
    cfg = result.files.get("haproxy.cfg")
    assert cfg is not None
    words: set[str] = set()
    for n, line in enumerate(cfg.content.decode().split("\n"), 1):
        tokens, error = tokenize(line, line_no=n)
        assert error is None, (line, error)
        assert not any(t.has_env for t in tokens), line
        assert not line.lstrip().startswith("lua-load"), line
        if tokens:
            words.add(tokens[0].value)
    return words


@pytest.mark.parametrize("group", sorted(GROUPS))
@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_values_stay_inert_beside_their_companions(group: str, payload: str) -> None:
    companions, carriers = GROUPS[group]
    benign = _render(companions)
    assert benign.ok, benign.diagnostics
    result = _render({**companions, **dict.fromkeys(carriers, PAYLOADS[payload])})
    if not result.ok:
        assert any(d.rule_id in ("E1004", "E1008") for d in result.diagnostics)
        return
    assert _keywords(result) <= _keywords(benign)
    for entry in result.files:
        if entry.path.startswith("maps/"):
            for line in entry.content.decode(errors="replace").splitlines():
                assert "lua-load" not in line.split(" ", 1)[0]


def test_the_rule_refuses_them_naming_each_annotation(tmp_path: Path) -> None:
    """Through `htc validate` (the rule is deferred: it reads extraContext): one Ingress with
    every annotation above set to the payload is refused by one finding naming each."""
    carriers = sorted({a for _, names in GROUPS.values() for a in names})
    ing = _ingress("web", "web", dict.fromkeys(carriers, PAYLOADS["braces"]))
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump(ing))
    done = subprocess.run(
        [HTC, "validate", str(QUICKSTART), "-r", str(tmp_path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    report = json.loads(done.stdout)
    [finding] = [d for d in report["diagnostics"] if d["ruleId"] == "E5003"]
    assert "annotation-values on default/web" in finding["message"]
    for annotation in carriers:
        assert NGINX + annotation in finding["message"]
