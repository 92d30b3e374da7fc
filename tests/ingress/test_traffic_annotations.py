"""Migration annotations and TLS end to end: routing and redirects, access lists and limits,
backend-protocol, TLS by SNI with a default certificate, rate and connection limits, CORS,
session affinity, load balancing, canary splits, upstream-vhost and x-forwarded-prefix, ssl-passthrough, basic
authentication, TLS to the backend (proxy-ssl-*), each observed in real requests through HAProxy in front of loopback echo
backends; and the warnings for a Service routed to without a ready endpoint (issue 19, item 7)
for an htpasswd Secret HAProxy cannot fully use; snippets refused while traffic keeps flowing.

Every scenario's manifests (distinct hosts, Ingress and Service names) go into one site, and
one ``htc local`` per HAProxy binary serves them all for the whole module: a start costs
seconds, a scenario's requests far less. Scenarios that change the site (the reload check)
only add to it.
"""

from __future__ import annotations

import asyncio
import base64
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from tests.ingress.conftest import Site, shared_site
from tests.ingress.ingress_kit import (
    NGINX,
    TLS,
    Cluster,
    annotated,
    auth_secret,
    certificate_authority,
    ingress,
    ingress_class,
    issued,
    proxy_secret,
    rule,
    self_signed,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


SCENARIOS: list[Callable[[Cluster, dict[str, TLS]], None]] = []


def scenario(
    setup: Callable[[Cluster, dict[str, TLS]], None],
) -> Callable[[Cluster, dict[str, TLS]], None]:
    """Register a scenario's manifests for the shared site."""
    SCENARIOS.append(setup)
    return setup


def _every_scenario(cluster: Cluster, certs: dict[str, TLS]) -> None:
    # The TLS scenario's fallback; no other scenario depends on the default certificate.
    cluster.extra_context["defaultCertificate"] = "default/fallback-tls"
    cluster.add(ingress_class())
    cluster.service("app")
    for setup in SCENARIOS:
        setup(cluster, certs)


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["2.6", "2.8"])
async def site(request: pytest.FixtureRequest) -> AsyncIterator[Site]:
    """Every scenario of this module, served by one ``htc local`` with the given binary."""
    async with shared_site(request.param, _every_scenario) as served:
        yield served


async def pods(cluster: Cluster, host: str, n: int, **kw: Any) -> Counter[str]:
    """Which pod answered each of ``n`` requests to ``host``."""
    seen: Counter[str] = Counter()
    for _ in range(n):
        r = await cluster.aget(host, **kw)
        assert r.status == 200, (host, r.status, r.body[:200])
        seen[str(r.echo.get("pod"))] += 1
    return seen


@scenario
def _limits(cluster: Cluster, certs: dict[str, TLS]) -> None:
    cluster.service("slow", delay=2.0)
    cluster.add(
        annotated("rps", "rps.test", "app", **{"limit-rps": "3"}),
        annotated("conns", "conns.test", "slow", **{"limit-connections": "2"}),
    )


async def test_rate_and_connection_limits(site: Site) -> None:
    cluster = site.cluster
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


@scenario
def _cors(cluster: Cluster, certs: dict[str, TLS]) -> None:
    cluster.add(
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


async def test_cors(site: Site) -> None:
    cluster = site.cluster
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


@scenario
def _affinity(cluster: Cluster, certs: dict[str, TLS]) -> None:
    cluster.service("pool", pods=3)
    cluster.add(
        annotated("spread", "spread.test", "pool"),
        annotated(
            "sticky", "sticky.test", "pool", affinity="cookie", **{"session-cookie-name": "ROUTE"}
        ),
        annotated("by-source", "source.test", "pool", **{"load-balance": "source"}),
    )


async def test_affinity_and_load_balance(site: Site) -> None:
    cluster = site.cluster
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


@scenario
def _canary(cluster: Cluster, certs: dict[str, TLS]) -> None:
    cluster.service("stable")
    cluster.service("preview")
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


async def test_canary_by_header_and_weight(site: Site) -> None:
    cluster = site.cluster

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


@scenario
def _vhost(cluster: Cluster, certs: dict[str, TLS]) -> None:
    cluster.add(
        annotated(
            "proxied",
            "proxied.test",
            "app",
            **{"upstream-vhost": "internal.local:8080", "x-forwarded-prefix": "/shop"},
        ),
    )


async def test_upstream_vhost_and_forwarded_prefix(site: Site) -> None:
    r = await site.cluster.aget("proxied.test", "/cart")
    assert (r.status, r.echo.get("host"), r.echo.get("path")) == (
        200,
        "internal.local:8080",
        "/cart",
    )
    sent = {k.lower(): v for k, v in r.echo["headers"].items()}
    assert sent.get("x-forwarded-prefix") == "/shop"


@scenario
def _idle_service(cluster: Cluster, certs: dict[str, TLS]) -> None:
    cluster.add(
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
        # An ExternalName Service has no ports: its backend has no server, and the rest
        # of the configuration still deploys.
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "outside", "namespace": "default"},
            "spec": {"type": "ExternalName", "externalName": "outside.invalid"},
        },
        annotated("working", "working.test", "app"),
        annotated("waiting", "waiting.test", "idle"),
        annotated("unresolved", "unresolved.test", "outside"),
    )


