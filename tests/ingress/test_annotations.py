"""Migration annotations and TLS end to end: what each does to real requests through HAProxy,
and that refusals and warnings reach the operator while traffic keeps flowing."""

from __future__ import annotations

import asyncio

from tests.ingress.ingress_kit import (
    NGINX,
    Cluster,
    Start,
    annotated,
    ingress,
    ingress_class,
    rule,
    self_signed,
)


async def test_routing_and_redirect_annotations(cluster: Cluster, serve: Start) -> None:
    cluster.service("app")
    cluster.add(
        ingress_class(),
        annotated("rewrite", "rewrite.test", "app", "/api(/|$)(.*)", **{"rewrite-target": "/$2"}),
        annotated("approot", "approot.test", "app", **{"app-root": "/app"}),
        annotated(
            "moved",
            "moved.test",
            "app",
            **{"permanent-redirect": "https://example.com/new", "permanent-redirect-code": "308"},
        ),
        annotated("gone", "gone.test", "app", **{"temporal-redirect": "/elsewhere"}),
        annotated("own-prefix", "own.test", "app", **{"haproxy-template.dev/app-root": "/ours"}),
    )
    await serve()
    # rewrite-target with captures; use-regex matching is case-insensitive
    r = await cluster.aget("rewrite.test", "/API/users/7")
    assert (r.status, r.echo.get("path")) == (200, "/users/7")
    r = await cluster.aget("rewrite.test", "/api")
    assert (r.status, r.echo.get("path")) == (200, "/")
    r = await cluster.aget("approot.test", "/")
    assert (r.status, r.headers.get("location")) == (302, "/app")
    r = await cluster.aget("approot.test", "/app")
    assert (r.status, r.echo.get("path")) == (200, "/app")
    r = await cluster.aget("moved.test", "/x")
    assert (r.status, r.headers.get("location")) == (308, "https://example.com/new")
    r = await cluster.aget("gone.test", "/x")
    assert (r.status, r.headers.get("location")) == (302, "/elsewhere")
    r = await cluster.aget("own.test", "/")
    assert (r.status, r.headers.get("location")) == (302, "/ours")


async def test_access_and_limit_annotations(cluster: Cluster, serve: Start) -> None:
    cluster.service("app")
    cluster.service("slow", delay=2.0)
    cluster.add(
        ingress_class(),
        annotated("allowed", "allowed.test", "app", **{"allowlist-source-range": "127.0.0.0/8"}),
        annotated(
            "elsewhere", "elsewhere.test", "app", **{"whitelist-source-range": "10.0.0.0/8, ::1"}
        ),
        annotated("denied", "denied.test", "app", **{"denylist-source-range": "127.0.0.1"}),
        annotated("small", "small.test", "app", **{"proxy-body-size": "1k"}),
        annotated("impatient", "impatient.test", "slow", **{"proxy-read-timeout": "1"}),
    )
    await serve()
    assert (await cluster.aget("allowed.test")).status == 200
    assert (await cluster.aget("elsewhere.test")).status == 403
    assert (await cluster.aget("denied.test")).status == 403
    assert (await cluster.aget("small.test", method="POST", body=b"x" * 1024)).status == 200
    assert (await cluster.aget("small.test", method="POST", body=b"x" * 1025)).status == 413
    assert (await cluster.aget("impatient.test")).status == 504


async def test_backend_protocol_https(cluster: Cluster, serve: Start) -> None:
    tls = self_signed(cluster.root.parent, "backend.internal")
    cluster.service("secure-app", tls=tls)
    cluster.add(
        ingress_class(),
        annotated("tls-backend", "tlsbackend.test", "secure-app", **{"backend-protocol": "HTTPS"}),
    )
    await serve()
    r = await cluster.aget("tlsbackend.test", "/over-tls")
    assert (r.status, r.service, r.echo.get("path")) == (200, "secure-app", "/over-tls")


async def test_tls_by_sni_default_certificate_and_missing_secret(
    cluster: Cluster, serve: Start
) -> None:
    one = self_signed(cluster.root.parent, "one.test")
    fallback = self_signed(cluster.root.parent, "default.test")
    cluster.service("app")
    cluster.add(
        ingress_class(),
        one.secret("one-tls"),
        fallback.secret("fallback-tls"),
        ingress(
            "one",
            {
                "tls": [{"hosts": ["one.test"], "secretName": "one-tls"}],
                "rules": [rule("one.test", ("/", "Prefix", "app"))],
            },
        ),
        ingress(
            "broken",
            {
                "tls": [{"hosts": ["broken.test"], "secretName": "missing-tls"}],
                "rules": [rule("broken.test", ("/", "Prefix", "app"))],
            },
        ),
    )
    out = await serve(defaultCertificate="default/fallback-tls")
    text = out.getvalue()
    # The missing Secret is a warning naming it; the configuration deployed.
    assert "W5004" in text and "default/missing-tls (not found)" in text, text
    r = await asyncio.to_thread(cluster.get_tls, "one.test", ca=one.cert)
    assert (r.status, r.service) == (200, "app")
    # The host of the missing Secret is served with the default certificate.
    r = await asyncio.to_thread(
        cluster.get_tls, "broken.test", ca=fallback.cert, sni="default.test"
    )
    assert (r.status, r.service) == (200, "app")
    r = await cluster.aget("broken.test")
    assert (r.status, r.headers.get("location")) == (308, "https://broken.test/")


async def test_snippets_are_refused_and_unknown_annotations_warned(
    cluster: Cluster, serve: Start
) -> None:
    cluster.service("app")
    cluster.add(
        ingress_class(),
        annotated("fine", "fine.test", "app", **{"mirror-target": "http://mirror.test"}),
    )
    out = await serve()
    assert "W5004" in out.getvalue() and NGINX + "mirror-target" in out.getvalue()
    assert (await cluster.aget("fine.test")).status == 200
    # A snippet arrives: refused with its name, and the last good configuration serves on.
    cluster.docs.append(
        annotated(
            "snippet", "snippet.test", "app", **{"configuration-snippet": "lua-load /tmp/x.lua"}
        )
    )
    cluster.write()
    deadline = asyncio.get_running_loop().time() + 10
    while "rejected" not in out.getvalue():
        assert asyncio.get_running_loop().time() < deadline, out.getvalue()
        await asyncio.sleep(0.05)
    text = out.getvalue()
    assert "E5003" in text and NGINX + "configuration-snippet" in text
    assert (await cluster.aget("fine.test")).status == 200
    assert (await cluster.aget("snippet.test")).status == 404
