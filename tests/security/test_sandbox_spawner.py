"""The spawn helper (``spawner``) keeps every property of an in-process fork.

A large controller has its sandboxed programs forked by a small helper process, with
``CLONE_PARENT`` so that they are still the controller's children. Every test of how the
sandbox starts its program (``test_sandbox_spawn``), of its limits and clean-up
(``test_sandbox_limits``), of its isolation against an escaping ``lua-load``
(``test_sandbox_escape``) and of the huge pages a check may take (``test_sandbox_hugepages``)
runs here once more with the helper forced on; the tests below check what is particular to
the helper.
"""

from __future__ import annotations

import errno
import os
import secrets
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.render import FileSet
from controller.validation.sandbox import (
    Isolation,
    SandboxError,
    SandboxPolicy,
    run_sandboxed,
    spawner,
)
from controller.validation.sandbox.plan import Plan
from controller.validation.sandbox.spawn import spawn
from tests.security.test_sandbox_escape import (  # noqa: F401 - run again, through the helper
    test_control_without_isolation_does_escape,
    test_environment_is_empty,
    test_lua_cannot_escape,
    test_only_the_sandbox_directory_is_visible,
)
from tests.security.test_sandbox_hugepages import (  # noqa: F401 - run again, through the helper
    close,
    test_a_close_run_gets_the_tunable_as_its_whole_environment,
    test_haproxy_check_in_a_series_takes_huge_pages,
)
from tests.security.test_sandbox_limits import (  # noqa: F401 - run again, through the helper
    _alive_with,
    leave_a_sleeper,
    listener,
    test_a_child_killed_before_it_made_its_own_session_dies,
    test_a_process_that_leaves_the_session_is_killed_too,
    test_cancellation_kills_the_check,
    test_cancellation_right_after_the_fork_kills_the_program_at_once,
    test_network_is_closed,
    test_output_is_capped,
    test_process_limit_stops_fork_bombs,
    test_timeout_kills_the_whole_process_group,
    test_without_network_the_resolver_sees_only_the_loopback_stub,
)
from tests.security.test_sandbox_spawn import (  # noqa: F401 - run again, through the helper
    test_a_broken_pipe_ends_the_writer_by_signal,
    test_a_program_that_cannot_be_started_is_a_set_up_error,
    test_a_write_past_the_file_size_limit_kills_the_writer,
    test_an_exec_that_fails_says_why,
    test_the_child_gets_only_stdin_stdout_and_stderr_and_no_environment,
    test_the_child_is_a_session_leader,
)

pytestmark = pytest.mark.haproxy

TOOLS = SandboxPolicy(exec_system=True)
INIT = SandboxPolicy(exec_system=True, pid_namespace=True)


@pytest.fixture(autouse=True)
def through_the_helper() -> Iterator[int]:
    spawner.set_mode("always")
    assert spawner.start_helper(timeout=20)
    pid = spawner.helper_pid()
    assert pid is not None
    yield pid
    spawner.set_mode("auto")


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def test_the_helper_forks_a_child_of_this_process(tmp_path: Path, through_the_helper: int) -> None:
    plan = Plan(limits=[], workdir=str(tmp_path), isolation=Isolation(), uid=None)
    child = spawn(["/bin/sleep", "5"], str(tmp_path), plan)
    try:
        assert child.pid != through_the_helper
        assert _parent_of(child.pid) == os.getpid()
        assert _parent_of(through_the_helper) == os.getpid()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        os.waitpid(child.pid, 0)  # ours to reap: it would raise for another's child
        for fd in (child.stdout, child.stderr, child.status):
            os.close(fd)


def test_the_helper_holds_nothing_but_its_socket(through_the_helper: int) -> None:
    fds = os.listdir(f"/proc/{through_the_helper}/fd")
    assert len(fds) == 4  # stdin and stdout on /dev/null, stderr, the socket
    assert os.getsid(through_the_helper) == through_the_helper


def test_a_forked_process_does_not_use_the_parents_helper() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.write(write, b"none" if spawner.helper_pid() is None else b"kept")
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as f:
        assert f.read() == b"none"
    assert spawner.helper_pid() is not None


