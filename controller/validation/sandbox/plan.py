"""Everything a run needs, computed in the parent; the child only replays it as syscalls.

The allow-list (system libraries, a few ``/etc`` files, three devices, the program's own
installation and the run's directory) feeds both Landlock rules and the bind mounts of the
private root, so the two layers can never disagree about what a program may see.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from controller.validation.sandbox import linux
from controller.validation.sandbox.hugepages import THP_FILES
from controller.validation.sandbox.linux import (
    FS_EXECUTE,
    FS_READ_DIR,
    FS_READ_FILE,
    FS_TRUNCATE,
    FS_WRITE_FILE,
)
from controller.validation.sandbox.policy import (
    DEVICES_RO,
    DEVICES_RW,
    NETWORK_FILES,
    SYSTEM_DIRS,
    SYSTEM_FILES,
    Isolation,
    SandboxPolicy,
)

__all__ = ["Plan", "build_plan"]


def _symlink_chain(path: str) -> tuple[list[tuple[str, str]], str]:
    """Resolve ``path`` by hand: every symlink met on the way (link, target) and the result.

    The private mount root recreates those links so that a program sees the same paths
    (``.venv -> /opt/venv``, ``/lib64 -> usr/lib64``) as outside.
    """
    links: list[tuple[str, str]] = []
    pending = list(PurePosixPath(os.path.normpath(path)).parts[1:])
    cur = "/"
    hops = 0
    while pending:
        name = pending.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, name)
        if os.path.islink(nxt):
            hops += 1
            if hops > 40:
                break
            target = os.readlink(nxt)
            links.append((nxt, target))
            tparts = PurePosixPath(target).parts
            if target.startswith("/"):
                cur = "/"
                tparts = tparts[1:]
            pending = list(tparts) + pending
        else:
            cur = nxt
    return links, cur


def _prefix(path: str) -> str | None:
    """Installation prefix of a program (``/opt/x/bin/tool`` → ``/opt/x``); None for system
    programs, whose prefix (``/``, ``/usr``) is either covered already or far too wide."""
    d = os.path.dirname(path)
    prefix = os.path.dirname(d) if os.path.basename(d) in ("bin", "sbin") else d
    if prefix == "/" or _under(prefix, SYSTEM_DIRS):
        return None
    return prefix


# --- the plan: everything computed in the parent, applied in the child ----------------------


@dataclass
class _Bind:
    source: bytes
    target: bytes
    is_dir: bool
    writable: bool = False
    device: bool = False
    optional: bool = False
    """Skipped where the target cannot be a plain mount point (a symlink, or missing inside
    a tree bound read-only before): for the resolver stub, whose absence only fails
    ``parse-resolv-conf``."""


@dataclass
class Plan:
    """Parent-side preparation; ``child`` runs between fork and exec and only makes syscalls."""

    limits: list[tuple[int, int, int]]
    workdir: str
    isolation: Isolation
    uid: int | None
    ruleset_fd: int = -1
    unshare_flags: int = 0
    root: bytes = b""
    binds: list[_Bind] = field(default_factory=list)
    symlinks: list[tuple[str, str]] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    pid_namespace: bool = False
    """Fork the program into a PID namespace of its own, where it is the init (the policy's
    ``pid_namespace``). ``CLONE_NEWPID`` is a flag of the fork itself, so only the spawn
    helper (which forks with ``clone``) can honour it; see ``spawner.fork_child``."""
    proc: bool = False
    """Mount a procfs that shows only the run's own processes (``hidepid``): the dynamic
    loader needs ``/proc/self/exe`` to resolve ``$ORIGIN`` run paths."""
    environment: dict[bytes, bytes] = field(default_factory=dict)
    """The program's whole environment: empty, or :data:`hugepages.ENVIRONMENT` for a run
    of a ``huge_pages`` policy late in a series."""

    def child(self) -> None:
        # Limits come last: the forked child still maps the whole controller, and an
        # address-space limit below that would make this very function fail.
        if self.unshare_flags:
            if linux.libc.unshare(self.unshare_flags) != 0:
                raise linux.errno_error("unshare")
            self._enter_root()
        if self.uid is not None:
            os.setgroups([])
            os.setresgid(self.uid, self.uid, self.uid)
            os.setresuid(self.uid, self.uid, self.uid)
        if linux.libc.prctl(linux.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise linux.errno_error("prctl(NO_NEW_PRIVS)")
        if self.ruleset_fd >= 0:
            linux.restrict_self(self.ruleset_fd)
        for res, soft, hard in self.limits:
            resource.setrlimit(res, (soft, hard))

    def _mount(self, src: bytes | None, dst: bytes, fs: bytes | None, flags: int) -> None:
        if linux.libc.mount(src, dst, fs, flags, None) != 0:
            raise linux.errno_error(f"mount {dst!r}")

    def _mount_data(self, src: bytes, dst: bytes, fs: bytes, flags: int, data: bytes) -> None:
        if linux.libc.mount(src, dst, fs, flags, data) != 0:
            raise linux.errno_error(f"mount {dst!r}")

    def _enter_root(self) -> None:
        root = self.root
        self._mount(None, b"/", None, linux.MS_REC | linux.MS_PRIVATE)
        self._mount_data(
            b"tmpfs", root, b"tmpfs", linux.MS_NOSUID | linux.MS_NODEV, b"mode=0755,size=1m"
        )
        rs = root.decode()
        for d in self.dirs:
            os.makedirs(rs + d, mode=0o755, exist_ok=True)
        for b in self.binds:
            tgt = b.target
            if b.is_dir:
                os.makedirs(tgt, mode=0o755, exist_ok=True)
            elif b.optional and os.path.islink(tgt):
                continue  # mounting would follow the link
            elif not os.path.lexists(tgt):
                # A mount point; an existing file (inside a tree bound read-only before,
                # such as the resolver stub over /etc/resolv.conf) serves as it is.
                try:
                    os.makedirs(os.path.dirname(tgt), mode=0o755, exist_ok=True)
                    os.close(os.open(tgt, os.O_CREAT | os.O_WRONLY, 0o644))
                except OSError:
                    if b.optional:
                        continue
                    raise
            self._mount(b.source, tgt, None, linux.MS_BIND | linux.MS_REC)
            flags = linux.MS_BIND | linux.MS_REMOUNT | linux.MS_NOSUID
            if not b.writable:
                flags |= linux.MS_RDONLY
            if not b.device:
                flags |= linux.MS_NODEV
            self._mount(None, tgt, None, flags)
        for link, target in self.symlinks:
            full = rs + link
            if os.path.lexists(full):
                continue
            os.makedirs(os.path.dirname(full), mode=0o755, exist_ok=True)
            os.symlink(target, full)
        if self.proc:
            proc_dir = root + b"/proc"
            os.makedirs(proc_dir, mode=0o555, exist_ok=True)
            flags = linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC
            if linux.libc.mount(b"proc", proc_dir, b"proc", flags, b"hidepid=invisible,subset=pid"):
                # Kernels before 5.8 know only the older spelling.
                self._mount_data(b"proc", proc_dir, b"proc", flags, b"hidepid=2")
        self._mount(
            b"tmpfs",
            root,
            b"tmpfs",
            linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV,
        )
        os.chroot(root)
        os.chdir(self.workdir)

    def close(self) -> None:
        if self.ruleset_fd >= 0:
            os.close(self.ruleset_fd)
            self.ruleset_fd = -1


OFFLINE_RESOLV_CONF = (
    b"# The sandbox has no network: names resolve through the loopback only.\n"
    b"nameserver 127.0.0.1\n"
)
"""The resolver configuration a run without network sees (with a private root).