async def test_service_without_ready_endpoints_is_a_warning(site: Site) -> None:
    text = site.out.getvalue()
    assert "W5004" in text and "services-have-endpoints" in text, text
    # The first deploy's (a later deploy, by another test, repeats it).
    line = next(x for x in text.splitlines() if "without a ready endpoint" in x)
    assert "Service default/idle port 8080 (no ready endpoint), routed to by Ingress" in line
    assert "default/waiting" in line and "Service default/app" not in line, line
    # The configuration deployed: the other Ingress serves, the idle one answers 503.
    assert (await site.cluster.aget("working.test")).status == 200
    assert (await site.cluster.aget("waiting.test")).status == 503
    assert "Service default/outside port 8080 (no such Service port)" in text, text
    assert (await site.cluster.aget("unresolved.test")).status == 503


@scenario
def _passthrough(cluster: Cluster, certs: dict[str, TLS]) -> None:
    certs["pt"] = backend_cert = self_signed(cluster.root.parent, "pt.test")
    certs["one"] = ours = self_signed(cluster.root.parent, "one.test")
    cluster.service("secure", tls=backend_cert)
    cluster.add(
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


async def test_ssl_passthrough_beside_terminated_tls(site: Site) -> None:
    cluster, out = site.cluster, site.out

    async def check() -> None:
        # The backend's own certificate answers for the passthrough host: HAProxy did not
        # decrypt.
        r = await asyncio.to_thread(cluster.get_tls, "pt.test", ca=site.certs["pt"].cert)
        assert (r.status, r.service) == (200, "secure")
        # Other hosts are terminated by HAProxy, with the client address kept (the allowlist
        # passes).
        r = await asyncio.to_thread(cluster.get_tls, "one.test", ca=site.certs["one"].cert)
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


# Hashes of the password "secret" (made with libxcrypt's crypt(3) and `openssl passwd`).
HASHES = {
    "bcrypt": "$2y$05$5S406iRRwTqSUzC.aYsIpug8xynSSmbZRPe7SfxyT1x5veS9jPREC",
    "sha512": "$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip"
    "/cZ/1GM/O6IND4WQhG.",
    "sha256": "$5$abcdefgh$gruCpC7VkOTspMQTTSAR8mtlO9Upms.fwqE5y16JVM.",
    "yescrypt": "$y$j9T$lmrObRDJ1MQn38ZCNod7z0$Jl2ixCH3Ern4a1E3..DdV4rHo5JSWCJ9SM/sCU3ZCB8",
    "apr1": "$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/",
}


def basic(user: str, password: str = "secret") -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@scenario
def _basic_auth(cluster: Cluster, certs: dict[str, TLS]) -> None:
    htpasswd = "\n".join(
        [
            f"alice:{HASHES['bcrypt']}",
            f"bob:{HASHES['sha512']}",
            f"carol:{HASHES['apr1']}",
            f'mallory":{HASHES["sha512"]}',
            "dave:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=",
        ]
    )
    cluster.add(
        auth_secret("basic-auth", {"auth": htpasswd + "\n"}),
        auth_secret("basic-map", {"erin": HASHES["sha256"], "frank": HASHES["yescrypt"]}),
        auth_secret("unlabelled", {"auth": f"alice:{HASHES['bcrypt']}\n"}, labelled=False),
        annotated(
            "private",
            "private.test",
            "app",
            **{"auth-type": "basic", "auth-secret": "basic-auth", "auth-realm": "Staff only"},
        ),
        annotated(
            "mapped",
            "mapped.test",
            "app",
            **{
                "haproxy-template.dev/auth-type": "basic",
                "haproxy-template.dev/auth-secret": "default/basic-map",
                "haproxy-template.dev/auth-secret-type": "auth-map",
            },
        ),
        annotated(
            "unlabelled",
            "unlabelled.test",
            "app",
            **{"auth-type": "basic", "auth-secret": "unlabelled"},
        ),
        annotated(
            "other-ns",
            "other-ns.test",
            "app",
            **{"auth-type": "basic", "auth-secret": "other/basic-auth"},
        ),
    )


async def test_basic_auth(site: Site) -> None:
    cluster = site.cluster
    # Without credentials: 401 and the realm, from HAProxy (the backend never sees it).
    r = await cluster.aget("private.test")
    assert (r.status, r.echo) == (401, {})
    assert r.headers["www-authenticate"] == 'Basic realm="Staff only"'
    # bcrypt and SHA-512 crypt users get in; a wrong password does not.
    for user in ("alice", "bob"):
        r = await cluster.aget("private.test", headers=basic(user))
        assert (r.status, r.service) == (200, "app"), (user, r.status)
    assert (await cluster.aget("private.test", headers=basic("alice", "wrong"))).status == 401
    # $apr1$, {SHA} and a malformed user name were left out: those users cannot log in.
    for user in ("carol", "dave", 'mallory"'):
        assert (await cluster.aget("private.test", headers=basic(user))).status == 401, user
    # auth-map: each key a user (SHA-256 crypt and yescrypt).
    for user in ("erin", "frank"):
        assert (await cluster.aget("mapped.test", headers=basic(user))).status == 200, user
    assert (await cluster.aget("mapped.test", headers=basic("alice"))).status == 401
    # Fail closed: a Secret without the label is not watched, one in another namespace is
    # refused; both deny every request, even with valid credentials.
    for host in ("unlabelled.test", "other-ns.test"):
        assert (await cluster.aget(host, headers=basic("alice"))).status == 503, host
    # One warning names each Secret, its Ingresses and the lines left out, never their text.
    text = site.out.getvalue()
    line = next(x for x in text.splitlines() if "auth-secrets-usable" in x)
    assert (
        "default/basic-auth, used by Ingress default/private: line 3: Apache MD5" in line
        and "line 4: a user name" in line
        and "line 5: not a bcrypt" in line
    ), line
    assert "default/unlabelled, used by Ingress default/unlabelled: not found" in line, line
    assert "used by Ingress default/other-ns: auth-secret names a Secret in another" in line
    assert HASHES["apr1"] not in text and "mallory" not in text


@scenario
def _custom_headers(cluster: Cluster, certs: dict[str, TLS]) -> None:
    cluster.add(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "security-headers",
                "namespace": "default",
                "labels": {"haproxy-template.dev/custom-headers": "true"},
            },
            "data": {"X-Frame-Options": "DENY", "X-Note": "50% 'off' %[env(HOME)]"},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "unlabelled-headers", "namespace": "default"},
            "data": {"X-Frame-Options": "DENY"},
        },
        annotated("headed", "headed.test", "app", **{"custom-headers": "security-headers"}),
        annotated(
            "unheaded", "unheaded.test", "app", **{"custom-headers": "default/unlabelled-headers"}
        ),
    )


