"""How the sandbox starts its program: what the child inherits, and a start that fails.

``spawn`` forks and returns without waiting for ``exec`` (see its module), so what
``subprocess.Popen`` used to guarantee is checked here against real processes: with a plan
that isolates nothing (so the child can look at itself), and through the sandbox.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest

from controller.render import FileSet
from controller.validation.sandbox import Isolation, SandboxError, SandboxPolicy, run_sandboxed
from controller.validation.sandbox.plan import Plan
from controller.validation.sandbox.spawn import exec_error, spawn

TOOLS = SandboxPolicy(exec_system=True)


def _run(
    argv: list[str], workdir: Path, limits: list[tuple[int, int, int]] | None = None
) -> tuple[int, str, str, str | None]:
    """spawn, then wait: exit code, stdout, stderr and the exec error."""
    plan = Plan(limits=limits or [], workdir=str(workdir), isolation=Isolation(), uid=None)
    child = spawn(argv, str(workdir), plan)
    _, status = os.waitpid(child.pid, 0)
    with open(child.stdout, "rb") as out, open(child.stderr, "rb") as err:
        stdout, stderr = out.read().decode(), err.read().decode()
    return os.waitstatus_to_exitcode(status), stdout, stderr, exec_error(child.status)


def test_the_child_gets_only_stdin_stdout_and_stderr_and_no_environment(tmp_path: Path) -> None:
    extra = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(extra, True)  # exec would pass it on: the child must close it
    try:
        rc, out, err, failed = _run(
            ["/bin/sh", "-c", "ls /proc/self/fd; readlink /proc/self/fd/0; pwd; env"], tmp_path
        )
    finally:
        os.close(extra)
    assert (rc, failed) == (0, None), err
    words = out.split()
    # 0, 1, 2, and the one ls opened to read the directory.
    assert sorted(w for w in words if w.isdigit()) == ["0", "1", "2", "3"]
    assert "/dev/null" in words and str(tmp_path) in words
    assert not [w for w in words if "=" in w and not w.startswith(("PWD=", "OLDPWD=", "SHLVL="))]


def test_the_child_is_a_session_leader(tmp_path: Path) -> None:
    plan = Plan(limits=[], workdir=str(tmp_path), isolation=Isolation(), uid=None)
    child = spawn(["/bin/sleep", "5"], str(tmp_path), plan)
    try:
        time.sleep(0.1)
        assert os.getsid(child.pid) == child.pid == os.getpgid(child.pid)
    finally:
        os.kill(child.pid, 9)
        os.waitpid(child.pid, 0)
        for fd in (child.stdout, child.stderr, child.status):
            os.close(fd)


def test_a_broken_pipe_ends_the_writer_by_signal(tmp_path: Path) -> None:
    """Python ignores SIGPIPE, and an ignored signal stays ignored across exec. The control
    run (Popen without restoring signals) shows the difference the test looks for."""
    script = ["/bin/sh", "-c", "yes | head -c 1 >/dev/null"]
    # The control child ignores SIGPIPE as a Python process's children do by default; set
    # explicitly, because a Go runtime loaded in-process (Helm's SDK) changes the default.
    control = subprocess.run(
        script,
        capture_output=True,
        restore_signals=False,
        check=False,
        preexec_fn=lambda: signal.signal(signal.SIGPIPE, signal.SIG_IGN),
    )
    assert b"Broken pipe" in control.stderr
    rc, _, err, failed = _run(script, tmp_path)
    assert (rc, failed) == (0, None) and "Broken pipe" not in err


def test_a_write_past_the_file_size_limit_kills_the_writer(tmp_path: Path) -> None:
    limit = [(resource.RLIMIT_FSIZE, 4096, 4096)]
    rc, out, _, failed = _run(
        ["/bin/sh", "-c", "head -c 100000 /dev/zero > big; kill -l $?"], tmp_path, limit
    )
    assert (rc, failed) == (0, None)
    assert out.strip() == "XFSZ"  # killed by the signal, not left to handle EFBIG
    assert (tmp_path / "big").stat().st_size == 4096


def test_an_exec_that_fails_says_why(tmp_path: Path) -> None:
    rc, _, _, failed = _run([str(tmp_path / "gone")], tmp_path)
    assert rc == 127 and failed == "FileNotFoundError: No such file or directory"


async def test_a_program_that_cannot_be_started_is_a_set_up_error(tmp_path: Path) -> None:
    text = tmp_path / "plain.txt"
    text.write_text("not a program\n")
    with pytest.raises(SandboxError, match=r"could not start plain\.txt: PermissionError"):
        await run_sandboxed([str(text)], FileSet(), timeout=5, policy=TOOLS)
    # Outside the allow-list a missing file is denied, not reported missing: either way the
    # start fails with the child's own reason, and nothing ran.
    with pytest.raises(SandboxError, match=r"could not start gone: (FileNotFound|Permission)Error"):
        await run_sandboxed([str(tmp_path / "gone")], FileSet(), timeout=5, policy=TOOLS)