Without ``/etc/resolv.conf`` the C library already asks only the loopback, so this stub
changes nothing there; but HAProxy's ``parse-resolv-conf`` needs a file to read, and would
otherwise fail the check of a configuration that is fine wherever it is deployed. The host's
own file stays out (see ``NETWORK_FILES``)."""


def _allow_list(argv0: str, policy: SandboxPolicy) -> tuple[list[tuple[str, int, bool]], list[str]]:
    """(path, landlock rights, writable) for everything the program may touch besides its
    run's directory, plus paths whose symlink chains the private root must recreate."""
    ro = FS_READ_FILE | FS_READ_DIR
    rx = ro | FS_EXECUTE
    entries: list[tuple[str, int, bool]] = []
    chains: list[str] = []
    sys_rights = rx if policy.exec_system else ro
    for d in SYSTEM_DIRS:
        entries.append((d, sys_rights, False))
    for f in SYSTEM_FILES:
        if f in NETWORK_FILES and not policy.network:
            continue
        entries.append((f, rx if (policy.exec_system and f == "/etc/alternatives") else ro, False))
    for dev in DEVICES_RW:
        entries.append((dev, FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE, True))
    for dev in DEVICES_RO:
        entries.append((dev, FS_READ_FILE, False))
    # The program itself, its loader and its installation prefix (bundled libraries,
    # a virtualenv's pyvenv.cfg): readable, and the program and loader executable.
    real0 = os.path.realpath(argv0)
    for prefix in {_prefix(os.path.abspath(argv0)), _prefix(real0)} - {None}:
        assert prefix is not None
        entries.append((prefix, ro, False))
        chains.append(prefix)
    entries.append((real0, FS_READ_FILE | FS_EXECUTE, False))
    chains.append(os.path.abspath(argv0))
    interp = linux.elf_interpreter(real0)
    if interp:
        entries.append((os.path.realpath(interp), FS_READ_FILE | FS_EXECUTE, False))
        chains.append(interp)
    for p in policy.exec_paths:
        entries.append((p, rx, False))
        chains.append(p)
    for p in policy.read_paths:
        entries.append((p, ro, False))
        chains.append(p)
    if policy.huge_pages:
        entries.extend((p, ro, False) for p in THP_FILES)
    return entries, chains


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


