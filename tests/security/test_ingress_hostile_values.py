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
from tests.ingress.ingress_kit import PROXY_SSL_ANNOTATIONS

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
    *PROXY_SSL_ANNOTATIONS,
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


def _render(
    ing: dict[str, Any],
    secret_data: dict[str, str] | None = None,
    extra: list[tuple[str, dict[str, Any]]] | None = None,
) -> RenderResult:
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
    for collection, obj in objects + (extra or []):
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


def _assert_inert(result: RenderResult, baseline: set[str] = BASELINE) -> None:
    if not result.ok:
        assert any(d.rule_id in ("E1004", "E1008") for d in result.diagnostics)
        return
    assert _keywords(result) <= baseline
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


# -- proxy-ssl-*: values that reach the server lines ------------------------------------------

NGINX = "nginx.ingress.kubernetes.io/"
PROXY_SSL = {
    "proxy-ssl-secret": "web-ca",
    "proxy-ssl-verify": "on",
    "proxy-ssl-verify-depth": "2",
    "proxy-ssl-name": "web.internal",
    "proxy-ssl-server-name": "on",
    "proxy-ssl-ciphers": "HIGH:!aNULL",
    "proxy-ssl-protocols": "TLSv1.2 TLSv1.3",
}
SERVER_OPTIONS = {
    "ssl": 0,
    "verify": 1,
    "ca-file": 1,
    "crt": 1,
    "ciphers": 1,
    "ssl-min-ver": 1,
    "ssl-max-ver": 1,
    "verifyhost": 1,
    "sni": 1,
}


def _proxy_objects(data: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """The Secret proxy-ssl-secret names, and an endpoint, so that server lines render."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": "web-ca",
            "namespace": "default",
            "labels": {"haproxy-template.dev/proxy-ssl-secret": "true"},
        },
        "data": data,
    }
    slice_ = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-abc",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8443}],
        "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
    }
    return [("proxysecrets", secret), ("endpointslices", slice_)]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


GOOD_PROXY_DATA = {"ca.crt": _b64(PEM), "tls.crt": _b64(PEM), "tls.key": _b64(KEY)}


def _proxy_render(annotations: dict[str, str], data: dict[str, str]) -> RenderResult:
    ing = _ingress()
    ing["metadata"]["annotations"] = {NGINX + "backend-protocol": "HTTPS"} | {
        NGINX + k: v for k, v in annotations.items()
    }
    return _render(ing, extra=_proxy_objects(data))


def _server_lines(result: RenderResult) -> list[list[str]]:
    cfg = result.files.get("haproxy.cfg")
    assert cfg is not None
    found = []
    for line in cfg.content.decode().split("\n"):
        tokens, error = tokenize(line)
        assert error is None, line
        if tokens and tokens[0].value == "server":
            found.append([t.value for t in tokens])
    return found


def _assert_server_options_only(result: RenderResult) -> None:
    """Each server line is `server <name> <address>` and then only TLS options we render,
    each with its one argument: no value added an option of its own."""
    for tokens in _server_lines(result):
        rest = tokens[3:]
        while rest:
            assert rest[0] in SERVER_OPTIONS, tokens
            rest = rest[1 + SERVER_OPTIONS[rest[0]] :]


PROXY_BASELINE = _keywords(_proxy_render(PROXY_SSL, GOOD_PROXY_DATA))


def test_proxy_ssl_benign_values_render_every_option() -> None:
    result = _proxy_render(PROXY_SSL, GOOD_PROXY_DATA)
    assert result.ok, result.diagnostics
    [server] = _server_lines(result)
    assert server[3:] == [
        "ssl",
        "verify",
        "required",
        "ca-file",
        "files/proxy-ca-00.pem",
        "crt",
        "files/proxy-crt-00.pem",
        "ciphers",
        "HIGH:!aNULL",
        "ssl-min-ver",
        "TLSv1.2",
        "ssl-max-ver",
        "TLSv1.3",
        "verifyhost",
        "web.internal",
        "sni",
        "str(web.internal)",
    ]


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
def test_proxy_ssl_annotations_stay_inert(payload: str) -> None:
    """With TLS to the backend and verification on, so that every proxy-ssl value is read,
    each proxy-ssl annotation in turn carries the payload: the render refuses it, or the
    server line keeps only our options (a value that does not fit denies the route)."""
    for name in PROXY_SSL:
        result = _proxy_render(PROXY_SSL | {name: PAYLOADS[payload]}, GOOD_PROXY_DATA)
        _assert_inert(result, PROXY_BASELINE)
        if result.ok:
            _assert_server_options_only(result)
            cfg = result.files.get("haproxy.cfg")
            assert cfg is not None
            # verify-depth is never rendered; any other value that does not fit fails closed
            denied = b"http-request deny status 503" in cfg.content
            assert denied == (name != "proxy-ssl-verify-depth"), (name, payload)


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
def test_proxy_secret_data_never_reaches_the_configuration(payload: str) -> None:
    """A hostile ca.crt, tls.crt or tls.key is refused (the route answers 503, a comment
    names the Secret, not its data) or lands in its own file; haproxy.cfg never carries it."""
    for key in GOOD_PROXY_DATA:
        for value in (payload, _b64(payload), _b64(PEM + payload)):
            data = GOOD_PROXY_DATA | {key: value}
            result = _proxy_render(PROXY_SSL, data)
            _assert_inert(result, PROXY_BASELINE)
            assert result.ok, result.diagnostics
            _assert_server_options_only(result)
            cfg = result.files.get("haproxy.cfg")
            assert cfg is not None and payload.encode() not in cfg.content
            if value == payload and payload.strip(
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
            ):
                # not base64: unusable, so the route fails closed
                assert b"http-request deny status 503" in cfg.content, (key, payload)
