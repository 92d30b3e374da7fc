"""Time, processes, network, output and concurrency limits of the sandbox, with real processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.render import FileSet
from controller.validation import sandbox
from controller.validation.sandbox import SandboxPolicy, isolation_for, run_sandboxed
from controller.validation.sandbox.run import _cpu_count

TOOLS = SandboxPolicy(exec_system=True)


def _alive_with(marker: str) -> list[int]:
    """Non-zombie processes whose command line contains ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmd and state != "Z":
            found.append(int(name))
    return found


async def test_timeout_kills_the_whole_process_group() -> None:
    marker = f"{60 + secrets.randbelow(1000) / 1000:.3f}"
    started = time.monotonic()
    res = await run_sandboxed(
        ["/bin/sh", "-c", f"sleep {marker} & sleep {marker} & wait"],
        FileSet(),
        timeout=0.5,
        policy=TOOLS,
    )
    assert time.monotonic() - started < 1.5
    assert res.timed_out and res.returncode < 0
    assert _alive_with(f"sleep {marker}") == []


async def leave_a_sleeper(
    marker: str, policy: SandboxPolicy = TOOLS, before: str = ""
) -> sandbox.SandboxResult:
    """A sandboxed shell that runs ``before``, then leaves ``sleep MARKER`` behind in a
    session of its own and exits."""
    return await run_sandboxed(
        ["/bin/sh", "-c", f"{before}setsid sleep {marker} </dev/null >/dev/null 2>&1 & exit 0"],
        FileSet(),
        timeout=5,
        policy=policy,
    )


async def test_a_process_that_leaves_the_session_is_killed_too() -> None:
    if not isolation_for(TOOLS).privilege_drop:
        pytest.skip("needs the per-run uid (controller not running as root)")
    marker = f"{70 + secrets.randbelow(1000) / 1000:.3f}"
    res = await leave_a_sleeper(marker)
    assert res.returncode == 0 and not res.timed_out
    assert _alive_with(f"sleep {marker}") == []


def test_a_process_name_cannot_fake_the_fields_the_sweep_reads() -> None:
    """The sweep after a run reads the state, uid and session from ``/proc/PID/status``; a
    program names itself (here ``x`` newline ``Uid: 7``) and the kernel escapes the name."""
    import subprocess
    import sys

    from controller.validation.sandbox.run import _leftovers, _status_field

    code = (
        "import ctypes, sys; ctypes.CDLL(None).prctl(15, b'x\\nUid:\\t7', 0, 0, 0); "
        "sys.stdout.write('ok\\n'); sys.stdout.flush(); sys.stdin.read()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ok\n"
        status = Path(f"/proc/{proc.pid}/status").read_bytes()
        assert status.split(b"\n", 1)[0] == b"Name:\tx\\nUid:\t7"  # one line, escaped
        assert _status_field(status, b"Uid") == str(os.getuid()).encode()
        assert _status_field(status, b"State") in (b"S", b"R")
        assert proc.pid not in _leftovers(proc.pid + 10**7, 7)
        assert proc.pid in _leftovers(os.getsid(0), None)
    finally:
        proc.kill()
        proc.wait()


def test_the_sweep_reads_a_proc_file_whole(tmp_path: Path) -> None:
    """``_read_proc`` reads until the end, not one chunk: a status with thousands of
    supplementary groups puts ``NSsid`` far down the file (here a plain file of three
    chunks stands in for it), and the session must be read there, not assumed missing."""
    from controller.validation.sandbox import run

    body = b"Groups:\t" + b" ".join(b"%d" % g for g in range(40_000)) + b"\nNSsid:\t4242\n"
    assert len(body) > 2 * run._PROC_CHUNK
    path = tmp_path / "status"
    path.write_bytes(body)
    read = run._read_proc(str(path))
    assert read == body
    assert run._status_field(read, b"NSsid") == b"4242"


async def test_cancellation_kills_the_check() -> None:
    marker = f"{80 + secrets.randbelow(1000) / 1000:.3f}"
    task = asyncio.create_task(
        run_sandboxed(["/bin/sleep", marker], FileSet(), timeout=30, policy=TOOLS)
    )
    for _ in range(100):
        await asyncio.sleep(0.02)
        if _alive_with(f"sleep {marker}"):
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _alive_with(f"sleep {marker}") == []


def test_a_child_killed_before_it_made_its_own_session_dies() -> None:
    """Right after the fork the child is still in our process group: killing "its" group
    would miss it (there is no such group yet), so it must be killed by pid as well."""
    from controller.validation.sandbox.run import _kill_all

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        time.sleep(5)
        os._exit(0)
    try:
        assert os.getpgid(pid) == os.getpgid(0)  # not its own group
        _kill_all(pid, None)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, 9)
            os.waitpid(pid, 0)


async def test_cancellation_right_after_the_fork_kills_the_program_at_once() -> None:
    """Cancelled while the child may still be setting up its isolation, the program must
    still be killed, and the cancellation must not wait for it to end by itself."""
    for _ in range(10):
        marker = f"{90 + secrets.randbelow(1000) / 1000:.3f}"
        task = asyncio.create_task(
            run_sandboxed(["/bin/sleep", marker], FileSet(), timeout=30, policy=TOOLS)
        )
        await asyncio.sleep(0)  # the task forks, then waits for its pipes
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < 1.0
        assert _alive_with(f"sleep {marker}") == []


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, int]]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    yield s, s.getsockname()[1]
    s.close()


