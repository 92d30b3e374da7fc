"""A real control plane for tests: builds and starts ``hack/cluster`` and hands out clients.

The binary (embedded etcd, kube-apiserver, kube-controller-manager and kubectl of one pinned
release) is built by ``hack/cluster/build.sh`` into a cache outside the repository; building is
a no-op when the cached binary matches. The process prints ``export KUBECONFIG=<path>`` once
``/readyz`` answers and the given manifests (our CRD) are applied and established: that line is
the readiness signal this module waits for.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from controller.deploy import PARENT_DEATH_SIGNAL

REPO = Path(__file__).resolve().parent.parent.parent
HACK = REPO / "hack" / "cluster"
CRDS = REPO / "deploy" / "crds"
READY_PREFIX = "export KUBECONFIG="


class ClusterError(RuntimeError):
    """The control plane could not be built or started; the message carries its log."""


def can_build() -> str | None:
    """Why the control plane cannot be built here, or None when it can."""
    if shutil.which("go") is None and not os.environ.get("HTC_CLUSTER_BIN"):
        return "the control plane is built from Go modules and no Go toolchain (go) is on PATH"
    return None


def build() -> Path:
    """The control-plane binary: ``$HTC_CLUSTER_BIN``, else built (or reused) by build.sh."""
    given = os.environ.get("HTC_CLUSTER_BIN")
    if given:
        return Path(given)
    proc = subprocess.run(
        ["bash", str(HACK / "build.sh")], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise ClusterError(f"building the control plane failed:\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


class ControlPlane:
    """One running control plane; ``kubectl()`` runs the same release's kubectl against it."""

    def __init__(
        self,
        binary: Path,
        apply: Sequence[Path] = (CRDS,),
        ready_timeout: float = 120.0,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.binary = binary
        self.apply = list(apply)
        self.ready_timeout = ready_timeout
        self.extra_args = list(extra_args)
        self.kubeconfig: Path | None = None
        self.ready_seconds: float | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: list[str] = []

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        args = [str(self.binary)]
        for path in self.apply:
            args += ["-apply", str(path)]
        args += self.extra_args
        started = time.monotonic()
        self._proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            # A test run that is killed (a timeout, kill -9) takes its control plane with it.
            preexec_fn=PARENT_DEATH_SIGNAL,
        )
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        line = self._read_ready_line()
        self.ready_seconds = time.monotonic() - started
        self.kubeconfig = Path(line[len(READY_PREFIX) :].strip())

    def _drain_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-200]

    def _read_ready_line(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        result: list[str] = []

        def read() -> None:
            assert self._proc is not None and self._proc.stdout is not None
            for line in self._proc.stdout:
                if line.startswith(READY_PREFIX):
                    result.append(line)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(self.ready_timeout)
        if not result:
            self.stop()
            raise ClusterError(
                f"control plane not ready within {self.ready_timeout:.0f} s:\n"
                + "".join(self._stderr[-40:])
            )
        return result[0]

    def stop(self) -> None:
        """SIGTERM, then wait: the supervisor stops its children and removes its data."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop_apiserver(self) -> None:
        """Fault injection: the API server stops; etcd and its data stay (SIGUSR1)."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0:
            if time.monotonic() > deadline:
                raise ClusterError("the API server did not stop")
            time.sleep(0.2)

    def start_apiserver(self, timeout: float = 60.0) -> None:
        """Start the API server again on the same port (SIGUSR2); returns once it is ready."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + timeout
        while self.kubectl("get", "--raw", "/readyz", check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise ClusterError("the API server did not come back")
            time.sleep(0.2)

    @property
    def kubectl_binary(self) -> Path:
        return self.binary.parent / "kubectl"

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned release's kubectl with this control plane's admin kubeconfig."""
        proc = subprocess.run(
            [str(self.kubectl_binary), "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if check and proc.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc

    def api_client(self, token: str | None = None) -> Any:
        """A ``kubernetes`` ApiClient: the admin identity, or a bearer ``token`` (no client cert)."""
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig), client_configuration=cfg
        )
        if token is not None:
            cfg.cert_file = cfg.key_file = None
            cfg.api_key = {"authorization": f"Bearer {token}"}
        return client.ApiClient(cfg)


@dataclass
class Namespace:
    """A fresh namespace for one test, and the admin client to use in it."""

    name: str
    plane: ControlPlane
    api: Any

    def apply(self, manifest: str) -> str:
        """``kubectl apply`` YAML into this namespace; returns kubectl's output."""
        return self.plane.kubectl("apply", "-n", self.name, "-f", "-", input=manifest).stdout

    def mint_token(
        self, service_account: str, audiences: Sequence[str] = (), seconds: int = 3600
    ) -> str:
        """A token for a ServiceAccount of this namespace (created when missing), via TokenRequest."""
        from kubernetes import client

        core = client.CoreV1Api(self.api)
        with contextlib.suppress(client.ApiException):
            core.create_namespaced_service_account(
                self.name, client.V1ServiceAccount(metadata={"name": service_account})
            )
        spec = client.V1TokenRequestSpec(audiences=list(audiences), expiration_seconds=seconds)
        made = core.create_namespaced_service_account_token(
            service_account, self.name, client.AuthenticationV1TokenRequest(spec=spec)
        )
        assert made.status is not None
        return str(made.status.token)


@contextlib.contextmanager
def namespace(plane: ControlPlane, prefix: str = "t") -> Iterator[Namespace]:
    """Create a namespace, yield it, delete it without waiting (the namespace controller finishes)."""
    from kubernetes import client

    api = plane.api_client()
    core = client.CoreV1Api(api)
    name = f"{prefix}-{secrets.token_hex(4)}"
    core.create_namespace(client.V1Namespace(metadata={"name": name}))
    # Pods are refused until the controller manager has made the namespace's default
    # ServiceAccount (the ServiceAccount admission plugin): wait for it, briefly.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_service_account("default", name)
            break
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            time.sleep(0.1)
    try:
        yield Namespace(name, plane, api)
    finally:
        with contextlib.suppress(client.ApiException):
            core.delete_namespace(name)
        api.close()
