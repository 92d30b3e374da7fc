"""MasterSocketTarget against real HAProxy processes (2.6 and 2.8)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from controller.deploy.files import MANIFEST, PREVIOUS
from controller.deploy.master_cli import MasterCli, MasterCliError
from controller.deploy.master_socket import MasterSocketTarget
from controller.deploy.supervisor import HAProxySupervisor
from controller.deploy.target import DeployOutcome
from controller.observability.metrics import Metrics
from tests.deploy.deploy_helpers import aget, aget_eventually, config_set, validated

Local = tuple[MasterSocketTarget, HAProxySupervisor, Metrics]


async def test_deploy_reloads_and_skips_an_unchanged_set(local: Local, port: int) -> None:
    target, sup, metrics = local
    first = await target.deploy(await validated(config_set(port, "v1", maps={"a.map": "x 1\n"})))
    assert first.outcome is DeployOutcome.DEPLOYED, first.diagnostics
    assert await aget(port) == "v1"
    master = sup.pid

    second = await target.deploy(await validated(config_set(port, "v2")))
    assert second.outcome is DeployOutcome.DEPLOYED, second.diagnostics
    assert await aget(port) == "v2"
    assert sup.pid == master  # a reload, not a restart
    cfg = target.dir.root
    assert not (cfg / "maps" / "a.map").exists()  # dropped with the set that had it
    assert (cfg / PREVIOUS / "maps" / "a.map").read_text() == "x 1\n"
    assert target.dir.manifest() is not None
    assert target.dir.manifest().checksum == second.checksum  # type: ignore[union-attr]

    reloads = (await sup.cli.show_proc()).reloads
    third = await target.deploy(await validated(config_set(port, "v2")))
    assert third.outcome is DeployOutcome.UNCHANGED and not third.reloaded
    assert (await sup.cli.show_proc()).reloads == reloads
    assert metrics.sample("htc_reloads_total", {"target": "local", "result": "success"}) == 2
    assert metrics.sample("htc_deploys_total", {"target": "local", "result": "unchanged"}) == 1


async def test_refused_reload_restores_the_previous_set(local: Local, port: int) -> None:
    target, _, metrics = local
    good = await target.deploy(await validated(config_set(port, "good")))
    assert good.ok
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        bad = config_set(port, "bad", extra=f"    bind 127.0.0.1:{taken}\n")
        result = await target.deploy(await validated(bad))

    assert result.outcome is DeployOutcome.ROLLED_BACK
    assert result.active_checksum == good.checksum
    ids = [d.rule_id for d in result.diagnostics]
    assert ids[0] == "E7001" and "E7002" in ids
    alert = next(d for d in result.diagnostics if d.rule_id == "E7002")
    assert "Address already in use" in alert.message
    assert alert.location is not None and alert.location.file == "haproxy.cfg"
    assert alert.location.line == 10
    assert await aget(port) == "good"
    assert target.dir.drifted(config_set(port, "good")) == []
    assert target.dir.manifest().checksum == good.checksum  # type: ignore[union-attr]
    assert metrics.sample("htc_reloads_total", {"target": "local", "result": "failure"}) == 1
    # The master is healthy again: the next set deploys normally.
    again = await target.deploy(await validated(config_set(port, "after")))
    assert again.outcome is DeployOutcome.DEPLOYED
    assert await aget(port) == "after"


async def test_drift_is_repaired_with_the_last_validated_set(local: Local, port: int) -> None:
    target, _, metrics = local
    assert (await target.deploy(await validated(config_set(port, "mine")))).ok
    assert await target.check_drift() is None
    cfg = target.dir.root / "haproxy.cfg"
    cfg.write_text(cfg.read_text().replace('"mine"', '"theirs"'))
    result = await target.check_drift()
    assert result is not None and result.outcome is DeployOutcome.DEPLOYED
    assert result.drift == ("haproxy.cfg",)
    assert result.diagnostics[0].rule_id == "W7007"
    assert '"mine"' in cfg.read_text()
    assert await aget(port) == "mine"
    assert metrics.sample("htc_drift_redeploys_total", {"target": "local"}) == 1


async def test_first_start_failure_is_reported(local: Local) -> None:
    target, sup, _ = local
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        result = await target.deploy(await validated(config_set(taken, "x")))
    assert result.outcome is DeployOutcome.FAILED
    ids = [d.rule_id for d in result.diagnostics]
    assert ids[:2] == ["E7001", "E7008"] and "E7002" in ids
    assert not sup.running()


async def test_deploy_accepts_only_validated_sets(local: Local, port: int) -> None:
    target, _, _ = local
    with pytest.raises(TypeError):
        await target.deploy(config_set(port, "raw"))  # type: ignore[arg-type]


async def test_externally_started_master(haproxy_bin: str, short_dir: Path, port: int) -> None:
    """Without a supervisor (sidecar case) the outcome comes from the master CLI alone;
    on 2.6 that is the show proc comparison."""
    cfg = short_dir / "cfg"
    sock = short_dir / "m.sock"
    (cfg).mkdir()
    (cfg / "haproxy.cfg").write_bytes(config_set(port, "boot").main.content)
    proc = subprocess.Popen(
        [haproxy_bin, "-W", "-S", str(sock), "-C", str(cfg), "-f", "haproxy.cfg"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        await _until_answering(MasterCli(str(sock), connect_retry=5))
        target = MasterSocketTarget(cfg, sock, name="sidecar", metrics=Metrics())
        ok = await target.deploy(await validated(config_set(port, "next")))
        assert ok.outcome is DeployOutcome.DEPLOYED, ok.diagnostics
        assert await aget(port) == "next"
        assert (cfg / MANIFEST).exists()
        with socket.socket() as blocker:
            blocker.bind(("127.0.0.1", 0))
            blocker.listen()
            extra = f"    bind 127.0.0.1:{blocker.getsockname()[1]}\n"
            bad = await target.deploy(await validated(config_set(port, "bad", extra=extra)))
        assert bad.outcome is DeployOutcome.ROLLED_BACK
        assert bad.diagnostics[0].rule_id == "E7001"
        assert await aget(port) == "next"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


async def test_killed_worker_is_replaced(local: Local, port: int) -> None:
    target, sup, metrics = local
    assert (await target.deploy(await validated(config_set(port, "alive")))).ok
    (worker,) = (await sup.cli.show_proc()).current_workers
    os.kill(worker.pid, signal.SIGKILL)
    for _ in range(100):
        if sup.restarts and sup.running() and await aget(port) == "alive":
            break
        await asyncio.sleep(0.05)
    assert await aget(port) == "alive"
    assert metrics.sample("htc_haproxy_restarts_total", {"reason": "master_exited"}) == 1


async def test_stop_leaves_no_process(local: Local, port: int) -> None:
    target, sup, _ = local
    assert (await target.deploy(await validated(config_set(port, "x")))).ok
    table = await sup.cli.show_proc()
    pids = {table.master_pid, *table.worker_pids}
    await sup.stop()
    assert not sup.running()
    alive = {p for p in pids if Path(f"/proc/{p}").exists() and _state(p) != "Z"}
    assert not alive
    assert "error" in await aget(port)


async def _until_answering(cli: MasterCli, timeout: float = 5.0) -> None:
    """A master that just started may accept a connection and reset it (seen on 2.8) before
    its CLI is up; ask again until it answers."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            await cli.show_proc()
            return
        except MasterCliError:
            if loop.time() >= deadline:
                raise
            await asyncio.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return "gone"


async def test_killed_master_is_replaced_and_its_orphans_ended(local: Local, port: int) -> None:
    target, sup, metrics = local
    assert (await target.deploy(await validated(config_set(port, "kept")))).ok
    table = await sup.cli.show_proc()
    os.kill(table.master_pid, signal.SIGKILL)
    for _ in range(100):
        if sup.restarts:
            break
        await asyncio.sleep(0.05)
    # Whether the supervisor's restart is under way or not begun, this returns once a master
    # with a current worker runs; "a process exists" is not yet "the port answers".
    assert (await sup.ensure_running()).ok
    assert sup.pid != table.master_pid
    assert await aget_eventually(port, "kept") == "kept"
    # The dead master's worker would otherwise keep serving the port next to the new one.
    assert all(_state(w) in ("Z", "gone") for w in table.worker_pids)
    assert metrics.sample("htc_haproxy_restarts_total", {"reason": "master_exited"}) == 1