async def test_custom_headers(site: Site) -> None:
    r = await site.cluster.aget("headed.test")
    assert (r.status, r.service) == (200, "app")
    # Set on the answer, taken literally (no log-format expansion).
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["x-note"] == "50% 'off' %[env(HOME)]"
    # A ConfigMap without the label is not watched: the Ingress serves without the headers,
    # and a warning says so.
    r = await site.cluster.aget("unheaded.test")
    assert r.status == 200 and "x-frame-options" not in r.headers
    text = site.out.getvalue()
    line = next(x for x in text.splitlines() if "custom-headers-usable" in x)
    assert "default/unlabelled-headers, used by Ingress default/unheaded: not found" in line


@scenario
def _routing_and_redirects(cluster: Cluster, certs: dict[str, TLS]) -> None:
    cluster.add(
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


async def test_routing_and_redirect_annotations(site: Site) -> None:
    cluster = site.cluster
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


@scenario
def _access_lists(cluster: Cluster, certs: dict[str, TLS]) -> None:
    # "slow" (2 s answers) comes from the limits scenario.
    cluster.add(
        annotated("allowed", "allowed.test", "app", **{"allowlist-source-range": "127.0.0.0/8"}),
        annotated(
            "elsewhere", "elsewhere.test", "app", **{"whitelist-source-range": "10.0.0.0/8, ::1"}
        ),
        annotated("denied", "denied.test", "app", **{"denylist-source-range": "127.0.0.1"}),
        annotated("small", "small.test", "app", **{"proxy-body-size": "1k"}),
        annotated("impatient", "impatient.test", "slow", **{"proxy-read-timeout": "1"}),
    )


async def test_access_and_limit_annotations(site: Site) -> None:
    cluster = site.cluster
    assert (await cluster.aget("allowed.test")).status == 200
    assert (await cluster.aget("elsewhere.test")).status == 403
    assert (await cluster.aget("denied.test")).status == 403
    assert (await cluster.aget("small.test", method="POST", body=b"x" * 1024)).status == 200
    assert (await cluster.aget("small.test", method="POST", body=b"x" * 1025)).status == 413
    assert (await cluster.aget("impatient.test")).status == 504


@scenario
def _backend_https(cluster: Cluster, certs: dict[str, TLS]) -> None:
    tls = self_signed(cluster.root.parent, "backend.internal")
    cluster.service("secure-app", tls=tls)
    cluster.add(
        annotated("tls-backend", "tlsbackend.test", "secure-app", **{"backend-protocol": "HTTPS"})
    )


async def test_backend_protocol_https(site: Site) -> None:
    r = await site.cluster.aget("tlsbackend.test", "/over-tls")
    assert (r.status, r.service, r.echo.get("path")) == (200, "secure-app", "/over-tls")


@scenario
def _tls_default_and_missing(cluster: Cluster, certs: dict[str, TLS]) -> None:
    # one.test and its Secret come from the passthrough scenario.
    certs["fallback"] = fallback = self_signed(cluster.root.parent, "default.test")
    cluster.add(
        fallback.secret("fallback-tls"),
        ingress(
            "broken",
            {
                "tls": [{"hosts": ["broken.test"], "secretName": "missing-tls"}],
                "rules": [rule("broken.test", ("/", "Prefix", "app"))],
            },
        ),
    )


async def test_tls_by_sni_default_certificate_and_missing_secret(site: Site) -> None:
    cluster = site.cluster
    text = site.out.getvalue()
    # The missing Secret is a warning naming it; the configuration deployed.
    assert "W5004" in text and "default/missing-tls (not found)" in text, text
    r = await asyncio.to_thread(cluster.get_tls, "one.test", ca=site.certs["one"].cert)
    assert (r.status, r.service) == (200, "app")
    # The host of the missing Secret is served with the default certificate.
    r = await asyncio.to_thread(
        cluster.get_tls, "broken.test", ca=site.certs["fallback"].cert, sni="default.test"
    )
    assert (r.status, r.service) == (200, "app")
    r = await cluster.aget("broken.test")
    assert (r.status, r.headers.get("location")) == (308, "https://broken.test/")


@scenario
def _proxy_ssl(cluster: Cluster, certs: dict[str, TLS]) -> None:
    # One CA issues the backend's certificate and the client certificate HAProxy presents;
    # the backend accepts only clients with a certificate of that CA. Another CA issues
    # nothing that is used.
    trusted, stranger = certificate_authority("test backend CA"), certificate_authority("other CA")
    where = cluster.root.parent
    server = issued(where, trusted, "mtls.internal")
    client = issued(where, trusted, "haproxy.client")
    cluster.service("mtls-app", tls=server, client_ca=trusted.cert)
    verify = {"backend-protocol": "HTTPS", "proxy-ssl-verify": "on"}
    cluster.add(
        proxy_secret("backend-trust", ca=trusted.cert, client=client),
        proxy_secret("wrong-trust", ca=stranger.cert, client=client),
        proxy_secret("client-only", client=client),
        annotated(
            "verified",
            "verified.test",
            "mtls-app",
            **verify,
            **{
                "proxy-ssl-secret": "default/backend-trust",
                "proxy-ssl-name": "mtls.internal",
                "proxy-ssl-server-name": "on",
                "proxy-ssl-protocols": "TLSv1.2",
                "proxy-ssl-ciphers": "ECDHE-ECDSA-AES256-GCM-SHA384",
            },
        ),
        annotated(
            "ours-tls",
            "ours-tls.test",
            "mtls-app",
            **{"haproxy-template.dev/" + k: v for k, v in verify.items()},
            **{
                "haproxy-template.dev/proxy-ssl-secret": "backend-trust",
                "haproxy-template.dev/proxy-ssl-name": "mtls.internal",
            },
        ),
        annotated(
            "wrong-ca",
            "wrong-ca.test",
            "mtls-app",
            **verify,
            **{"proxy-ssl-secret": "wrong-trust", "proxy-ssl-name": "mtls.internal"},
        ),
        annotated(
            "wrong-name",
            "wrong-name.test",
            "mtls-app",
            **verify,
            **{"proxy-ssl-secret": "backend-trust", "proxy-ssl-name": "other.internal"},
        ),
        annotated(
            "unverified",
            "unverified.test",
            "mtls-app",
            **{"backend-protocol": "HTTPS", "proxy-ssl-secret": "client-only"},
        ),
        annotated("anonymous", "anonymous.test", "mtls-app", **{"backend-protocol": "HTTPS"}),
        annotated(
            "no-ca", "no-ca.test", "mtls-app", **verify, **{"proxy-ssl-secret": "client-only"}
        ),
        annotated("no-secret", "no-secret.test", "mtls-app", **verify),
        annotated(
            "ca-missing", "ca-missing.test", "mtls-app", **verify, **{"proxy-ssl-secret": "gone"}
        ),
    )


async def test_proxy_ssl_to_the_backend(site: Site) -> None:
    cluster = site.cluster
    # The right CA and name: verified, with the client certificate (the backend demands
    # one), the SNI, the protocol and the cipher asked for.
    r = await cluster.aget("verified.test", "/over-mtls")
    assert (r.status, r.service, r.echo.get("path")) == (200, "mtls-app", "/over-mtls"), r.body
    assert r.echo["sni"] == "mtls.internal"
    assert r.echo["tls"] == ["TLSv1.2", "ECDHE-ECDSA-AES256-GCM-SHA384"]
    # Our own prefix works alike; without proxy-ssl-server-name no SNI is sent.
    r = await cluster.aget("ours-tls.test")
    assert (r.status, r.service, r.echo.get("sni")) == (200, "mtls-app", None), r.body
    # Verification off: only the client certificate counts.
    assert (await cluster.aget("unverified.test")).status == 200
    # The backend's certificate from another CA, or for another name: HAProxy refuses the
    # connection, the client gets 503 and the backend never saw the request.
    for host in ("wrong-ca.test", "wrong-name.test"):
        r = await cluster.aget(host)
        assert (r.status, r.echo) == (503, {}), (host, r.status, r.body[:200])
    # No client certificate: the backend refuses HAProxy (with TLS 1.3 after HAProxy's side of
    # the handshake is done, so 502 rather than 503).
    r = await cluster.aget("anonymous.test")
    assert r.status in (502, 503) and not r.echo, (r.status, r.body[:200])
    # Verification asked for without a usable CA: 503 from HAProxy, never unverified, and a
    # warning naming each Ingress and the reason.
    for host in ("no-ca.test", "no-secret.test", "ca-missing.test"):
        r = await cluster.aget(host)
        assert (r.status, r.echo) == (503, {}), (host, r.status, r.body[:200])
    text = site.out.getvalue()
    line = next(x for x in text.splitlines() if "proxy-ssl-usable" in x)
    for expected in (
        "default/no-ca (every request answers 503): Secret default/client-only: "
        "proxy-ssl-verify is on but there is no ca.crt",
        "default/no-secret (every request answers 503): proxy-ssl-verify is on without "
        "proxy-ssl-secret",
        "default/ca-missing (every request answers 503): Secret default/gone not found",
    ):
        assert expected in line, line


@scenario
def _unknown_annotation(cluster: Cluster, certs: dict[str, TLS]) -> None:
    cluster.add(annotated("fine", "fine.test", "app", **{"mirror-target": "http://mirror.test"}))


async def wait_for(site: Site, word: str, seen: int, seconds: float = 15) -> None:
    """Until ``word`` appears in the console output more often than ``seen`` times."""
    deadline = asyncio.get_running_loop().time() + seconds
    while site.out.getvalue().count(word) <= seen:
        assert asyncio.get_running_loop().time() < deadline, site.out.getvalue()
        await asyncio.sleep(0.05)


async def test_snippets_are_refused_and_unknown_annotations_warned(site: Site) -> None:
    """Defined last: from here on the site refuses every change (the snippet stays)."""
    cluster, out = site.cluster, site.out
    assert "W5004" in out.getvalue() and NGINX + "mirror-target" in out.getvalue()
    assert (await cluster.aget("fine.test")).status == 200
    # A snippet arrives: refused with its name, and the last good configuration serves on.
    snippet = annotated(
        "snippet", "snippet.test", "app", **{"configuration-snippet": "lua-load /tmp/x.lua"}
    )
    cluster.docs.append(snippet)
    rejected = out.getvalue().count("rejected")
    cluster.write()
    await wait_for(site, "rejected", rejected)
    text = out.getvalue()
    assert "E5003" in text and NGINX + "configuration-snippet" in text
    assert (await cluster.aget("fine.test")).status == 200
    assert (await cluster.aget("snippet.test")).status == 404
