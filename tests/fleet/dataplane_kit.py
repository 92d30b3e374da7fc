"""A HAProxy "pod" for the fleet tests: a real HAProxy master-worker and a real dataplaneapi.

Each instance has a base directory laid out as ``docs/topologies.md`` describes: HAProxy and
dataplaneapi both run there, ``maps/``, ``certs/`` and ``files/`` are the API's storage
areas. HAProxy 2.8 is reloaded by dataplaneapi through the master socket; 2.6 through
``hack/dataplaneapi/haproxy-reload.sh`` (dataplaneapi uses the socket only from 2.7 on).

Everything listens on loopback, or on a test pod's own address when a
:class:`~controller.testbed.podnet.Pod` is given (its processes then run in the pod's network
namespace). The reload delay is set to a few milliseconds through the override dataplaneapi
reads for its own CI (``CI_DATAPLANE_RELOAD_DELAY_OVERRIDE``, in ms); its configuration file
accepts whole seconds only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from controller.deploy.dataplane import DataplaneTarget
from controller.deploy.dataplane_client import DataplaneClient
from controller.observability.metrics import Metrics
from controller.testbed.podnet import Pod
from tests.fleet.fleet_helpers import CONFIG

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "hack" / "dataplaneapi" / "build.sh"
RELOAD_26 = REPO / "hack" / "dataplaneapi" / "haproxy-reload.sh"
USER, PASSWORD = "admin", "test-password"


PodFactory = Callable[..., "HAProxyPod"]
"""The fixtures' factory: keyword arguments of :class:`HAProxyPod` → a started pod."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_BINARY: list[str] = []


def dataplaneapi_binary() -> str | None:
    """The binary hack/dataplaneapi/build.sh prints (built into the cache when missing)."""
    if not _BINARY:
        proc = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, check=False)
        path = proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 else ""
        if not path or not os.access(path, os.X_OK):
            return None
        _BINARY.append(path)
    return _BINARY[0]


def why_no_dataplaneapi() -> str:
    proc = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, check=False)
    return f"no dataplaneapi binary: {proc.stderr.strip()[-400:]}"


def _version(haproxy_bin: str) -> tuple[int, int]:
    out = subprocess.run([haproxy_bin, "-v"], capture_output=True, text=True, check=True).stdout
    major, minor = out.split()[2].split(".")[:2]
    return int(major), int(minor)


