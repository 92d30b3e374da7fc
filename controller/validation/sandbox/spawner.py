"""A small helper process that forks the sandboxed programs for a large controller.

``fork`` copies the parent's page tables and takes a reference on every mapped page, and until
the child execs each page the parent writes is copied: the cost grows with the parent's memory.
Measured on the sandbox's own path (``bench/sandbox_spawn.py``; CPU of the calling process,
median of 25 runs of ``haproxy -c``, loaded 2-core machine): the fork took 2-4 ms at 70 MB
RSS, 11-18 ms at 400 MB and 20-27 ms at 800 MB, of a whole run's 8-14, 19-27 and 29-37 ms.
A controller with thousands of objects holds a few hundred MB, and the fork holds the
interpreter lock throughout, so a burst of admission checks pays it once per check on the
one thread that renders. With the helper, the request costs the caller 0.3 ms and a whole
run 6-7 ms at 400 MB and 9 ms at 800 MB (wall time per run 58 -> 32 and 80 -> 40 ms).

So a controller whose RSS is above :data:`MIN_RSS` starts, once, a helper: a fresh interpreter
(started with ``posix_spawn``-like ``vfork``, which does not copy memory) that loads only this
package's system-call modules (``plan``, ``linux``, ``policy``, ``spawn``; about 15 MB). For each
run the controller sends the plan and the child's ends of its pipes over a socket pair; the
helper forks with ``CLONE_PARENT``, so the program is the *controller's* child exactly as
before — the controller waits for it, holds its zombie and kills its group as it did — and
the forked child runs the very same code between fork and exec (``spawn._child``: session,
descriptors, signals, the plan's namespaces, root, uid, ``no_new_privs``, Landlock and
limits). What the child inherits from the helper is what it inherited from the controller:
the helper is a plain child of it (same credentials, capabilities, limits, namespaces,
cgroup, umask), with no other descriptor, no thread, and the signal dispositions a Python
process has, which the child resets anyway.

The helper serves only the process that started it (its socket is inherited by no one else:
a process forked from the controller later does not use it), exits when that socket closes,
and dies with the controller (``PR_SET_PDEATHSIG``). Whenever it is not ready, fails or
answers late, the controller forks in-process as before; after a failure it stops using the
helper for good and says so in the log.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from controller.validation.sandbox.plan import Plan

__all__ = [
    "MIN_RSS",
    "fork_child",
    "helper_pid",
    "request_fork",
    "serve",
    "set_mode",
    "start_helper",
]

#: Below this resident size a fork is cheap (3 ms at 69 MB): no helper is started.
MIN_RSS = 150 * 1024 * 1024
#: How long the controller waits for the helper's answer before it gives up on the helper.
_ANSWER_TIMEOUT = 5.0
_MAX_REQUEST = 1 << 20
_CLONE_PARENT = 0x00008000
_CLONE_NEWPID = 0x20000000
#: The helper's answer: the pid (or minus the errno) and whether it has its own PID namespace.
_ANSWER = struct.Struct("qq")
#: ``clone`` on the architectures where its first argument is the flags and the stack may be
#: null (then the child runs on a copy of the caller's stack, as after ``fork``).
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}
_PACKAGE = Path(__file__).resolve().parent

_mode = "auto"


def set_mode(mode: str) -> None:
    """``auto`` (a helper once RSS exceeds :data:`MIN_RSS`), ``always`` or ``never``; for
    tests and benchmarks. Switching stops a running helper and forgets an earlier failure."""
    global _mode
    if mode not in ("auto", "always", "never"):
        raise ValueError(f"unknown spawner mode {mode!r}")
    _mode = mode
    _HELPER.stop()
    _HELPER.broken = False


def start_helper(timeout: float) -> bool:
    """Start the helper now, whatever the RSS, and wait until it serves (at most ``timeout``
    seconds); whether it does. For a caller that knows it will run many checks (a benchmark,
    a test) rather than let the first ones fork in-process."""
    deadline = time.monotonic() + timeout
    with _HELPER.lock:
        if _HELPER.broken:
            return False
        if _HELPER.proc is None or _HELPER.owner != os.getpid():
            _HELPER.start()
        while not _HELPER.ready and not _HELPER.broken and _HELPER.sock is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            select.select([_HELPER.sock], [], [], left)
            _HELPER.check_ready()
        return _HELPER.ready


def helper_pid() -> int | None:
    """The helper's pid while one is running and ready (for tests)."""
    return _HELPER.pid if _HELPER.ready else None


def request_fork(
    program: bytes, args: list[bytes], workdir: str, plan: Plan, fds: tuple[int, int, int, int]
) -> tuple[int, bool] | None:
    """The pid of a child of this process that the helper forked to run ``spawn._child``
    with these arguments and descriptors (stdin, stdout, stderr, exec status), and whether
    it is in a PID namespace of its own (``plan.pid_namespace``, where the host allows it);
    or None when the caller must fork itself (no helper wanted, not ready yet, or failed)."""
    if _mode == "never" or os.uname().machine not in _SYS_CLONE:
        return None
    if _mode == "auto" and not _HELPER.ready and _rss() < MIN_RSS:
        return None
    return _HELPER.fork((program, args, workdir, plan, fds))


def _rss() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


#: What one fork needs: program, argv, workdir, plan, and stdin, stdout, stderr, exec status.
_Request = tuple[bytes, list[bytes], str, Plan, tuple[int, int, int, int]]


