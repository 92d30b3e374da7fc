"""The quickstart example: golden output, both real haproxy binaries, and real routing.

Golden files live in ``tests/render/golden/quickstart/`` (deploy layout). After an intended
change of the example, regenerate them and review the diff:

    HTC_UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/render/test_render_quickstart.py -k golden
"""

from __future__ import annotations

import http.client
import http.server
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.cli.inputs import load_inputs, render_inputs
from controller.cli.outdir import write_files
from controller.render import Renderer, RenderResult
from tests.render.render_kit import (
    QUICKSTART,
    endpoint_slice,
    ingress,
    quickstart_spec,
    render,
    service,
    snapshot,
    text,
)

GOLDEN = Path(__file__).parent / "golden" / "quickstart"


def _quickstart() -> RenderResult:
    return render_inputs(load_inputs(QUICKSTART / "config.yaml", [QUICKSTART / "resources"]))


def test_golden_output() -> None:
    r = _quickstart()
    assert r.ok, r.diagnostics
    if os.environ.get("HTC_UPDATE_GOLDEN"):
        for old in GOLDEN.rglob("*"):
            if old.is_file():
                old.unlink()
        write_files(r.files, GOLDEN)
    expected = {
        str(p.relative_to(GOLDEN)): p.read_bytes() for p in GOLDEN.rglob("*") if p.is_file()
    }
    assert expected, "no golden files; run with HTC_UPDATE_GOLDEN=1"
    assert {e.path: e.content for e in r.files} == expected


def test_quickstart_semantics() -> None:
    r = _quickstart()
    cfg = text(r)
    # one backend per referenced Service port, one server per ready endpoint
    assert cfg.count("\nbackend ") == 3
    assert "server 10.244.1.12:18082 10.244.1.12:18082" in cfg
    assert "10.244.1.13" not in cfg  # the endpoint that is not ready
    # the other class's Ingress is ignored everywhere, including its defaultBackend
    for entry in r.files:
        assert b"other.local" not in entry.content
    assert "default_backend" not in cfg and "status 404" in cfg
    assert "bind 127.0.0.1:8080" in cfg
    assert "daemon" not in cfg and "\n    user " not in cfg and "\n    group " not in cfg
    # the routing table is computed once per render, not once per output
    assert Renderer(quickstart_spec()).shared_snippets == {
        "routing",
        "our-ingresses",
        "service-ports",
    }
    # the maps are referenced by their relative deploy paths
    assert "map_str(maps/hosts.map)" in cfg and "map_beg(maps/prefixes.map)" in cfg
    assert text(r, "maps/paths.map").splitlines()[1:] == [
        "api.local/docs be_default_docs_80",
        "api.local/healthz be_default_echo_80",
        "api.local/v1 be_default_api_8080",
        "echo.local/ be_default_echo_80",
        "echo.local/version be_default_api_8080",
    ]
    # longest prefix first, for map_beg's first-match rule
    assert text(r, "maps/prefixes.map").splitlines()[1:] == [
        "api.local/docs/ be_default_docs_80",
        "api.local/v1/ be_default_api_8080",
        "echo.local/ be_default_echo_80",
    ]