class HAProxyPod:
    """HAProxy + dataplaneapi in one base directory; a context manager that stops both."""

    def __init__(
        self,
        haproxy_bin: str,
        dataplaneapi: str,
        *,
        pod: Pod | None = None,
        reload_delay_ms: int = 20,
        tls: tuple[Path, Path] | None = None,
        port: int | None = None,
    ) -> None:
        self.haproxy_bin = haproxy_bin
        self.dataplaneapi = dataplaneapi
        self.pod = pod
        self.addr = pod.ip if pod else "127.0.0.1"
        self.port = port or free_port()
        """HAProxy's frontend port (the configurations the tests push bind it)."""
        self.api_port = 5555 if pod else free_port()
        self.reload_delay_ms = reload_delay_ms
        self.tls = tls
        self.base = Path(tempfile.mkdtemp(prefix="htc-dp-"))
        self.version = _version(haproxy_bin)
        self.haproxy: subprocess.Popen[bytes] | None = None
        self.api: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.addr}:{self.api_port}"

    @property
    def name(self) -> str:
        return f"{self.addr}:{self.api_port}"

    def __enter__(self) -> HAProxyPod:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- processes --------------------------------------------------------------------------

    def _spawn(
        self, argv: list[str], log: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        out = open(self.base / log, "ab")  # noqa: SIM115 - the child owns it
        kw: dict[str, object] = {"cwd": str(self.base), "stdout": out, "stderr": out}
        if env is not None:
            kw["env"] = env
        if self.pod is not None:
            return self.pod.start(argv, **kw)
        proc: subprocess.Popen[bytes] = subprocess.Popen(argv, start_new_session=True, **kw)  # type: ignore[call-overload]
        return proc

    def start(self) -> None:
        for d in ("maps", "certs", "files", "tx", "spoe", "dataplane", "backups"):
            (self.base / d).mkdir()
        (self.base / "haproxy.cfg").write_text(
            CONFIG.format(addr=self.addr, port=self.port, extra="", body="boot")
        )
        self.haproxy = self._spawn(
            [self.haproxy_bin, "-W", "-S", str(self.base / "master.sock"), "-f", "haproxy.cfg"],
            "haproxy.log",
        )
        self._wait(lambda: (self.base / "master.sock").exists(), "HAProxy's master socket")
        self._wait(lambda: self.get().endswith("boot"), "HAProxy serving the boot config")
        self.start_api()

    def _config(self) -> str:
        socket_ = self.base / "master.sock"
        reload_cmd = "/bin/false" if self.version >= (2, 7) else f"{RELOAD_26} {socket_}"
        tls = ""
        if self.tls:
            cert, key = self.tls
            tls = (
                f"  tls:\n    tls_host: {self.addr}\n    tls_port: {self.api_port}\n"
                f"    tls_certificate: {cert}\n    tls_key: {key}\n"
            )
        scheme = "https" if self.tls else "http"
        # With only https enabled the plain listener is off; it still needs a free port.
        port = free_port() if self.tls else self.api_port
        b = self.base
        return f"""config_version: 2
name: {b.name}
dataplaneapi:
  host: {self.addr}
  port: {port}
  scheme: [{scheme}]
{tls}  transaction:
    transaction_dir: {b}/tx
    backups_dir: {b}/backups
  resources:
    maps_dir: {b}/maps
    ssl_certs_dir: {b}/certs
    general_storage_dir: {b}/files
    spoe_dir: {b}/spoe
    dataplane_storage_dir: {b}/dataplane
  user:
    - name: {USER}
      password: {PASSWORD}
      insecure: true
haproxy:
  config_file: {b}/haproxy.cfg
  haproxy_bin: {self.haproxy_bin}
  master_runtime: {socket_}
  master_worker_mode: true
  reload:
    reload_delay: 1
    reload_cmd: {reload_cmd}
    restart_cmd: /bin/false
"""

    def start_api(self) -> None:
        (self.base / "dataplaneapi.yaml").write_text(self._config())
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "CI_DATAPLANE_RELOAD_DELAY_OVERRIDE": str(self.reload_delay_ms),
        }
        self.api = self._spawn(
            [self.dataplaneapi, "-f", str(self.base / "dataplaneapi.yaml")], "dataplaneapi.log", env
        )
        self._wait(self.api_ready, "dataplaneapi answering")

    def kill_api(self) -> None:
        """SIGKILL the dataplaneapi (a pod's API dying mid-push); HAProxy keeps running."""
        if self.api is not None and self.api.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.api.pid, signal.SIGKILL)
            self.api.wait(timeout=10)

    def stop(self) -> None:
        self.kill_api()
        if self.haproxy is not None and self.haproxy.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.haproxy.pid, signal.SIGTERM)
            try:
                self.haproxy.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.haproxy.pid, signal.SIGKILL)
                self.haproxy.wait()
        shutil.rmtree(self.base, ignore_errors=True)

    # --- looking at it ----------------------------------------------------------------------

    def api_ready(self) -> bool:
        if self.api is not None and self.api.poll() is not None:
            raise RuntimeError(f"dataplaneapi exited:\n{self.log('dataplaneapi.log')}")
        try:
            with socket.create_connection((self.addr, self.api_port), timeout=0.5):
                return True
        except OSError:
            return False

    def get(self, path: str = "/") -> str:
        """One request to HAProxy's frontend (on this machine: loopback or the pod's address)."""
        try:
            with urllib.request.urlopen(f"http://{self.addr}:{self.port}{path}", timeout=3) as r:
                return str(r.read().decode())
        except (OSError, urllib.error.URLError) as exc:
            return f"error: {exc}"

    def log(self, name: str) -> str:
        try:
            return (self.base / name).read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def _wait(self, ready: object, what: str, timeout: float = 20.0) -> None:
        assert callable(ready)
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{what} not within {timeout:g}s\nhaproxy: {self.log('haproxy.log')}\n"
                    f"dataplaneapi: {self.log('dataplaneapi.log')}"
                )
            time.sleep(0.02)


def self_signed(directory: Path, host: str = "127.0.0.1") -> tuple[Path, Path, bytes]:
    """A CA and a serving certificate for ``host``: (cert path, key path, CA PEM)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "htc fleet test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    cert_path, key_path = directory / "api.crt", directory / "api.key"
    cert_path.write_bytes(cert.public_bytes(pem))
    key_path.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path, ca.public_bytes(pem)


def site_pem(directory: Path, host: str = "127.0.0.1") -> bytes:
    """A certificate and its key in one PEM, as HAProxy's ``crt`` reads it."""
    cert, key, _ = self_signed(directory, host)
    return cert.read_bytes() + key.read_bytes()


async def second_writer(pod: HAProxyPod, text: bytes | None = None, *, reload: bool) -> None:
    """Another client writes the pod's configuration (``text``, or what is stored again)."""
    other = DataplaneClient(pod.url, USER, PASSWORD)
    try:
        version, stored = await other.raw()
        assert version is not None
        await other.push_raw(text or stored.encode(), version, skip_reload=not reload)
    finally:
        await other.close()


def target_for(pod: HAProxyPod, metrics: Metrics | None = None, **kw: object) -> DataplaneTarget:
    client = DataplaneClient(pod.url, USER, PASSWORD, timeout=5.0)
    return DataplaneTarget(pod.name, client, metrics=metrics or Metrics(), **kw)  # type: ignore[arg-type]