async def test_a_dead_helper_is_given_up_and_this_process_forks_again(
    through_the_helper: int,
) -> None:
    os.kill(through_the_helper, signal.SIGKILL)
    time.sleep(0.1)
    with pytest.raises(SandboxError, match="spawn helper failed"):
        await run_sandboxed(["/bin/true"], FileSet(), timeout=5, policy=TOOLS)
    result = await run_sandboxed(["/bin/echo", "ok"], FileSet(), timeout=5, policy=TOOLS)
    assert (result.returncode, result.stdout) == (0, "ok\n")
    assert spawner.helper_pid() is None
    with pytest.raises(ChildProcessError):
        os.waitpid(through_the_helper, os.WNOHANG)  # reaped when given up


def test_a_small_process_starts_no_helper() -> None:
    spawner.set_mode("auto")
    plan = Plan(limits=[], workdir="/", isolation=Isolation(), uid=None)
    child = spawn(["/bin/true"], "/", plan)
    os.waitpid(child.pid, 0)
    for fd in (child.stdout, child.stderr, child.status):
        os.close(fd)
    assert spawner.helper_pid() is None


async def test_a_run_that_asks_for_it_is_the_init_of_its_own_pid_namespace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the program leaves behind, even in a session of its own, ends with it: no sweep
    of the host's processes is needed (and none is made) after such a run. A policy that
    does not ask for it (an external validator's) is swept, and still leaves nothing."""
    from controller.validation.sandbox import isolation_for, run

    if not isolation_for(TOOLS).namespaces:
        pytest.skip("needs namespaces (root with CAP_SYS_ADMIN)")
    swept: list[int] = []
    real = run._leftovers

    def spy(session: int, uid: int | None) -> list[int]:
        swept.append(session)
        return real(session, uid)

    monkeypatch.setattr(run, "_leftovers", spy)
    marker = f"{90 + secrets.randbelow(1000) / 1000:.3f}"
    res = await leave_a_sleeper(marker, INIT, before="echo $$; ")
    assert (res.returncode, res.stdout) == (0, "1\n")
    assert _alive_with(f"sleep {marker}") == []
    assert swept == []
    res = await leave_a_sleeper(marker, TOOLS, before="echo $$; ")
    assert res.returncode == 0 and res.stdout != "1\n" and len(swept) >= 1
    assert _alive_with(f"sleep {marker}") == []


async def test_only_an_init_survives_a_signal_it_sends_itself() -> None:
    """Why the PID namespace is opt-in: an init ignores a default-action signal it raises
    itself (a validator simulating a crash), while a fault still ends it. ``haproxy -c``,
    the one program that asks for it, never signals itself."""
    from controller.validation.sandbox import isolation_for

    if not isolation_for(TOOLS).namespaces:
        pytest.skip("needs namespaces (root with CAP_SYS_ADMIN)")
    kill_self = ["/bin/sh", "-c", "kill -SEGV $$; echo survived"]
    res = await run_sandboxed(kill_self, FileSet(), timeout=5, policy=TOOLS)
    assert res.returncode == -signal.SIGSEGV and res.stdout == ""
    res = await run_sandboxed(kill_self, FileSet(), timeout=5, policy=INIT)
    assert (res.returncode, res.stdout) == (0, "survived\n")
    fault = [sys.executable, "-c", "import ctypes; ctypes.string_at(0)"]
    res = await run_sandboxed(fault, FileSet(), timeout=5, policy=INIT)
    assert res.returncode == -signal.SIGSEGV


def test_the_haproxy_stage_asks_for_its_own_pid_namespace(haproxy_bin: str) -> None:
    from controller.validation.haproxy.binary import HaproxyBinary
    from controller.validation.haproxy.stage import HaproxyStage

    assert not SandboxPolicy().pid_namespace
    stage = HaproxyStage(HaproxyBinary.detect(haproxy_bin), timeout=5)
    assert stage.policy.pid_namespace and "pidns=True" in stage.fingerprint()


def test_a_host_that_refuses_pid_namespaces_gets_a_plain_fork() -> None:
    calls: list[int] = []

    def refusing(extra: int) -> int:
        calls.append(extra)
        return -errno.EPERM if extra else 4242

    def allowing(extra: int) -> int:
        calls.append(extra)
        return 77

    assert spawner.fork_child(refusing, pid_namespace=True) == (4242, False)
    assert calls == [spawner._CLONE_NEWPID, 0]
    calls.clear()
    assert spawner.fork_child(allowing, pid_namespace=True) == (77, True)
    assert calls == [spawner._CLONE_NEWPID]
    calls.clear()
    assert spawner.fork_child(allowing, pid_namespace=False) == (77, False)
    assert calls == [0]