@dataclass(frozen=True)
class _Layout:
    """What the allow-list of a program and policy resolves to on this host, the same for
    every run: the entries, the real paths to bind (path, is a directory, writable, device),
    the directories among them, and the symlinks met on the way with each one's resolved
    parent directory."""

    entries: tuple[tuple[str, int, bool], ...]
    binds: tuple[tuple[str, bool, bool, bool], ...]
    seen: frozenset[str]
    bound: tuple[str, ...]
    entry_links: tuple[tuple[str, str], ...]
    chain_links: tuple[tuple[str, str], ...]
    parents: dict[str, str]


LAYOUT_TTL = 5.0
"""Seconds a resolved allow-list serves later runs. Resolving it walks every symlink of about
forty paths (1.2 ms of this process's interpreter per run at the admission webhook's rate);
a burst of checks shares one. A symlink changed meanwhile (a package upgrade) can only make
a bind miss its target, which fails that run's start (E4012): the Landlock rules, the other
layer, are made from the paths afresh for every run."""

_layouts: dict[tuple[str, SandboxPolicy], tuple[float, _Layout]] = {}


def _layout(argv0: str, policy: SandboxPolicy) -> _Layout:
    key = (argv0, policy)
    now = time.monotonic()
    found = _layouts.get(key)
    if found is not None and now - found[0] < LAYOUT_TTL:
        return found[1]
    entries, chains = _allow_list(argv0, policy)
    binds: list[tuple[str, bool, bool, bool]] = []
    seen: set[str] = set()
    bound: list[str] = []
    entry_links: list[tuple[str, str]] = []
    for path, _rights, writable in entries:
        links, real = _symlink_chain(path)
        entry_links.extend(links)
        if not os.path.lexists(real) or real in seen or _under(real, bound):
            continue
        seen.add(real)
        is_dir = os.path.isdir(real)
        binds.append((real, is_dir, writable, real.startswith("/dev/")))
        if is_dir:
            bound.append(real)
    chain_links = [link for c in chains for link in _symlink_chain(c)[0]]
    parents = {
        link: _symlink_chain(os.path.dirname(link))[1] for link, _ in entry_links + chain_links
    }
    layout = _Layout(
        tuple(entries),
        tuple(binds),
        frozenset(seen),
        tuple(bound),
        tuple(entry_links),
        tuple(chain_links),
        parents,
    )
    if len(_layouts) >= 8:
        _layouts.clear()
    _layouts[key] = (now, layout)
    return layout


