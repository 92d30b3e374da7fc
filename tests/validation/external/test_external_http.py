"""HTTP validators against a real local aiohttp server (plain and TLS with a private CA)."""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import ipaddress
import json
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.spec.models import ExternalValidator
from controller.validation.external import ExternalStage
from controller.validation.stage import StageContext, StageOutcome

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

FILES = FileSet.of(
    [
        FileEntry("haproxy.cfg", FileKind.CONFIG, b"global\n    maxconn 10\n"),
        FileEntry("certs/site.pem", FileKind.CERT, b"-----BEGIN CERTIFICATE-----\nAAAA\n"),
    ]
)


class Server:
    def __init__(self) -> None:
        self.handler: Handler = self._ok
        self.received: list[dict[str, Any]] = []
        self.url = ""
        self.release = asyncio.Event()
        """Set at teardown so that deliberately slow handlers end at once."""

    async def _ok(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=200)

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        self.received.append(await request.json())
        return await self.handler(request)


async def _serve(tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    server = Server()
    app = web.Application()
    app.router.add_post("/validate", server.dispatch)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/validate"
    try:
        yield server
    finally:
        server.release.set()
        await runner.cleanup()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async for s in _serve():
        yield s


def _pki(tmp_path: Path) -> tuple[ssl.SSLContext, Path]:
    """A private CA and a server certificate for 127.0.0.1 signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "htc test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain = tmp_path / "server.pem"
    chain.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(chain)
    return ctx, ca_file


async def _run(url: str, **kw: Any) -> StageOutcome:
    v = ExternalValidator.model_validate({"name": "svc", "type": "http", "url": url, **kw})
    return await ExternalStage([v]).run(StageContext(render=RenderResult(files=FILES)))


def _ids(out: StageOutcome) -> list[str]:
    return [d.rule_id for d in out.diagnostics]


async def test_pass_receives_the_complete_file_set(server: Server) -> None:
    out = await _run(server.url)
    assert _ids(out) == []
    [body] = server.received
    assert body["checksum"] == FILES.checksum
    by_path = {f["path"]: f for f in body["files"]}
    assert set(by_path) == {"haproxy.cfg", "certs/site.pem"}
    for entry in FILES:
        sent = by_path[entry.path]
        assert base64.b64decode(sent["content"]) == entry.content
        assert sent["sha256"] == hashlib.sha256(entry.content).hexdigest()
        assert sent["kind"] == entry.kind.value


async def test_findings_in_a_2xx_body_are_merged(server: Server) -> None:
    async def warn(request: web.Request) -> web.StreamResponse:
        doc = {
            "diagnostics": [
                {"severity": "warning", "message": "slow", "file": "haproxy.cfg", "line": 2}
            ]
        }
        return web.json_response(doc)

    server.handler = warn
    out = await _run(server.url)
    assert _ids(out) == ["W6003"]
    loc = out.diagnostics[0].location
    assert loc is not None and (loc.file, loc.line) == ("haproxy.cfg", 2)


async def test_4xx_rejects_even_with_ignore(server: Server) -> None:
    async def reject(request: web.Request) -> web.StreamResponse:
        doc = {"diagnostics": [{"ruleId": "R7", "severity": "error", "message": "no TLS"}]}
        return web.json_response(doc, status=422)

    server.handler = reject
    out = await _run(server.url, failurePolicy="ignore")
    assert _ids(out) == ["E6002"]
    assert out.diagnostics[0].message == "[svc/R7] no TLS"

    async def plain(request: web.Request) -> web.StreamResponse:
        return web.Response(status=403, text="forbidden by policy")

    server.handler = plain
    out = await _run(server.url)
    assert _ids(out) == ["E6001"] and "HTTP 403" in out.diagnostics[0].message


async def test_server_error_is_a_failure_and_ignore_makes_it_a_warning(server: Server) -> None:
    async def boom(request: web.Request) -> web.StreamResponse:
        return web.Response(status=500, text="Traceback ...")

    server.handler = boom
    assert _ids(await _run(server.url)) == ["E6005"]
    assert _ids(await _run(server.url, failurePolicy="ignore")) == ["W6008"]


async def test_slow_server_times_out(server: Server) -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        await server.release.wait()
        return web.Response(status=200)

    server.handler = slow
    loop = asyncio.get_running_loop()
    started = loop.time()
    out = await _run(server.url, timeout="300ms")
    assert loop.time() - started < 1.5
    assert _ids(out) == ["E6006"]


async def test_garbage_body_on_2xx(server: Server) -> None:
    async def junk(request: web.Request) -> web.StreamResponse:
        return web.Response(status=200, text='{"diagnostics": "nope"}')

    server.handler = junk
    out = await _run(server.url)
    assert _ids(out) == ["E6007"] and "must be a list" in out.diagnostics[0].message


async def test_unreachable_endpoint() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connection refused
        out = await _run(f"http://127.0.0.1:{port}/v")
    assert _ids(out) == ["E6005"]


async def test_tls_with_a_ca_bundle(tmp_path: Path) -> None:
    tls, ca_file = _pki(tmp_path)
    async for server in _serve(tls):
        assert _ids(await _run(server.url, caBundle=str(ca_file))) == []
        # Without the private CA the certificate is not trusted: the validator cannot run.
        out = await _run(server.url)
        assert _ids(out) == ["E6005"] and "certificate" in out.diagnostics[0].message.lower()
        assert len(server.received) == 1


async def test_unreadable_ca_bundle(tmp_path: Path, server: Server) -> None:
    out = await _run(server.url, caBundle=str(tmp_path / "missing.pem"))
    assert _ids(out) == ["E6005"] and "CA bundle" in out.diagnostics[0].message


def test_payload_is_json_with_version() -> None:
    from controller.validation.external import payload

    doc = json.loads(payload(FILES))
    assert doc["version"] == 1 and len(doc["files"]) == 2
