"""The sandbox holds on its own: a ``lua-load`` that the directive policy would have rejected
runs inside ``haproxy -c`` here (the stage is called directly, no syntax stage in front) and
tries to write outside, read a service-account token and the controller's environment.

Each isolation layer that confines the file system (Landlock, private mount root) is tested
alone and combined; a control run with every layer off shows the same script does escape, so
these tests can fail.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from controller.render import FileEntry, FileKind, FileSet
from controller.validation.sandbox import SANDBOX_DIR, SandboxPolicy, isolation_for, run_sandboxed

pytestmark = pytest.mark.haproxy

LAYERS = {
    "all": SandboxPolicy(),
    "landlock-only": SandboxPolicy(namespaces=False, drop_privileges=False),
    "namespaces+uid": SandboxPolicy(landlock=False),
}
NO_ISOLATION = SandboxPolicy(landlock=False, namespaces=False, drop_privileges=False)

ESCAPE_LUA = """
local function report(label, value) print("RESULT " .. label .. "=" .. tostring(value)) end
local function slurp(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local t = f:read("a"); f:close(); return t
end
local f = io.open("{target}", "w")
if f then f:write("escaped"); f:close() end
report("write", f ~= nil)
os.execute("echo escaped > {target2}")
local p = io.popen("cat {secret}")
report("popen", p and p:read("a"))
report("token", slurp("{secret}"))
report("sa", slurp("/var/run/secrets/kubernetes.io/serviceaccount/token"))
report("environ", slurp("/proc/{ppid}/environ"))
report("env", os.getenv("{env_name}"))
"""


def _escape_files(tmp_path: Path, env_name: str) -> tuple[FileSet, Path, Path, str]:
    token = "TOKEN-" + secrets.token_hex(8)
    secret = tmp_path / "serviceaccount-token"
    secret.write_text(token)
    target, target2 = tmp_path / "escaped", tmp_path / "escaped2"
    lua = ESCAPE_LUA.format(
        target=target, target2=target2, secret=secret, ppid=os.getpid(), env_name=env_name
    )
    cfg = (
        "global\n    lua-load files/escape.lua\n"
        "defaults\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n"
        "frontend fe\n    bind 127.0.0.1:18080\n"
    )
    files = FileSet.of(
        [
            FileEntry("haproxy.cfg", FileKind.CONFIG, cfg.encode()),
            FileEntry("files/escape.lua", FileKind.FILE, lua.encode()),
        ]
    )
    return files, target, target2, token


async def _attempt(
    haproxy_bin: str, policy: SandboxPolicy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, list[Path], str]:
    env_name = "HTC_TEST_CREDENTIAL"
    env_value = "ENVSECRET-" + secrets.token_hex(8)
    monkeypatch.setenv(env_name, env_value)
    files, target, target2, token = _escape_files(tmp_path, env_name)
    res = await run_sandboxed(
        [haproxy_bin, "-c", "-C", SANDBOX_DIR, "-f", "haproxy.cfg"],
        files,
        timeout=10,
        policy=policy,
    )
    assert "RESULT write=" in res.stdout, res.stderr  # the script really ran
    created = [p for p in (target, target2) if p.exists()]
    return res.stdout + res.stderr, created, "|".join([token, env_value, _startup_env()])


def _startup_env() -> str:
    """One entry of this process's startup environment, as /proc/<pid>/environ shows it."""
    entries = Path(f"/proc/{os.getpid()}/environ").read_bytes().split(b"\0")
    path = [e for e in entries if e.startswith(b"PATH=")] or entries[:1]
    return path[0].decode()


@pytest.mark.parametrize("layers", sorted(LAYERS))
async def test_lua_cannot_escape(
    haproxy_bin: str, layers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = LAYERS[layers]
    iso = isolation_for(policy)
    if not iso.confined_filesystem:
        pytest.skip(f"{layers}: not available on this host ({iso.describe()})")
    output, created, secret_values = await _attempt(haproxy_bin, policy, tmp_path, monkeypatch)
    assert created == []
    for value in secret_values.split("|"):
        assert value not in output
    assert "RESULT write=false" in output


async def test_control_without_isolation_does_escape(
    haproxy_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Proves the script above is a real attack: unconfined, it succeeds."""
    output, created, secret_values = await _attempt(
        haproxy_bin, NO_ISOLATION, tmp_path, monkeypatch
    )
    token, env_value, startup_env = secret_values.split("|")
    assert created, "unconfined Lua should have created a file"
    assert token in output
    assert startup_env in output  # read from the controller's /proc/<pid>/environ
    assert env_value not in output  # the child's own environment is empty even here


async def test_environment_is_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTC_TEST_CREDENTIAL", "visible?")
    res = await run_sandboxed(
        ["/usr/bin/env"], FileSet(), timeout=5, policy=SandboxPolicy(exec_system=True)
    )
    assert res.returncode == 0
    assert res.stdout == ""


async def test_only_the_sandbox_directory_is_visible(tmp_path: Path) -> None:
    """A plain program sees its file set, not its siblings or the rest of the machine."""
    other = tmp_path / "other-candidate.cfg"
    other.write_text("secret of another run")
    files = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, b"mine\n")])
    res = await run_sandboxed(
        ["/bin/sh", "-c", f"cat haproxy.cfg; cat {other}"],
        files,
        timeout=5,
        policy=SandboxPolicy(exec_system=True),
    )
    assert res.stdout.startswith("mine\n")
    assert "secret of another run" not in res.stdout