def _accepted(s: socket.socket) -> bool:
    try:
        conn, _ = s.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


CONNECT = (
    "import socket,sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2).close()\n"
    "    print('connected')\n"
    "except OSError as e:\n"
    "    print('refused', e.errno)\n"
)


async def test_network_is_closed(listener: tuple[socket.socket, int]) -> None:
    s, port = listener
    res = await run_sandboxed(
        ["/usr/bin/python3", "-I", "-c", CONNECT, str(port)], FileSet(), timeout=5, policy=TOOLS
    )
    assert res.stdout.startswith("refused"), res.stdout + res.stderr
    assert not _accepted(s)


async def test_without_network_the_resolver_sees_only_the_loopback_stub() -> None:
    from controller.validation.sandbox.plan import OFFLINE_RESOLV_CONF

    if not isolation_for(TOOLS).namespaces:
        pytest.skip("the stub lives in the private mount root (needs namespaces)")
    res = await run_sandboxed(["/bin/cat", "/etc/resolv.conf"], FileSet(), timeout=5, policy=TOOLS)
    assert res.returncode == 0 and res.stdout == OFFLINE_RESOLV_CONF.decode(), res.stderr
    # Also when a policy lets the program read all of /etc (bound read-only before the stub).
    wide = SandboxPolicy(exec_system=True, read_paths=("/etc",))
    res = await run_sandboxed(["/bin/cat", "/etc/resolv.conf"], FileSet(), timeout=5, policy=wide)
    assert res.returncode == 0 and res.stdout == OFFLINE_RESOLV_CONF.decode(), res.stderr
    # With network, the host's own file is what the program reads.
    policy = SandboxPolicy(exec_system=True, network=True)
    res = await run_sandboxed(["/bin/cat", "/etc/resolv.conf"], FileSet(), timeout=5, policy=policy)
    host = Path("/etc/resolv.conf")
    assert res.stdout == (host.read_text() if host.exists() else ""), res.stderr


async def test_network_control_when_allowed(listener: tuple[socket.socket, int]) -> None:
    """The same program connects when the policy keeps the network: the test above can fail."""
    s, port = listener
    policy = SandboxPolicy(exec_system=True, network=True)
    res = await run_sandboxed(
        ["/usr/bin/python3", "-I", "-c", CONNECT, str(port)], FileSet(), timeout=5, policy=policy
    )
    assert res.stdout.startswith("connected"), res.stdout + res.stderr
    await asyncio.sleep(0.05)
    assert _accepted(s)


async def test_output_is_capped() -> None:
    policy = SandboxPolicy(exec_system=True, max_output=1000)
    res = await run_sandboxed(
        ["/bin/sh", "-c", "yes | head -c 1000000"], FileSet(), timeout=5, policy=policy
    )
    assert res.returncode == 0 and res.truncated and len(res.stdout) == 1000


async def test_process_limit_stops_fork_bombs() -> None:
    policy = SandboxPolicy(exec_system=True, limits=sandbox.Limits(processes=8))
    if not isolation_for(policy).privilege_drop:
        pytest.skip("RLIMIT_NPROC does not bind root; needs the per-run uid")
    script = "for i in $(seq 30); do sleep 5 & done 2>&1; wait"
    res = await run_sandboxed(["/bin/sh", "-c", script], FileSet(), timeout=3, policy=policy)
    assert "Cannot fork" in res.stdout + res.stderr


def test_default_bound_is_the_cpu_count() -> None:
    # The bound honours a cgroup CPU quota, so it may be below the affinity on a limited pod.
    assert sandbox.max_concurrency() == _cpu_count()
    assert 1 <= sandbox.max_concurrency() <= len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("files", "cap"),
    [
        ({"cpu.max": "50000 100000\n"}, 1),  # half a CPU still gets one slot
        ({"cpu.max": "150000 100000\n"}, 2),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({"cpu.max": "garbage\n"}, None),
        ({}, None),
    ],
)
def test_cpu_count_is_capped_by_the_cgroup_quota(
    tmp_path: Path, files: dict[str, str], cap: int | None
) -> None:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    cpus = len(os.sched_getaffinity(0))
    assert _cpu_count(str(tmp_path)) == (cpus if cap is None else min(cpus, cap))


async def test_concurrency_never_exceeds_the_bound() -> None:
    """Six checks of 0.3 s with a bound of 2: at most 2 overlap, and 2 do (no global mutex)."""
    sandbox.set_max_concurrency(2)
    try:
        script = "date +%s.%N; sleep 0.3; date +%s.%N"
        runs = await asyncio.gather(
            *(
                run_sandboxed(["/bin/sh", "-c", script], FileSet(), timeout=10, policy=TOOLS)
                for _ in range(6)
            )
        )
    finally:
        sandbox.set_max_concurrency(None)
    spans = [tuple(float(x) for x in r.stdout.split()) for r in runs]
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    level = peak = 0
    for _, delta in events:
        level += delta
        peak = max(peak, level)
    assert peak == 2