def build_plan(
    argv0: str,
    policy: SandboxPolicy,
    iso: Isolation,
    workdir: str,
    root: str,
    uid: int | None,
    timeout: float,
) -> Plan:
    lim = policy.limits
    cpu = lim.cpu_for(timeout)
    limits = [
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_AS, lim.address_space, lim.address_space),
        (resource.RLIMIT_FSIZE, lim.file_size, lim.file_size),
        (resource.RLIMIT_NPROC, lim.processes, lim.processes),
        (resource.RLIMIT_NOFILE, lim.open_files, lim.open_files),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    plan = Plan(limits=limits, workdir=workdir, isolation=iso, uid=uid)
    layout = _layout(argv0, policy)
    entries = [*layout.entries, (workdir, FS_READ_FILE | FS_READ_DIR, False)]
    stub = None
    if iso.namespaces and not policy.network:
        # Beside the root, bound over /etc/resolv.conf in it below; readable for Landlock.
        stub = os.path.join(os.path.dirname(root), "resolv.conf")
        with open(stub, "xb") as f:
            f.write(OFFLINE_RESOLV_CONF)
        os.chmod(stub, 0o644)
        entries.append((stub, FS_READ_FILE, False))
    if iso.landlock_abi:
        plan.ruleset_fd = linux.landlock_ruleset(
            iso.landlock_abi, [(p, r) for p, r, _ in entries], deny_tcp=not policy.network
        )
    if iso.namespaces:
        try:
            plan.unshare_flags = linux.CLONE_NEWNS | linux.CLONE_NEWIPC | linux.CLONE_NEWUTS
            if not policy.network:
                plan.unshare_flags |= linux.CLONE_NEWNET
            plan.pid_namespace = policy.pid_namespace
            plan.root = root.encode()
            plan.proc = uid is not None
            bound = list(layout.bound)
            binds = list(layout.binds)
            # The run's directory, last as in the entries: resolved for every run.
            links, real = _symlink_chain(workdir)
            plan.symlinks.extend(layout.entry_links)
            plan.symlinks.extend(links)
            if os.path.lexists(real) and real not in layout.seen and not _under(real, bound):
                is_dir = os.path.isdir(real)
                binds.append((real, is_dir, False, real.startswith("/dev/")))
                if is_dir:
                    bound.append(real)
            for real, is_dir, writable, device in binds:
                plan.binds.append(
                    _Bind(
                        source=real.encode(),
                        target=(root + real).encode(),
                        is_dir=is_dir,
                        writable=writable,
                        device=device,
                    )
                )
            if stub is not None:
                plan.binds.append(
                    _Bind(
                        stub.encode(),
                        (root + "/etc/resolv.conf").encode(),
                        is_dir=False,
                        optional=True,
                    )
                )
            plan.symlinks.extend(layout.chain_links)
            # Symlinks inside bound trees already exist there; keep the others, once.
            uniq: dict[str, str] = {}
            for link, target in plan.symlinks:
                parent_real = layout.parents.get(link)
                if parent_real is None:
                    parent_real = _symlink_chain(os.path.dirname(link))[1]
                if not _under(parent_real, bound):
                    uniq.setdefault(link, target)
            plan.symlinks = list(uniq.items())
            plan.dirs = sorted({os.path.dirname(link) for link in uniq})
        except BaseException:
            plan.close()
            raise
    return plan
