"""The Kubernetes Ingress conformance scenarios, as our own tests, through a real HAProxy.

The behaviour comes from the features of kubernetes-sigs/ingress-controller-conformance
(default_backend, host_rules, ingress_class, load_balancing, path_rules); the Ingresses,
requests and expectations are written here. Like the suite, the Ingresses name no class: the
default IngressClass (ours) takes them. The suite's "Ingress status shows an address" steps
belong to ``htc run`` (issue 17, item 6) and are not here.

Each test checks every scenario of one feature, reporting all mismatches at once. The
features share two sites (``conftest.shared_site``), each served once per binary: one whose
Ingresses name no defaultBackend (host_rules, ingress_class, path_rules: unknown hosts and
paths must get 404 there) and one with the defaultBackend of default_backend and
load_balancing (both send everything to echo-service, with ten pods).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from tests.ingress.conftest import Site, shared_site
from tests.ingress.ingress_kit import (
    TLS,
    Cluster,
    Reply,
    backend,
    ingress,
    ingress_class,
    rule,
    self_signed,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def check(
    failures: list[str], what: str, reply: Reply, status: int, service: str | None = None
) -> None:
    if reply.status != status:
        failures.append(f"{what}: status {reply.status}, expected {status}: {reply.body[:200]}")
    elif service is not None and reply.service != service:
        failures.append(f"{what}: served by {reply.service!r}, expected {service!r}")


async def run(*checks: Callable[[], None]) -> None:
    for c in checks:
        await asyncio.to_thread(c)


def _defaulted(cluster: Cluster, certs: dict[str, TLS]) -> None:
    cluster.service("echo-service", pods=10)
    cluster.add(
        ingress_class(),
        ingress("default-backend", {"defaultBackend": backend("echo-service")}),
        ingress("load-balancing", {"defaultBackend": backend("echo-service")}),
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["2.6", "2.8"])
async def defaulted(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    """default_backend and load_balancing: every request goes to echo-service."""
    async with shared_site(request.param, _defaulted) as site:
        yield site.cluster


def _routed(cluster: Cluster, certs: dict[str, TLS]) -> None:
    # host_rules, and the same with ssl-redirect off (on a host of its own)
    certs["foo"] = tls = self_signed(cluster.root.parent, "foo.bar.com")
    certs["plain"] = plain = self_signed(cluster.root.parent, "plain.bar.com")
    cluster.service("wildcard-foo-com")
    cluster.service("foo-bar-com")
    cluster.service("plain-bar-com")
    cluster.add(
        ingress_class(),
        tls.secret("conformance-tls"),
        plain.secret("plain-tls"),
        ingress(
            "host-rules",
            {
                "tls": [{"hosts": ["foo.bar.com"], "secretName": "conformance-tls"}],
                "rules": [
                    rule("*.foo.com", ("/", "Prefix", "wildcard-foo-com")),
                    {
                        "host": "foo.bar.com",
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": backend("foo-bar-com", "http"),
                                }
                            ]
                        },
                    },
                ],
            },
        ),
        ingress(
            "host-rules-plain",
            {
                "tls": [{"hosts": ["plain.bar.com"], "secretName": "plain-tls"}],
                "rules": [rule("plain.bar.com", ("/", "Prefix", "plain-bar-com"))],
            },
            **{"nginx.ingress.kubernetes.io/ssl-redirect": "false"},
        ),
    )
    # ingress_class
    cluster.service("ingress-class-prefix")
    cluster.service("ours")
    cluster.add(
        ingress(
            "test-ingress-class",
            {
                "ingressClassName": "some-invalid-class-name",
                "rules": [rule("ingress-class", ("/", "Prefix", "ingress-class-prefix"))],
            },
        ),
        ingress("classless", {"rules": [rule("classless", ("/", "Prefix", "ours"))]}),
    )
    # path_rules
    for name in (
        "foo-exact",
        "foo-prefix",
        "aaa-slash-bbb-prefix",
        "aaa-prefix",
        "aaa-slash-bbb-slash-prefix",
        "foo-slash-exact",
    ):
        cluster.service(name)
    cluster.add(ingress("path-rules", PATH_RULES))


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["2.6", "2.8"])
async def routed(request: pytest.FixtureRequest) -> AsyncIterator[Site]:
    """host_rules, ingress_class and path_rules: no defaultBackend anywhere."""
    async with shared_site(request.param, _routed) as site:
        yield site


async def test_default_backend(defaulted: Cluster) -> None:
    cluster = defaulted
    failures: list[str] = []

    def scenarios() -> None:
        for method, host, path in [
            ("GET", "my-host", "/"),
            ("GET", "my-host", "/sub-path"),
            ("POST", "some-host", "/"),
            ("PUT", "127.0.0.1", "/resource"),
            ("DELETE", "some-host", "/resource"),
            ("PATCH", "my-host", "/resource"),
        ]:
            what = f"{method} http://{host}{path}"
            r = cluster.get(host, path, method)
            check(failures, what, r, 200, "echo-service")
            if r.status != 200:
                continue
            if r.proto != "HTTP/1.1":
                failures.append(f"{what}: response proto {r.proto}")
            for header in ("content-length", "content-type", "date", "server"):
                if not r.headers.get(header):
                    failures.append(f"{what}: no {header} header in {r.headers}")
            seen = r.echo
            if (seen["method"], seen["path"], seen["proto"]) != (method, path, "HTTP/1.1"):
                failures.append(f"{what}: the backend saw {seen}")
            sent = {k.lower(): v for k, v in seen["headers"].items()}
            if sent.get("user-agent") != "Go-http-client/1.1":
                failures.append(f"{what}: User-Agent not passed on: {seen['headers']}")

    await run(scenarios)
    assert not failures, "\n".join(failures)


async def test_host_rules(routed: Site) -> None:
    cluster, tls = routed.cluster, routed.certs["foo"]
    failures: list[str] = []

    def scenarios() -> None:
        # TLS: the certificate verifies for foo.bar.com; the host reaches its backend.
        r = cluster.get_tls("foo.bar.com", ca=tls.cert)
        check(failures, "GET https://foo.bar.com", r, 200, "foo-bar-com")
        if r.echo.get("host") != "foo.bar.com":
            failures.append(f"https://foo.bar.com: the backend saw host {r.echo.get('host')}")
        # Plain HTTP to a TLS host is redirected to HTTPS (ssl-redirect is on by default, as
        # in ingress-nginx); the conformance suite's plain request follows that redirect.
        r = cluster.get("foo.bar.com")
        if r.status != 308 or r.headers.get("location") != "https://foo.bar.com/":
            failures.append(f"http://foo.bar.com: {r.status} {r.headers.get('location')}")
        check(failures, "http://subdomain.bar.com", cluster.get("subdomain.bar.com"), 404)
        r = cluster.get("bar.foo.com")
        check(failures, "http://bar.foo.com", r, 200, "wildcard-foo-com")
        if r.echo.get("host") != "bar.foo.com":
            failures.append(f"http://bar.foo.com: the backend saw host {r.echo.get('host')}")
        check(failures, "http://baz.bar.foo.com", cluster.get("baz.bar.foo.com"), 404)
        check(failures, "http://foo.com", cluster.get("foo.com"), 404)

    await run(scenarios)
    assert not failures, "\n".join(failures)


async def test_host_rules_over_plain_http_without_redirect(routed: Site) -> None:
    """The suite's plain-HTTP scenario for the TLS host, with the redirect switched off by
    the ssl-redirect annotation (on a TLS host of its own, plain.bar.com, beside foo.bar.com
    whose redirect stays on): answered by the host's backend over HTTP."""
    cluster, tls = routed.cluster, routed.certs["plain"]
    r = await asyncio.to_thread(cluster.get, "plain.bar.com")
    assert (r.status, r.service, r.echo.get("host")) == (200, "plain-bar-com", "plain.bar.com")
    r = await asyncio.to_thread(cluster.get_tls, "plain.bar.com", ca=tls.cert)
    assert (r.status, r.service) == (200, "plain-bar-com")


