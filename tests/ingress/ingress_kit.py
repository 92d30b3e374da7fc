"""The Ingress library end to end: the quickstart templates run by ``htc local`` with a real
HAProxy, in front of loopback echo backends that answer like the Ingress conformance suite's
echo server.

A :class:`Cluster` is a directory of manifests (Ingresses, Services, EndpointSlices, Secrets,
IngressClasses) the test writes before ``htc local`` starts. Each Service gets "pods": echo
servers on distinct loopback addresses (127.0.0.x, all on one port), so load balancing is
seen per address, as with pods. Requests go only to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import http.client
import io
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart" / "config.yaml"
CLASS = "haproxy"
CONTROLLER = "haproxy-template.dev/ingress-controller"


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


# -- echo backends ------------------------------------------------------------------------------


def _echo_handler(service: str, pod: str, delay: float) -> type[BaseHTTPRequestHandler]:
    class Echo(BaseHTTPRequestHandler):
        # Like the suite's echo server (Go's net/http): HTTP/1.1 and no Server header of its
        # own, so a Server header in the answer comes from the proxy.
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(min(length, 1 << 20))
            if delay:
                threading.Event().wait(delay)
            body = json.dumps(
                {
                    "service": service,
                    "pod": pod,
                    "method": self.command,
                    "path": self.path,
                    "proto": self.request_version,
                    "host": self.headers.get("Host", ""),
                    "headers": dict(self.headers.items()),
                    # the SNI, protocol and cipher of a TLS connection (see Echoes.start)
                    "sni": getattr(self.connection, "sni", None),
                    "tls": _tls_of(self.connection),
                }
            ).encode()
            self.send_response_only(200)
            self.send_header("Date", self.date_time_string())
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Echo


def _tls_of(conn: Any) -> list[str] | None:
    if not isinstance(conn, ssl.SSLSocket):
        return None
    cipher = conn.cipher()
    return [str(conn.version()), cipher[0] if cipher else ""]


def _remember_sni(sock: Any, name: str | None, ctx: ssl.SSLContext) -> None:
    sock.sni = name  # read back by the echo handler from its connection


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # HAProxy closing an idle keep-alive connection is no error


@dataclass
class Echoes:
    """Every echo server a test started; all stopped by :meth:`close`."""

    servers: list[_Quiet] = field(default_factory=list)

    def start(
        self,
        service: str,
        address: str,
        port: int,
        delay: float = 0.0,
        tls: TLS | None = None,
        client_ca: str | None = None,
    ) -> None:
        """An echo server; over TLS with ``tls``, and then asking for a client certificate
        issued by ``client_ca`` (PEM) when it is given. The SNI a client sent is echoed."""
        server = _Quiet((address, port), _echo_handler(service, f"{service}@{address}", delay))
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls.cert_file, tls.key_file)
            if client_ca is not None:
                ctx.verify_mode = ssl.CERT_REQUIRED
                ctx.load_verify_locations(cadata=client_ca)
            ctx.sni_callback = _remember_sni
            server.socket = ctx.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.servers.append(server)

    def close(self) -> None:
        for s in self.servers:
            s.shutdown()
            s.server_close()


# -- certificates -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TLS:
    """A self-signed certificate: PEM texts, and files for servers that want paths."""

    cert: str
    key: str
    cert_file: str
    key_file: str

    def secret(self, name: str, namespace: str = "default") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "type": "kubernetes.io/tls",
            "data": {
                "tls.crt": base64.b64encode(self.cert.encode()).decode(),
                "tls.key": base64.b64encode(self.key.encode()).decode(),
            },
        }


@dataclass(frozen=True)
class Authority:
    """A test certificate authority: its PEM certificate, and what it signs with."""

    cert: str
    name: x509.Name
    key: ec.EllipticCurvePrivateKey


def certificate_authority(common_name: str) -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = _signed(name, key.public_key(), name, key, [], ca=True)
    return Authority(cert.public_bytes(serialization.Encoding.PEM).decode(), name, key)


def issued(directory: Path, authority: Authority, *hosts: str) -> TLS:
    """A certificate for ``hosts`` (a server's, or a client's) signed by ``authority``."""
    return _write(directory, hosts, ec.generate_private_key(ec.SECP256R1()), authority)


def self_signed(directory: Path, *hosts: str) -> TLS:
    return _write(directory, hosts, ec.generate_private_key(ec.SECP256R1()), None)


def _signed(
    subject: x509.Name,
    public_key: Any,
    issuer: x509.Name,
    signer: ec.EllipticCurvePrivateKey,
    hosts: list[str],
    ca: bool,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), True)
    )
    if hosts:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), False
        )
    return builder.sign(signer, hashes.SHA256())


def _write(
    directory: Path, hosts: tuple[str, ...], key: ec.EllipticCurvePrivateKey, by: Authority | None
) -> TLS:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    if by is None:  # self-signed, usable as its own CA
        cert = _signed(name, key.public_key(), name, key, list(hosts), ca=True)
    else:
        cert = _signed(name, key.public_key(), by.name, by.key, list(hosts), ca=False)
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    stem = directory / hosts[0].replace("*", "_")
    Path(f"{stem}.crt").write_text(cert_pem)
    Path(f"{stem}.key").write_text(key_pem)
    return TLS(cert_pem, key_pem, f"{stem}.crt", f"{stem}.key")


# -- requests ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    status: int
    proto: str
    headers: dict[str, str]
    body: str
    peer_cert: dict[str, Any] | None = None

    @property
    def echo(self) -> dict[str, Any]:
        """What the echo backend saw; empty when the answer is not from one."""
        try:
            found = json.loads(self.body)
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    @property
    def service(self) -> str | None:
        return self.echo.get("service")


def request(
    port: int,
    host: str,
    path: str = "/",
    method: str = "GET",
    *,
    ca: str | None = None,
    sni: str | None = None,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
) -> Reply:
    """One HTTP/1.1 request to 127.0.0.1:``port`` with ``Host: host``; over TLS when ``ca``
    is given (the server's certificate must verify against it for ``sni``, default ``host``)."""
    raw: socket.socket = socket.create_connection(("127.0.0.1", port), timeout=5)
    peer: dict[str, Any] | None = None
    if ca is not None:
        ctx = ssl.create_default_context(cadata=ca)
        tls = ctx.wrap_socket(raw, server_hostname=sni or host)
        peer = tls.getpeercert()
        raw = tls
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "User-Agent: Go-http-client/1.1"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    with contextlib.closing(raw):
        raw.sendall("\r\n".join(lines).encode() + body)
        resp = http.client.HTTPResponse(raw, method=method)
        resp.begin()
        data = resp.read().decode(errors="replace")
    return Reply(
        resp.status,
        f"HTTP/{resp.version // 10}.{resp.version % 10}",
        {k.lower(): v for k, v in resp.getheaders()},
        data,
        peer,
    )


# -- manifests -----------------------------------------------------------------------------------


def ingress_class(default: bool = True, controller: str = CONTROLLER) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": CLASS}
    if default:
        meta["annotations"] = {"ingressclass.kubernetes.io/is-default-class": "true"}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": meta,
        "spec": {"controller": controller},
    }