def haproxy_accepts(haproxy_bin: str, r: RenderResult, tmp_path: Path) -> str:
    """The rendered files written out and checked by the real binary; its output."""
    write_files(r.files, tmp_path)
    check = subprocess.run(
        [haproxy_bin, "-c", "-C", str(tmp_path), "-f", "haproxy.cfg"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    return check.stdout + check.stderr


def server_lines(r: RenderResult) -> list[str]:
    return [line.strip() for line in text(r).splitlines() if line.strip().startswith("server ")]


def test_quickstart_passes_haproxy_check(haproxy_bin: str, tmp_path: Path) -> None:
    assert "[WARNING]" not in haproxy_accepts(haproxy_bin, _quickstart(), tmp_path)


def test_a_hostile_ingress_stops_the_render_with_its_name() -> None:
    s = quickstart_spec()
    objs = [
        (
            "ingresses",
            ingress(
                "evil", "evil.test", ("/x use_backend pwned\n", "Prefix", "echo", 80), ns="team"
            ),
        ),
        ("services", service("echo", 80, ns="team")),
    ]
    r = render(s, objs)
    assert not r.ok
    problems = [d for d in r.diagnostics if d.rule_id == "E1004"]
    assert problems and all(d.object and d.object.name == "evil" for d in problems if d.object)
    assert any(d.object is not None for d in problems)
    assert all("pwned" not in e.content.decode() for e in r.files)


# -- real routing -----------------------------------------------------------------------------


class _Named(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.label.encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def backends() -> Iterator[dict[str, int]]:
    servers = {}
    for label in ("echo", "api", "docs"):
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Named)
        srv.label = label  # type: ignore[attr-defined]
        threading.Thread(
            target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        servers[label] = srv
    yield {k: v.server_address[1] for k, v in servers.items()}
    for srv in servers.values():
        srv.shutdown()
        srv.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _objects(ports: dict[str, int], *, default_backend: bool) -> list[tuple[str, dict[str, Any]]]:
    """The quickstart's sample objects, with endpoints on the given local ports."""
    extra: dict[str, Any] = {}
    if default_backend:
        extra["defaultBackend"] = {"service": {"name": "docs", "port": {"number": 80}}}
    api = ingress(
        "api",
        "api.local",
        ("/v1/", "Prefix", "api", 8080),
        ("/docs", "ImplementationSpecific", "docs", 80),
        ("/healthz", "Exact", "echo", 80),
        **extra,
    )
    echo = ingress(
        "echo", "echo.local", ("/", "Prefix", "echo", 80), ("/version", "Exact", "api", 8080)
    )
    anyhost = ingress("anyhost", "", ("/shared", "Prefix", "docs", 80))
    del anyhost["spec"]["rules"][0]["host"]
    other = ingress("elsewhere", "other.local", ("/", "Prefix", "echo", 80), cls="nginx")
    return [
        ("ingresses", api),
        ("ingresses", echo),
        ("ingresses", anyhost),
        ("ingresses", other),
        ("services", service("echo", 80)),
        ("services", service("api", 8080)),
        ("services", service("docs", 80, port_name=None)),
        ("endpointslices", endpoint_slice("echo", ports["echo"], ("127.0.0.1", True))),
        (
            "endpointslices",
            endpoint_slice("api", ports["api"], ("127.0.0.1", True), ("127.0.0.3", False)),
        ),
        (
            "endpointslices",
            endpoint_slice("docs", ports["docs"], ("127.0.0.1", None), port_name=""),
        ),
    ]


ROUTES = [
    # (host header, path, expected backend label or status)
    ("echo.local", "/", "echo"),
    ("echo.local:8080", "/anything/else", "echo"),
    ("ECHO.local", "/version", "api"),
    ("echo.local", "/version/2", "echo"),
    ("api.local", "/v1", "api"),
    ("api.local", "/v1/users", "api"),
    ("api.local", "/v1x", 404),
    ("api.local", "/docs", "docs"),
    ("api.local", "/docs/intro", "docs"),
    ("api.local", "/healthz", "echo"),
    ("api.local", "/healthz/deep", 404),
    ("api.local", "/shared", 404),  # a known host never uses the rules without a host
    ("unknown.local", "/shared/x", "docs"),
    ("unknown.local", "/", 404),
    ("other.local", "/", 404),  # the other class's Ingress is ignored
]


def _get(port: int, host: str, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers={"Host": host})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


@pytest.mark.parametrize("default_backend", [False, True])
def test_requests_are_routed_like_kubernetes_says(
    haproxy_bin: str, backends: dict[str, int], tmp_path: Path, default_backend: bool
) -> None:
    listen = _free_port()
    s = quickstart_spec()

    from controller.render import Renderer

    r = Renderer(s).render(
        snapshot(s, _objects(backends, default_backend=default_backend)),
        extra_context={"listen": f"127.0.0.1:{listen}"},
    )
    assert r.ok, r.diagnostics
    write_files(r.files, tmp_path)
    proc = subprocess.Popen(
        [haproxy_bin, "-db", "-C", str(tmp_path), "-f", "haproxy.cfg"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 5
        while True:
            try:
                socket.create_connection(("127.0.0.1", listen), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"haproxy did not start: {proc.communicate(timeout=2)[1]!r}")
                time.sleep(0.02)
        for host, path, want in ROUTES:
            status, body = _get(listen, host, path)
            if want == 404 and default_backend:
                want = "docs"
            if isinstance(want, int):
                assert status == want, (host, path, status, body)
            else:
                assert (status, body) == (200, want), (host, path)
    finally:
        proc.terminate()
        proc.communicate(timeout=5)


@pytest.mark.slow
def test_thousand_ingresses_render_within_budget() -> None:
    from bench import render as bench

    result = bench.measure(1000, repeat=5)
    assert result["lines"] > 7000
    # 100 ms is the target on an idle machine; leave room for a shared CI box
    assert result["renderMs"] < 250, result


def test_an_admission_overlay_renders_the_proposed_ingress() -> None:
    from controller.resources import Overlay

    s = quickstart_spec()
    objs = _objects({"echo": 18081, "api": 18082, "docs": 18083}, default_backend=False)
    base = snapshot(s, objs)
    proposed = ingress("new", "new.local", ("/", "Prefix", "echo", 80))
    r = Renderer(s).render(Overlay(base, "ingresses", "create", proposed))
    assert r.ok, r.diagnostics
    assert "new.local default/new" in text(r, "maps/hosts.map")
    assert "new.local" not in text(Renderer(s).render(base), "maps/hosts.map")


def test_ipv6_endpoints_render_valid_servers_and_fqdn_slices_are_skipped(
    haproxy_bin: str, tmp_path: Path
) -> None:
    s = quickstart_spec()
    v6 = endpoint_slice("echo", 18081, ("fd00::1", True))
    v6["addressType"] = "IPv6"
    fqdn = endpoint_slice("echo", 18081, ("echo.example.test", True))
    fqdn["addressType"] = "FQDN"
    fqdn["metadata"]["name"] = "echo-fqdn"
    objs = [
        ("ingresses", ingress("echo", "echo.local", ("/", "Prefix", "echo", 80))),
        ("services", service("echo", 80)),
        ("endpointslices", v6),
        ("endpointslices", fqdn),
    ]
    r = render(s, objs)
    assert r.ok, r.diagnostics
    servers = server_lines(r)
    assert servers == ["server fd00::1:18081 ipv6@fd00::1:18081"]
    haproxy_accepts(haproxy_bin, r, tmp_path)


def test_an_endpoint_in_two_slices_gets_one_server(haproxy_bin: str, tmp_path: Path) -> None:
    """Kubernetes may list an endpoint in two slices while it moves between them; HAProxy
    refuses two servers of one name, so each address:port is emitted once."""
    s = quickstart_spec()
    first = endpoint_slice("echo", 18081, ("127.0.0.1", True), ("127.0.0.3", True))
    second = endpoint_slice("echo", 18081, ("127.0.0.1", True), ("127.0.0.2", None))
    second["metadata"]["name"] = "echo-x2"
    objs = [
        ("ingresses", ingress("echo", "echo.local", ("/", "Prefix", "echo", 80))),
        ("services", service("echo", 80)),
        ("endpointslices", second),
        ("endpointslices", first),
    ]
    r = render(s, objs)
    assert r.ok, r.diagnostics
    servers = server_lines(r)
    # first slice by name first, each address:port once, in the order first seen
    assert servers == [
        "server 127.0.0.1:18081 127.0.0.1:18081",
        "server 127.0.0.3:18081 127.0.0.3:18081",
        "server 127.0.0.2:18081 127.0.0.2:18081",
    ]
    haproxy_accepts(haproxy_bin, r, tmp_path)


@pytest.mark.parametrize(
    ("host", "refused"),
    [
        ("echo.local", False),
        ("*.local", False),
        ("*.echo.local", False),
        ("a*.local", True),
        ("*", True),
        ("*.*.local", True),
        ("echo.*.local", True),
    ],
)
def test_wildcard_hosts_take_one_leading_label_only(host: str, refused: bool) -> None:
    """The Ingress spec allows a wildcard only as the whole first label (*.foo.com); the
    quickstart's inline rule refuses any other '*', naming the Ingress, before anything
    renders."""
    from controller.validation.rules import RuledRenderer

    s = quickstart_spec()
    objs = [
        ("ingresses", ingress("wild", host, ("/", "Prefix", "echo", 80))),
        ("services", service("echo", 80)),
    ]
    r = RuledRenderer.from_spec(s).render(snapshot(s, objs))
    failures = [d for d in r.diagnostics if d.rule_id == "E5003"]
    assert bool(failures) is refused and r.ok is not refused
    if refused:
        assert failures[0].object is not None and failures[0].object.name == "wild"
        assert "leading '*.' label" in failures[0].message
        assert len(r.files) == 0
    else:
        hosts = text(r, "maps/hosts.map")
        assert f"\n{host} default/wild\n" in hosts


def test_routing_tables_stay_keyed_in_ingress_routes() -> None:
    """Every lookup table routing hands to ingress-routes is used only for key lookups and
    emptiness tests, so a changed table evaluates again only the Ingresses that asked about
    a changed key (a snippet edit that used one otherwise would evaluate all of them)."""
    from jinja2 import Environment

    from controller.render.keyed import keyed_names
    from controller.spec.loader import load_config

    config, _ = load_config(QUICKSTART / "config.yaml")
    assert config is not None
    tree = Environment().parse(config.spec.template_snippets["ingress-routes"].template)
    tables = {"canary_keys", "regex_hosts", "tls_hosts", "auth_of", "headers_of"}
    assert keyed_names(tree, tables) == tables
