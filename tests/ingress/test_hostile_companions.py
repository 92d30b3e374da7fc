"""Hostile values in the annotations that act only beside another one (cors-* with
enable-cors, session-cookie-name with affinity, canary-* on a canary Ingress, auth-* with
auth-type, proxy-ssl-* with backend-protocol HTTPS): with their companion switched on, the templates alone (no CEL rule) keep each
value inert. Every line still tokenizes, carries no environment expansion, starts with a
keyword the benign render with the same companions has, and no payload directive is a line
of its own. The CEL rule annotation-values then refuses each such value, naming the
annotation. The same holds for hostile content of an htpasswd Secret (last test), which no
CEL rule guards: the template alone keeps it out of haproxy.cfg."""

from __future__ import annotations

import json
import re
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
from tests.ingress.ingress_kit import NGINX, PROXY_SSL_ANNOTATIONS, QUICKSTART, auth_secret

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
    "auth": ({"auth-type": "basic"}, ["auth-secret", "auth-secret-type", "auth-realm"]),
    "proxy-ssl": ({"backend-protocol": "HTTPS"}, PROXY_SSL_ANNOTATIONS),
    "plain": (
        {},
        [
            "upstream-vhost",
            "x-forwarded-prefix",
            "limit-rps",
            "limit-connections",
            "ssl-passthrough",
            "custom-headers",
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
    """Through `htc validate` (the rule is deferred: it reads extraContext): two Ingresses
    with every annotation above set to the payload (half each: a finding's message is capped
    at 1,024 characters) are refused by one finding each, naming each of its annotations."""
    carriers = sorted({a for _, names in GROUPS.values() for a in names})
    halves = {"web": carriers[::2], "web2": carriers[1::2]}
    docs = [
        _ingress(name, "web", dict.fromkeys(h, PAYLOADS["braces"])) for name, h in halves.items()
    ]
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all(docs))
    done = subprocess.run(
        [HTC, "validate", str(QUICKSTART), "-r", str(tmp_path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    report = json.loads(done.stdout)
    findings = [d["message"] for d in report["diagnostics"] if d["ruleId"] == "E5003"]
    for name, half in halves.items():
        [message] = [m for m in findings if f"annotation-values on default/{name}:" in m]
        for annotation in half:
            assert NGINX + annotation in message, (annotation, message)


# -- htpasswd Secrets (auth-type: basic) --------------------------------------------------------

SHA512 = "$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG."

# Where a payload goes in the Secret: each gives the Secret's data (values still plain text,
# encoded below unless the place is the raw base64 itself) and its auth-secret-type.
PLACES: dict[str, Any] = {
    "user": lambda p: ({"auth": f"{p}:{SHA512}\n"}, "auth-file"),
    "hash": lambda p: ({"auth": f"alice:{p}\n"}, "auth-file"),
    "hash-after-prefix": lambda p: ({"auth": f"alice:$6${p}\n"}, "auth-file"),
    "line-after-user": lambda p: ({"auth": f"alice:{SHA512}\n{p}\n"}, "auth-file"),
    "map-key": lambda p: ({p: SHA512}, "auth-map"),
    "map-value": lambda p: ({"alice": p}, "auth-map"),
}


def _auth_objects(data: dict[str, str], kind: str, raw: bool = False) -> list[tuple[str, Any]]:
    annotations = {"auth-type": "basic", "auth-secret": "basic-auth", "auth-realm": "Staff"}
    if kind != "auth-file":
        annotations["auth-secret-type"] = kind
    secret = auth_secret("basic-auth", data, encode=not raw)
    return [("authsecrets", secret), *_objects(annotations)]


def _render_objects(objs: list[tuple[str, Any]]) -> RenderResult:
    store = Store.from_spec(SPEC)
    for collection, obj in objs:
        store.apply(collection, obj)
    return RENDERER.render(store.snapshot())


@pytest.mark.parametrize("place", [*sorted(PLACES), "raw-base64"])
@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_hostile_htpasswd_secrets_stay_inert(place: str, payload: str) -> None:
    """A payload anywhere in the Secret: the render succeeds, the entry is left out and
    named by number only, the other users stay, and no payload text reaches haproxy.cfg."""
    benign = _render_objects(_auth_objects({"auth": f"alice:{SHA512}\n"}, "auth-file"))
    assert benign.ok, benign.diagnostics
    if place == "raw-base64":
        objs = _auth_objects({"auth": PAYLOADS[payload]}, "auth-file", raw=True)
    else:
        objs = _auth_objects(*PLACES[place](PAYLOADS[payload]))
    result = _render_objects(objs)
    assert result.ok, result.diagnostics
    assert _keywords(result) <= _keywords(benign)
    cfg = next(f.content.decode() for f in result.files if f.path == "haproxy.cfg")
    for marker in ("lua-load", "HOME", "PATH", "passwd", "a" * 100, "\u2028"):
        assert marker not in cfg, marker
    kind = " (auth-map)" if place.startswith("map-") else ""
    assert (
        f"\n# unusable basic-auth Secret default/basic-auth{kind}, used by Ingress default/web: "
        in cfg
    )
    # Every user line left is a plain name and a crypt(3) hash, single-quoted; with none
    # left, every request is denied. alice stays when the payload was on a line of its own
    # (and the Secret is not over the size limit).
    users = [x for x in cfg.splitlines() if x.startswith("    user ")]
    for x in users:
        assert re.fullmatch(
            r"    user [A-Za-z0-9._@+-]{1,64} password '\$(1|5|6|y|2[aby])\$[A-Za-z0-9./$=]*'", x
        ), x
    assert bool(users) != ("    http-request deny status 503\n" in cfg)
    if place == "line-after-user" and payload != "very-long":
        assert f"    user alice password '{SHA512}'" in users


# -- custom-headers ConfigMaps ----------------------------------------------------------------


@pytest.mark.parametrize("place", ["key", "value"])
@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_hostile_header_configmaps_stay_inert(place: str, payload: str) -> None:
    """A payload as a header name is left out; as a value it is either left out (not
    printable ASCII, too long) or one quoted argument of `http-response set-header`."""
    data = {PAYLOADS[payload]: "1"} if place == "key" else {"X-Test": PAYLOADS[payload]}
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "headers", "namespace": "default"},
        "data": {"X-Safe": "yes", **data},
    }
    result = _render_objects([("headermaps", configmap), *_objects({"custom-headers": "headers"})])
    assert result.ok, result.diagnostics
    benign = _render_objects(
        [
            ("headermaps", {**configmap, "data": {"X-Safe": "yes"}}),
            *_objects({"custom-headers": "headers"}),
        ]
    )
    assert _keywords(result) <= _keywords(benign)
    cfg = next(f.content.decode() for f in result.files if f.path == "haproxy.cfg")
    lines = [x for x in cfg.split("\n") if x.startswith("    http-response set-header ")]
    assert "    http-response set-header X-Safe yes" in lines
    for n, x in enumerate(lines, 1):
        tokens, error = tokenize(x, line_no=n)
        assert error is None and len(tokens) == 4, x
    if place == "key" or len(lines) == 1:
        assert len(lines) == 1 and "# unusable custom-headers ConfigMap default/headers" in cfg