def auth_secret(
    name: str, data: dict[str, str], labelled: bool = True, encode: bool = True
) -> dict[str, Any]:
    """An Opaque htpasswd Secret, labelled for the library's `authsecrets` collection unless
    told otherwise; ``data`` values are base64-encoded here unless ``encode`` is false."""
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if labelled:
        meta["labels"] = {"haproxy-template.dev/auth-secret": "true"}
    if encode:
        data = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": data}


def proxy_secret(name: str, ca: str | None = None, client: TLS | None = None) -> dict[str, Any]:
    """An Opaque Secret labelled for the library's `proxysecrets` collection: ``ca`` as
    ``ca.crt``, ``client`` as ``tls.crt``/``tls.key`` (PEM texts, base64-encoded here)."""
    data = {"ca.crt": ca} if ca is not None else {}
    if client is not None:
        data |= {"tls.crt": client.cert, "tls.key": client.key}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"haproxy-template.dev/proxy-ssl-secret": "true"},
        },
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def ingress(name: str, spec: dict[str, Any], **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}


NGINX = "nginx.ingress.kubernetes.io/"

PROXY_SSL_ANNOTATIONS = [
    "proxy-ssl-secret",
    "proxy-ssl-verify",
    "proxy-ssl-verify-depth",
    "proxy-ssl-name",
    "proxy-ssl-server-name",
    "proxy-ssl-ciphers",
    "proxy-ssl-protocols",
]
"""The annotations of TLS to the backend, which act only with backend-protocol HTTPS/GRPCS."""