class _Helper:
    """The controller's side: start, ready check, one request at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.owner = 0
        self.ready = False
        self.broken = False
        os.register_at_fork(after_in_child=self._forget)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _forget(self) -> None:
        """In a process forked from the controller: the helper is not ours to use (its
        children would become the controller's), and its socket is closed here."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
        self.proc = self.sock = None
        self.ready = False
        self.lock = threading.Lock()

    def fork(self, request: _Request) -> tuple[int, bool] | None:
        with self.lock:
            if self.broken:
                return None
            if self.proc is None or self.owner != os.getpid():
                self.start()
                return None
            if not self.ready and not self.check_ready():
                return None
            try:
                return self._ask(*request)
            except (OSError, ValueError, pickle.PicklingError) as exc:
                self._fail(f"{type(exc).__name__}: {exc}")
                raise OSError(f"the sandbox's spawn helper failed: {exc}") from exc

    def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _BOOT, str(_PACKAGE), str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                close_fds=True,
                env={},
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            self._fail(f"could not start it: {exc}")
            return
        finally:
            theirs.close()
        self.sock = ours
        self.owner = os.getpid()

    def check_ready(self) -> bool:
        assert self.sock is not None
        readable, _, _ = select.select([self.sock], [], [], 0)
        if not readable:
            return False
        if self.sock.recv(16) != b"R":
            self._fail("it did not start")
            return False
        self.ready = True
        return True

    def _ask(
        self,
        program: bytes,
        args: list[bytes],
        workdir: str,
        plan: Plan,
        fds: tuple[int, int, int, int],
    ) -> tuple[int, bool]:
        assert self.sock is not None
        sent = dataclasses.replace(plan, ruleset_fd=-1)  # the descriptor travels as one
        payload = pickle.dumps((program, args, workdir, sent), protocol=pickle.HIGHEST_PROTOCOL)
        passed = [*fds, *([plan.ruleset_fd] if plan.ruleset_fd >= 0 else [])]
        socket.send_fds(self.sock, [payload], passed)
        readable, _, _ = select.select([self.sock], [], [], _ANSWER_TIMEOUT)
        if not readable:
            raise OSError("no answer in time")
        answer = self.sock.recv(_ANSWER.size)
        if len(answer) != _ANSWER.size:
            raise OSError("it is gone")
        pid, own_namespace = _ANSWER.unpack(answer)
        if pid <= 0:
            raise OSError(-pid, os.strerror(-pid))
        return int(pid), bool(own_namespace)

    def _fail(self, why: str) -> None:
        from controller.observability import get_logger  # not in the helper's imports

        get_logger(__name__).warning(
            "sandbox spawn helper given up; forking in-process from now on", reason=why
        )
        self.broken = True
        self.stop()

    def stop(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
        if self.proc is not None and self.owner == os.getpid():
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired, ChildProcessError):
                self.proc.wait(timeout=5)
        self.proc = self.sock = None
        self.ready = False


_HELPER = _Helper()

#: The helper's whole start: stand-ins for the parent packages (whose ``__init__`` modules
#: would import the controller), then this module's :func:`serve`.
_BOOT = """
import sys, types
root = sys.argv[1]
for name, path in (("controller", root + "/../.."), ("controller.validation", root + "/.."),
                   ("controller.validation.sandbox", root)):
    m = types.ModuleType(name)
    m.__path__ = [path]
    sys.modules[name] = m
from controller.validation.sandbox.spawner import serve
serve(int(sys.argv[2]))
"""


def serve(fd: int) -> None:  # pragma: no cover - runs in the helper process
    """The helper's loop: one fork per request, until the controller closes the socket."""
    from controller.validation.sandbox import linux
    from controller.validation.sandbox.spawn import _child

    parent = os.getppid()
    linux.libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)
    syscall = linux.libc.syscall
    syscall.restype = ctypes.c_long
    number = _SYS_CLONE[os.uname().machine]
    flags = _CLONE_PARENT | signal.SIGCHLD

    def clone(extra: int) -> int:
        pid = int(
            syscall(ctypes.c_long(number), ctypes.c_long(flags | extra), None, None, None, None)
        )
        return pid if pid >= 0 else -(ctypes.get_errno() or 1)

    sock = socket.socket(fileno=fd)
    sock.send(b"R")
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, _MAX_REQUEST, 5, socket.MSG_CMSG_CLOEXEC)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)
        try:
            # Close-on-exec, as the controller made them (the flag above alone measured not
            # to be enough): the exec-status pipe must close when the program starts.
            for passed in fds:
                os.set_inheritable(passed, False)
            program, args, workdir, plan = pickle.loads(data)
            if len(fds) not in (4, 5):
                raise ValueError("wrong number of descriptors")
            if len(fds) == 5:
                plan.ruleset_fd = fds[4]
            pid, own_namespace = fork_child(clone, plan.pid_namespace)
            if pid == 0:
                _child(program, args, workdir, plan, fds[0], fds[1], fds[2], fds[3])
            answer = pid
        except Exception:
            answer, own_namespace = -22, False  # EINVAL: a request this helper cannot read
        for passed in fds:
            with contextlib.suppress(OSError):
                os.close(passed)
        sock.send(_ANSWER.pack(answer, own_namespace))


def fork_child(clone: Callable[[int], int], pid_namespace: bool) -> tuple[int, bool]:
    """Fork through ``clone`` (which takes the extra flags and returns the pid, 0 in the
    child, or minus the errno), into a new PID namespace when ``pid_namespace`` asks for one
    and the host allows it; the result and whether the child got that namespace.

    In its own PID namespace the program is the init: when it exits, the kernel kills every
    process it left there before the exit is reported, so the controller has nothing to look
    for afterwards. A host that refuses new PID namespaces (a seccomp profile, a nested
    container, the per-user limit) gets a plain fork, and the run is swept as one without."""
    if pid_namespace:
        pid = clone(_CLONE_NEWPID)
        if pid >= 0:
            return pid, True
    return clone(0), False
