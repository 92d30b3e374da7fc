"""What a sandboxed program may see and do, and what a run reports back."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = [
    "DEVICES_RO",
    "DEVICES_RW",
    "NETWORK_FILES",
    "SANDBOX_DIR",
    "SYSTEM_DIRS",
    "SYSTEM_FILES",
    "Isolation",
    "Limits",
    "SandboxError",
    "SandboxPolicy",
    "SandboxResult",
]

SANDBOX_DIR = "{sandbox_dir}"
"""Placeholder in ``argv`` (anywhere in an argument): the run's file-set directory."""

#: Read-only system locations every sandboxed program needs to load and resolve names.
SYSTEM_DIRS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
SYSTEM_FILES: tuple[str, ...] = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/localtime",
    "/etc/ssl/openssl.cnf",
    "/etc/ssl/certs",
    "/etc/alternatives",
)
NETWORK_FILES: frozenset[str] = frozenset({"/etc/resolv.conf"})
"""Left out without network: the resolver then only tries the loopback, so no DNS query can
carry data out even where only Landlock (which does not cover UDP) is active."""
DEVICES_RW: tuple[str, ...] = ("/dev/null",)
DEVICES_RO: tuple[str, ...] = ("/dev/urandom", "/dev/random")
"""No ``/proc``, ``/sys``, ``/tmp``, ``/var`` or ``/run``: secrets and other runs live there."""


class SandboxError(Exception):
    """The sandbox could not be set up (bad file set path, spawn failure); not a verdict."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-process resource limits (setrlimit); sized so a 5,000-server config passes.

    Measured: ``haproxy -c`` of 1,000 backends x 5 servers peaks near 42 MB RSS and passes
    with a 64 MB address-space limit on both binaries, so 1 GiB leaves room for large maps and
    certificate sets while still stopping a memory bomb.
    """

    cpu_seconds: int | None = None
    """CPU time; ``None`` means one second more than the wall-clock timeout."""
    address_space: int = 1 << 30
    file_size: int = 16 << 20
    processes: int = 64
    """Counted per uid; with the privilege drop each run has its own uid."""
    open_files: int = 1024

    def cpu_for(self, timeout: float) -> int:
        return self.cpu_seconds if self.cpu_seconds is not None else math.ceil(timeout) + 1


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What a sandboxed program may see and do. Part of every stage fingerprint."""

    limits: Limits = field(default_factory=Limits)
    read_paths: tuple[str, ...] = ()
    """Extra read-only files or directories (e.g. an external validator's installation)."""
    exec_paths: tuple[str, ...] = ()
    """Programs (or directories of programs) that may be executed besides ``argv[0]``."""
    exec_system: bool = False
    """Allow executing anything under the system directories (validators that run tools)."""
    network: bool = False
    """Keep the host network. Off: no TCP via Landlock, no interfaces via a net namespace."""
    landlock: bool = True
    namespaces: bool = True
    drop_privileges: bool = True
    max_output: int = 1 << 20
    """Bytes kept per stream; the rest is drained and dropped."""
    pid_namespace: bool = False
    """With the namespaces, run the program as the init of a PID namespace of its own (where
    the spawn helper forks it): whatever it starts ends with it, and no sweep of the host's
    processes follows the run. An init is spared the signals it raises itself or the kernel
    raises for its own doing while their action is the default (a ``kill`` of itself,
    ``SIGXFSZ``, ``SIGPIPE``, the soft CPU limit's ``SIGXCPU``; a fault still kills it, and
    ``abort()`` ends it by the fault glibc falls back to: ``SIGSEGV``, not ``SIGABRT``), so
    only a program that never counts on dying of those may have it: ``haproxy -c`` does not,
    an external validator might (a crash simulated with ``kill``)."""
    huge_pages: bool = False
    """Let the program's allocator (glibc) back its heap with transparent huge pages late in
    a series of runs (``hugepages.py``): the two ``/sys`` files glibc reads for it are added,
    read-only, and such a run's environment holds ``GLIBC_TUNABLES`` alone.
    For programs that allocate much and whose result does not depend on their environment
    (``haproxy -c``)."""

    def fingerprint(self) -> str:
        lim = self.limits
        return (
            f"cpu={lim.cpu_seconds},as={lim.address_space},fsize={lim.file_size},"
            f"nproc={lim.processes},nofile={lim.open_files};read={sorted(self.read_paths)};"
            f"exec={sorted(self.exec_paths)};execsys={self.exec_system};net={self.network};"
            f"landlock={self.landlock};ns={self.namespaces};uid={self.drop_privileges};"
            f"pidns={self.pid_namespace};huge={self.huge_pages}"
        )


@dataclass(frozen=True, slots=True)
class Isolation:
    """Which kernel isolation a run actually gets on this host."""

    landlock_abi: int = 0
    """0 when Landlock is not used."""
    namespaces: bool = False
    """Private mount root (chroot), network, IPC and UTS namespaces."""
    privilege_drop: bool = False
    """Per-run unprivileged uid/gid, no capabilities."""

    @property
    def confined_filesystem(self) -> bool:
        """True when an allow-list (Landlock or the private mount root) limits file access."""
        return self.landlock_abi > 0 or self.namespaces

    def describe(self) -> str:
        parts = []
        if self.landlock_abi:
            parts.append(f"landlock-v{self.landlock_abi}")
        if self.namespaces:
            parts.append("namespaces")
        if self.privilege_drop:
            parts.append("uid-drop")
        parts += ["no-new-privs", "rlimits", "empty-env", "timeout"]
        return "+".join(parts)


@dataclass(frozen=True, slots=True)
class SandboxResult:
    returncode: int
    """Exit status; negative is the killing signal (as in :mod:`subprocess`)."""
    stdout: str
    stderr: str
    timed_out: bool
    elapsed_ms: float
    workdir_name: str
    """Absolute path of the (already deleted) file-set directory, so callers can redact it."""
    isolation: Isolation = field(default_factory=Isolation)
    truncated: bool = False
    """Output beyond ``max_output`` was dropped."""

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode < 0 else None
