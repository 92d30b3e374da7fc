"""Traffic annotations end to end: rate and connection limits, CORS, session affinity, load
balancing, canary splits, upstream-vhost and x-forwarded-prefix, each observed in real
requests through HAProxy in front of loopback echo backends; and the warning for a Service
routed to without a ready endpoint (issue 19, item 7)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

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


async def pods(cluster: Cluster, host: str, n: int, **kw: Any) -> Counter[str]:
    """Which pod answered each of ``n`` requests to ``host``."""
    seen: Counter[str] = Counter()
    for _ in range(n):
        r = await cluster.aget(host, **kw)
        assert r.status == 200, (host, r.status, r.body[:200])
        seen[str(r.echo.get("pod"))] += 1
    return seen


async def test_rate_and_connection_limits(cluster: Cluster, serve: Start) -> None:
    cluster.service("app")
    cluster.service("slow", delay=2.0)
    cluster.add(
        ingress_class(),
        annotated("rps", "rps.test", "app", **{"limit-rps": "3"}),
        annotated("conns", "conns.test", "slow", **{"limit-connections": "2"}),
    )
    await serve()
    # limit-rps: within one second the first 3 requests of a client pass, the rest get 503.
    statuses = [(await cluster.aget("rps.test")).status for _ in range(6)]
    assert statuses[:3] == [200, 200, 200] and 503 in statuses[3:], statuses
    # limit-connections: a third request while two are in flight gets 503 at once.
    first = [asyncio.create_task(cluster.aget("conns.test")) for _ in range(2)]
    await asyncio.sleep(0.5)
    third = await cluster.aget("conns.test")
    assert third.status == 503
    assert [(await t).status for t in first] == [200, 200]
    # Once they are done, a new request passes.
    assert (await cluster.aget("conns.test")).status == 200


async def test_cors(cluster: Cluster, serve: Start) -> None:
    cluster.service("app")
    cluster.add(
        ingress_class(),
        annotated(
            "listed",
            "listed.test",
            "app",
            **{
                "enable-cors": "true",
                "cors-allow-origin": "https://a.test, https://b.test:8443",
                "cors-allow-methods": "GET, POST",
                "cors-expose-headers": "X-Id",
                "cors-max-age": "600",
            },
        ),
        annotated("anyone", "anyone.test", "app", **{"haproxy-template.dev/enable-cors": "true"}),
    )
    await serve()
    # A preflight from a listed origin is answered by HAProxy, not the backend.
    pre = await cluster.aget(
        "listed.test", method="OPTIONS", headers={"Origin": "https://b.test:8443"}
    )
    assert pre.status == 204 and not pre.echo
    assert pre.headers["access-control-allow-origin"] == "https://b.test:8443"
    assert pre.headers["access-control-allow-methods"] == "GET, POST"
    assert pre.headers["access-control-max-age"] == "600"
    assert pre.headers["access-control-allow-credentials"] == "true"
    assert "Authorization" in pre.headers["access-control-allow-headers"]
    # A simple request from a listed origin reaches the backend and carries the headers.
    r = await cluster.aget("listed.test", headers={"Origin": "https://a.test"})
    assert (r.status, r.service) == (200, "app")
    assert r.headers["access-control-allow-origin"] == "https://a.test"
    assert r.headers["access-control-expose-headers"] == "X-Id"
    # Another origin gets no CORS header, and its preflight is the backend's business.
    r = await cluster.aget("listed.test", headers={"Origin": "https://evil.test"})
    assert r.status == 200 and "access-control-allow-origin" not in r.headers
    r = await cluster.aget("listed.test", method="OPTIONS", headers={"Origin": "https://evil.test"})
    assert (r.status, r.service) == (200, "app")
    assert "access-control-allow-origin" not in r.headers
    # enable-cors alone: any origin, '*'.
    r = await cluster.aget("anyone.test")
    assert (r.status, r.headers.get("access-control-allow-origin")) == (200, "*")


async def test_affinity_and_load_balance(cluster: Cluster, serve: Start) -> None:
    cluster.service("pool", pods=3)
    cluster.add(
        ingress_class(),
        annotated("spread", "spread.test", "pool"),
        annotated(
            "sticky", "sticky.test", "pool", affinity="cookie", **{"session-cookie-name": "ROUTE"}
        ),
        annotated("by-source", "source.test", "pool", **{"load-balance": "source"}),
    )
    await serve()
    # Round robin (the default) spreads requests over every pod.
    assert len(await pods(cluster, "spread.test", 6)) == 3
    # affinity: cookie. The first answer sets the cookie; with it, every request lands on
    # the pod that set it. The cookie does not carry the pod's address.
    first = await cluster.aget("sticky.test")
    cookie = first.headers["set-cookie"].split(";")[0]
    assert cookie.startswith("ROUTE=") and "127.0.0" not in cookie, cookie
    assert "httponly" in first.headers["set-cookie"].lower()
    stuck = await pods(cluster, "sticky.test", 6, headers={"Cookie": cookie})
    assert list(stuck) == [first.echo["pod"]], stuck
    # load-balance: source. One client address, one pod.
    assert len(await pods(cluster, "source.test", 6)) == 1


async def test_canary_by_header_and_weight(cluster: Cluster, serve: Start) -> None:
    cluster.service("stable")
    cluster.service("preview")
    cluster.add(ingress_class())
    for host, weight in [("header.test", "0"), ("all.test", "100"), ("half.test", "50")]:
        name = host.split(".")[0]
        cluster.add(
            annotated(name, host, "stable"),
            annotated(
                f"{name}-canary",
                host,
                "preview",
                canary="true",
                **{"canary-weight": weight, "canary-by-header": "X-Canary"},
            ),
        )
    cluster.add(
        annotated("valued", "valued.test", "stable"),
        annotated(
            "valued-canary",
            "valued.test",
            "preview",
            canary="true",
            **{"canary-by-header": "X-Env", "canary-by-header-value": "staging"},
        ),
    )
    await serve()

    async def services(host: str, n: int, **headers: str) -> set[str]:
        return {str((await cluster.aget(host, headers=headers)).service) for _ in range(n)}

    assert await services("header.test", 5) == {"stable"}
    assert await services("header.test", 3, **{"X-Canary": "always"}) == {"preview"}
    assert await services("header.test", 3, **{"X-Canary": "never"}) == {"stable"}
    assert await services("all.test", 5) == {"preview"}
    assert await services("all.test", 3, **{"X-Canary": "never"}) == {"stable"}
    # 50 %: 40 requests see both (all alike has a probability of 2^-39).
    assert await services("half.test", 40) == {"stable", "preview"}
    assert await services("valued.test", 3, **{"X-Env": "staging"}) == {"preview"}
    assert await services("valued.test", 3, **{"X-Env": "prod"}) == {"stable"}


async def test_upstream_vhost_and_forwarded_prefix(cluster: Cluster, serve: Start) -> None:
    cluster.service("app")
    cluster.add(
        ingress_class(),
        annotated(
            "proxied",
            "proxied.test",
            "app",
            **{"upstream-vhost": "internal.local:8080", "x-forwarded-prefix": "/shop"},
        ),
    )
    await serve()
    r = await cluster.aget("proxied.test", "/cart")
    assert (r.status, r.echo.get("host"), r.echo.get("path")) == (
        200,
        "internal.local:8080",
        "/cart",
    )
    sent = {k.lower(): v for k, v in r.echo["headers"].items()}
    assert sent.get("x-forwarded-prefix") == "/shop"


async def test_service_without_ready_endpoints_is_a_warning(cluster: Cluster, serve: Start) -> None:
    cluster.service("app")
    cluster.add(
        ingress_class(),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "idle", "namespace": "default"},
            "spec": {"ports": [{"name": "http", "port": 8080, "targetPort": 9}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "idle-abcde",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "idle"},
            },
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 9, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["127.0.0.99"], "conditions": {"ready": False}}],
        },
        annotated("working", "working.test", "app"),
        annotated("waiting", "waiting.test", "idle"),
    )
    out = await serve()
    text = out.getvalue()
    assert "W5004" in text and "services-have-endpoints" in text, text
    assert (
        "Service default/idle port 8080 (no ready endpoint), routed to by Ingress default/waiting"
        in text
    ), text
    assert "Service default/app" not in text
    # The configuration deployed: the other Ingress serves, the idle one answers 503.
    assert (await cluster.aget("working.test")).status == 200
    assert (await cluster.aget("waiting.test")).status == 503


async def test_ssl_passthrough_beside_terminated_tls(cluster: Cluster, serve: Start) -> None:
    backend_cert = self_signed(cluster.root.parent, "pt.test")
    ours = self_signed(cluster.root.parent, "one.test")
    cluster.service("app")
    cluster.service("secure", tls=backend_cert)
    cluster.add(
        ingress_class(),
        ours.secret("one-tls"),
        annotated("pt", "pt.test", "secure", **{"ssl-passthrough": "true"}),
        ingress(
            "one",
            {
                "tls": [{"hosts": ["one.test"], "secretName": "one-tls"}],
                "rules": [rule("one.test", ("/", "Prefix", "app"))],
            },
            **{NGINX + "allowlist-source-range": "127.0.0.1"},
        ),
    )
    out = await serve()

    async def check() -> None:
        # The backend's own certificate answers for the passthrough host: HAProxy did not
        # decrypt.
        r = await asyncio.to_thread(cluster.get_tls, "pt.test", ca=backend_cert.cert)
        assert (r.status, r.service) == (200, "secure")
        # Other hosts are terminated by HAProxy, with the client address kept (the allowlist
        # passes).
        r = await asyncio.to_thread(cluster.get_tls, "one.test", ca=ours.cert)
        assert (r.status, r.service) == (200, "app")

    await check()
    # A change reloads HAProxy; the internal socket of the HTTPS bind survives the reload.
    deploys = out.getvalue().count("deployed")
    cluster.docs.append(annotated("later", "later.test", "app"))
    cluster.write()
    deadline = asyncio.get_running_loop().time() + 15
    while out.getvalue().count("deployed") == deploys:
        assert asyncio.get_running_loop().time() < deadline, out.getvalue()
        await asyncio.sleep(0.05)
    assert (await cluster.aget("later.test")).status == 200
    await check()