def annotated(
    name: str, host: str, service: str, path: str = "/", **annotations: str
) -> dict[str, Any]:
    """An Ingress routing ``host`` + ``path`` to ``service``; annotation names without a
    prefix get ingress-nginx's."""
    return ingress(
        name,
        {"rules": [rule(host, (path, "ImplementationSpecific", service))]},
        **{(k if "/" in k else NGINX + k): v for k, v in annotations.items()},
    )


def backend(service: str, port: int | str = 8080) -> dict[str, Any]:
    ref = {"number": port} if isinstance(port, int) else {"name": port}
    return {"service": {"name": service, "port": ref}}


def rule(host: str | None, *paths: tuple[str, str, str]) -> dict[str, Any]:
    """``paths``: (path, pathType, service) on the service's port 8080."""
    r: dict[str, Any] = {
        "http": {
            "paths": [{"path": p, "pathType": t, "backend": backend(svc)} for p, t, svc in paths]
        }
    }
    if host is not None:
        r["host"] = host
    return r


@dataclass
class Cluster:
    """The manifests ``htc local`` reads, and the echo backends behind their Services."""

    root: Path
    echoes: Echoes
    listen: int = field(default_factory=free_port)
    listen_tls: int = field(default_factory=free_port)
    docs: list[dict[str, Any]] = field(default_factory=list)
    extra_context: dict[str, Any] = field(default_factory=dict)
    """extraContext of every :meth:`write` (a write's own arguments go on top)."""
    _next_address: int = 11

    def add(self, *docs: dict[str, Any]) -> None:
        self.docs.extend(docs)

    def service(
        self,
        name: str,
        pods: int = 1,
        delay: float = 0.0,
        tls: TLS | None = None,
        client_ca: str | None = None,
    ) -> None:
        """Service ``name`` (port 8080, named ``http``) with ``pods`` echo backends, each on
        its own loopback address and all on one port, listed in one EndpointSlice."""
        addresses = [f"127.0.0.{self._next_address + i}" for i in range(pods)]
        self._next_address += pods
        port = free_port(addresses[0])
        for a in addresses:
            self.echoes.start(name, a, port, delay=delay, tls=tls, client_ca=client_ca)
        self.add(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"ports": [{"name": "http", "port": 8080, "targetPort": port}]},
            },
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{name}-abcde",
                    "namespace": "default",
                    "labels": {"kubernetes.io/service-name": name},
                },
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
                "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses],
            },
        )

    def write(self, **extra_context: Any) -> None:
        doc = yaml.safe_load(QUICKSTART.read_text())
        ctx = doc["spec"]["extraContext"]
        ctx["listen"] = f"127.0.0.1:{self.listen}"
        ctx["listenTLS"] = f"127.0.0.1:{self.listen_tls}"
        ctx.update(self.extra_context)
        ctx.update(extra_context)
        doc["spec"]["reconcile"] = {"debounce": "50ms", "minInterval": "100ms"}
        (self.root / "resources").mkdir(parents=True, exist_ok=True)
        (self.root / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        (self.root / "resources" / "objects.yaml").write_text(
            yaml.safe_dump_all(self.docs, sort_keys=False)
        )

    def get(self, host: str, path: str = "/", method: str = "GET", **kw: Any) -> Reply:
        return request(self.listen, host, path, method, **kw)

    async def aget(self, host: str, path: str = "/", **kw: Any) -> Reply:
        """:meth:`get` in a thread, for async tests."""
        return await asyncio.to_thread(self.get, host, path, **kw)

    def get_tls(self, host: str, path: str = "/", *, ca: str, **kw: Any) -> Reply:
        return request(self.listen_tls, host, path, ca=ca, **kw)


@contextlib.contextmanager
def echoes() -> Iterator[Echoes]:
    e = Echoes()
    try:
        yield e
    finally:
        e.close()


def out_text(out: io.StringIO) -> str:
    return out.getvalue()