async def test_ingress_class(routed: Site) -> None:
    cluster = routed.cluster
    r = await asyncio.to_thread(cluster.get, "ingress-class")
    assert r.status == 404, r
    # The control: an Ingress without a class is taken by the default class, ours.
    r = await asyncio.to_thread(cluster.get, "classless")
    assert (r.status, r.service) == (200, "ours")


async def test_load_balancing(defaulted: Cluster) -> None:
    cluster = defaulted

    def hundred() -> list[Reply]:
        return [cluster.get("load-balancing") for _ in range(100)]

    replies = await asyncio.to_thread(hundred)
    assert {r.status for r in replies} == {200}
    pods = {r.echo["pod"] for r in replies}
    assert len(pods) == 10, pods


PATH_RULES = {
    "rules": [
        rule("exact-path-rules", ("/foo", "Exact", "foo-exact")),
        rule(
            "prefix-path-rules",
            ("/foo", "Prefix", "foo-prefix"),
            ("/aaa/bbb", "Prefix", "aaa-slash-bbb-prefix"),
            ("/aaa", "Prefix", "aaa-prefix"),
        ),
        rule("mixed-path-rules", ("/foo", "Prefix", "foo-prefix"), ("/foo", "Exact", "foo-exact")),
        rule(
            "trailing-slash-path-rules",
            ("/aaa/bbb/", "Prefix", "aaa-slash-bbb-slash-prefix"),
            ("/foo/", "Exact", "foo-slash-exact"),
        ),
    ]
}


async def test_path_rules(routed: Site) -> None:
    cluster = routed.cluster
    failures: list[str] = []

    def scenarios() -> None:
        for host, path, status, service in [
            ("exact-path-rules", "/foo", 200, "foo-exact"),
            ("exact-path-rules", "/foo/", 404, None),
            ("exact-path-rules", "/FOO", 404, None),
            ("exact-path-rules", "/bar", 404, None),
            ("prefix-path-rules", "/foo", 200, "foo-prefix"),
            ("prefix-path-rules", "/foo/", 200, "foo-prefix"),
            ("prefix-path-rules", "/FOO", 404, None),
            ("prefix-path-rules", "/aaa/bbb", 200, "aaa-slash-bbb-prefix"),
            ("prefix-path-rules", "/aaa/bbb/ccc", 200, "aaa-slash-bbb-prefix"),
            ("prefix-path-rules", "/aaa/ccc", 200, "aaa-prefix"),
            ("prefix-path-rules", "/aaaccc", 404, None),
            ("mixed-path-rules", "/foo", 200, "foo-exact"),
            ("trailing-slash-path-rules", "/aaa/bbb", 200, "aaa-slash-bbb-slash-prefix"),
            ("trailing-slash-path-rules", "/aaa/bbb/", 200, "aaa-slash-bbb-slash-prefix"),
            ("trailing-slash-path-rules", "/foo", 404, None),
        ]:
            check(failures, f"http://{host}{path}", cluster.get(host, path), status, service)

    await run(scenarios)
    assert not failures, "\n".join(failures)
