"""Starting a sandboxed program without waiting for it to reach ``exec``.

``subprocess.Popen`` returns only once its child has called ``exec``, and between fork and
exec a sandboxed child sets up its isolation — namespaces, mounts, the Landlock ruleset, the
uid — for several milliseconds (measured: about 5 ms of a 7 ms spawn). The pipeline parses
the candidate while ``haproxy -c`` starts, so that wait is on the verdict's path. Here the
parent returns right after ``fork``: whether ``exec`` succeeded arrives later on a pipe that
closes on exec (``CLOEXEC``) and otherwise carries the error, like Popen's own.

A worker thread running Popen would not help: each of its many releases of the interpreter
lock waits for the busy event loop's thread to hand it back (up to the 5 ms switch
interval), which measured slower than waiting in place.

A large controller does not fork itself: a small helper forks for it (``spawner``), and the
child, still this process's own, runs the same :func:`_child`.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass

from controller.validation.sandbox.plan import Plan
from controller.validation.sandbox.spawner import request_fork

__all__ = ["Spawned", "exec_error", "spawn"]

_CHILD_FAILED = 127


@dataclass(frozen=True, slots=True)
class Spawned:
    """A started child: its pid (also its session and process group) and the parent's ends
    of its stdout, stderr and exec-status pipes."""

    pid: int
    stdout: int
    stderr: int
    status: int
    own_pid_namespace: bool = False
    """The program is the init of a PID namespace of its own (see ``spawner.fork_child``):
    whatever it leaves behind ends with it."""


def spawn(argv: Sequence[str], workdir: str, plan: Plan) -> Spawned:
    """Fork a child that applies ``plan`` and executes ``argv`` in ``workdir`` with the plan's
    environment (empty but for huge pages), stdin from ``/dev/null``, in a new session;
    return without waiting."""
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    fds: list[int] = [devnull]
    try:
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        fds += [out_r, out_w]
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        fds += [err_r, err_w]
        st_r, st_w = os.pipe2(os.O_CLOEXEC)
        fds += [st_r, st_w]
        program = os.fsencode(argv[0])
        args = [os.fsencode(a) for a in argv]
        forked = request_fork(program, args, workdir, plan, (devnull, out_w, err_w, st_w))
        if forked is None:
            pid, own_namespace = os.fork(), False
            if pid == 0:  # pragma: no cover - the child's coverage is not collected
                _child(program, args, workdir, plan, devnull, out_w, err_w, st_w)
        else:
            pid, own_namespace = forked
    except BaseException:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    for fd in (devnull, out_w, err_w, st_w):
        os.close(fd)
    # Read once the child is gone, when its message (if any) is already in the pipe: never
    # wait there for another process that inherited the write end meanwhile.
    os.set_blocking(st_r, False)
    return Spawned(pid, out_r, err_r, st_r, own_namespace)


def _child(
    program: bytes,
    args: list[bytes],
    workdir: str,
    plan: Plan,
    stdin: int,
    stdout: int,
    stderr: int,
    status: int,
) -> None:
    """Between fork and exec: only system calls, and every path ends in exec or _exit."""
    try:
        os.setsid()
        # dup2 clears CLOEXEC on the targets: these three survive the exec, nothing else.
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        # Python ignores SIGPIPE and an ignored signal stays ignored across exec: give the
        # program the defaults (a write past RLIMIT_FSIZE must kill it, as documented).
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        os.chdir(workdir)
        plan.child()
        os.closerange(3, status)
        os.closerange(status + 1, 1 << 20)
        os.execve(program, args, plan.environment)
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            os.write(status, f"{type(exc).__name__}: {why}".encode(errors="replace")[:1000])
    finally:
        os._exit(_CHILD_FAILED)


def exec_error(status_fd: int) -> str | None:
    """Why the child did not reach exec, or None when it did. Call it once the child has
    exited (whatever it wrote is in the pipe by then) and only once: it closes the
    descriptor."""
    chunks = []
    try:
        while chunk := os.read(status_fd, 4096):
            chunks.append(chunk)
    except BlockingIOError:
        pass  # the write end is still open elsewhere; what the child wrote is read
    except OSError:
        return None
    finally:
        os.close(status_fd)
    return b"".join(chunks).decode(errors="replace") or None
