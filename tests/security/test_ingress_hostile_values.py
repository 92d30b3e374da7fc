"""Hostile values in every Ingress field and annotation the quickstart library reads.

The templates alone (no CEL rule) must keep each value inert: either the render refuses it,
or every rendered line still tokenizes, starts with a keyword the benign render also has,
carries no environment expansion, and no payload directive appears as a line of its own.
The CEL rules come on top (refusing such Ingresses earlier); this tests the last layer.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest

from controller.render import Renderer, RenderResult
from controller.resources import Store
from controller.spec.loader import load_config
from controller.validation.syntax.tokenizer import tokenize

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"

PAYLOADS = {
    "newline": "x\n    lua-load /tmp/evil.lua",
    "carriage-return": "x\r    lua-load /tmp/evil.lua",
    "nul": "x\x00lua-load",
    "single-quote": "x' lua-load '/tmp/evil.lua",
    "double-quote": 'x" lua-load "/tmp/evil.lua',
    "hash": "x #lua-load",
    "env": "${HOME}/$PATH",
    "log-format": "%[env(HOME)]",
    "backslash": "x\\ lua-load",
    "unicode-separators": "x\u2028lua-load\u2029\u0085y",
    "very-long": "/" + "a" * 100_000,
    "braces": "x } lua-load { y",
}

ANNOTATIONS = [
    "ssl-redirect",
    "force-ssl-redirect",
    "use-regex",
    "backend-protocol",
    "rewrite-target",
    "app-root",
    "permanent-redirect",
    "permanent-redirect-code",
    "temporal-redirect",
    "temporal-redirect-code",
    "whitelist-source-range",
    "allowlist-source-range",
    "denylist-source-range",
    "proxy-connect-timeout",
    "proxy-read-timeout",
    "proxy-send-timeout",
    "proxy-body-size",
    "limit-rps",
    "limit-connections",
    "enable-cors",
    "cors-allow-origin",
    "cors-allow-methods",
    "cors-allow-headers",
    "cors-expose-headers",
    "cors-allow-credentials",
    "cors-max-age",
    "affinity",
    "session-cookie-name",
    "load-balance",
    "canary",
    "canary-weight",
    "canary-weight-total",
    "canary-by-header",
    "canary-by-header-value",
    "upstream-vhost",
    "x-forwarded-prefix",
    "ssl-passthrough",
    "auth-type",
    "auth-secret",
    "auth-secret-type",
    "auth-realm",
    "custom-headers",
    "configuration-snippet",
    "server-snippet",
]


def _spec() -> Any:
    config, problems = load_config(QUICKSTART / "config.yaml")
    assert config is not None, problems
    return config.spec


SPEC = _spec()
RENDERER = Renderer(SPEC)  # built once: construction compiles every output's template


def _ingress(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "default", "annotations": {}},
        "spec": {
            "ingressClassName": "haproxy",
            "tls": [{"hosts": ["web.local"], "secretName": "web-tls"}],
            "rules": [
                {
                    "host": "web.local",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "web", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ],
        },
    }
    for path, value in over.items():
        *parents, last = path.split(".")
        node = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[last] = value
    return doc


PEM = "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n"


def _render(ing: dict[str, Any], secret_data: dict[str, str] | None = None) -> RenderResult:
    store = Store.from_spec(SPEC)
    objects = [
        ("ingresses", ing),
        (
            "services",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            },
        ),
        (
            "secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/tls",
                "metadata": {"name": "web-tls", "namespace": "default"},
                "data": secret_data
                or {
                    "tls.crt": base64.b64encode(PEM.encode()).decode(),
                    "tls.key": base64.b64encode(KEY.encode()).decode(),
                },
            },
        ),
    ]
    for collection, obj in objects:
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
        if tokens:
            words.add(tokens[0].value)
    return words


BASELINE = _keywords(_render(_ingress()))


def _assert_inert(result: RenderResult) -> None:
    if not result.ok:
        assert any(d.rule_id in ("E1004", "E1008") for d in result.diagnostics)
        return
    assert _keywords(result) <= BASELINE
    for entry in result.files:
        text = entry.content.decode("utf-8", errors="replace")
        for line in text.split("\n"):
            assert not line.lstrip().startswith("lua-load"), (entry.path, line)
        if entry.path.startswith("maps/") or entry.path == "files/crt-list":
            for line in text.splitlines():
                assert "\x00" not in line and "\r" not in line


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
def test_all_annotations_at_once_stay_inert(payload: str) -> None:
    """Fast: every annotation under both prefixes carries the payload in one Ingress."""
    ing = _ingress()
    ing["metadata"]["annotations"] = {
        prefix + a: PAYLOADS[payload]
        for prefix in ("nginx.ingress.kubernetes.io/", "haproxy-template.dev/")
        for a in ANNOTATIONS
    }
    _assert_inert(_render(ing))


@pytest.mark.slow
@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
@pytest.mark.parametrize("annotation", ANNOTATIONS)
@pytest.mark.parametrize("prefix", ["nginx.ingress.kubernetes.io/", "haproxy-template.dev/"])
def test_each_annotation_value_stays_inert(prefix: str, annotation: str, payload: str) -> None:
    ing = _ingress()
    ing["metadata"]["annotations"] = {prefix + annotation: PAYLOADS[payload]}
    _assert_inert(_render(ing))


def test_the_regex_path_and_rewrite_target_are_single_arguments() -> None:
    ing = _ingress()
    ing["metadata"]["annotations"] = {"nginx.ingress.kubernetes.io/rewrite-target": "/$1' x"}
    ing["spec"]["rules"][0]["http"]["paths"][0]["path"] = "/a'(.*)#$"
    result = _render(ing)
    assert result.ok, result.diagnostics
    cfg = result.files.get("haproxy.cfg")
    assert cfg is not None
    [line] = [x for x in cfg.content.decode().split("\n") if "replace-path" in x]
    tokens, error = tokenize(line)
    assert error is None
    assert [t.value for t in tokens] == [
        "http-request",
        "replace-path",
        "(?i)^/a'(.*)#$",
        "/\\1' x",
    ]


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
@pytest.mark.parametrize(
    "field",
    [
        "spec.tls.0.secretName",
        "spec.ingressClassName",
        "metadata.namespace",
        "metadata.name",
    ],
)
def test_fields_stay_inert(field: str, payload: str) -> None:
    _assert_inert(_render(_ingress(**{field: PAYLOADS[payload]})))


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
def test_tls_hosts_and_wildcard_hosts_stay_inert(payload: str) -> None:
    ing = _ingress()
    ing["spec"]["tls"][0]["hosts"] = ["*.web.local", PAYLOADS[payload]]
    _assert_inert(_render(ing))
    ing = _ingress()
    ing["spec"]["rules"][0]["host"] = "*." + PAYLOADS[payload]
    _assert_inert(_render(ing))


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
def test_secret_data_never_reaches_the_configuration(payload: str) -> None:
    """A hostile Secret is unusable (named in the crt-list comment) or lands in its
    certificate file only; it never changes haproxy.cfg beyond the HTTPS bind."""
    encoded = base64.b64encode(payload.encode()).decode()
    for data in (
        {"tls.crt": payload, "tls.key": payload},
        {"tls.crt": encoded, "tls.key": encoded},
        {"tls.crt": base64.b64encode((PEM + payload).encode()).decode(), "tls.key": encoded},
    ):
        result = _render(_ingress(), copy.deepcopy(data))
        _assert_inert(result)
        cfg = result.files.get("haproxy.cfg")
        assert cfg is not None and payload.encode() not in cfg.content
