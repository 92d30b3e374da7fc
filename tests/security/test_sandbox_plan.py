"""The sandbox plan: the allow-list a program and policy resolve to is shared by the runs of a
few seconds (``plan.LAYOUT_TTL``), and a plan made from it is the one made afresh."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from controller.validation.sandbox import SandboxPolicy, isolation_for
from controller.validation.sandbox import plan as plan_module

PROGRAM = "/bin/sh"


def _plan(tmp: Path, policy: SandboxPolicy, run: str) -> tuple[Any, ...]:
    """A plan for a fresh run directory, its paths spelled relative to the run's base."""
    base = tmp / run
    (base / "d").mkdir(parents=True)
    (base / "r").mkdir()
    p = plan_module.build_plan(
        PROGRAM, policy, isolation_for(policy), str(base / "d"), str(base / "r"), None, 5.0
    )
    p.close()
    b = str(base)
    binds = [
        (x.source.decode().replace(b, "B"), x.target.decode().replace(b, "B"), x.is_dir)
        for x in p.binds
    ]
    links = [(link.replace(b, "B"), target) for link, target in p.symlinks]
    shutil.rmtree(base)
    return binds, links, [d.replace(b, "B") for d in p.dirs], p.limits, p.unshare_flags


def test_a_plan_from_the_shared_layout_is_the_plan_made_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not isolation_for(SandboxPolicy()).namespaces:
        pytest.skip("needs the private mount root (namespaces)")
    for policy in (SandboxPolicy(), SandboxPolicy(network=True, exec_system=True)):
        plan_module._layouts.clear()
        fresh = _plan(tmp_path, policy, "a")
        assert plan_module._layouts  # resolved once ...
        shared = _plan(tmp_path, policy, "b")  # ... and used by the next run
        assert shared == fresh
        assert ("B/d", "B/rB/d", True) in fresh[0]  # the run's own directory, bound


def test_a_changed_symlink_is_resolved_again_after_the_ttl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not isolation_for(SandboxPolicy()).namespaces:
        pytest.skip("needs the private mount root (namespaces)")
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    link = tmp_path / "current"
    link.symlink_to(tmp_path / "one")
    policy = SandboxPolicy(read_paths=(str(link),))
    runs = tmp_path / "runs"
    plan_module._layouts.clear()

    def sources() -> set[str]:
        return {source for source, _, _ in _plan(runs, policy, f"r{len(os.listdir(runs))}")[0]}

    runs.mkdir()
    assert str(tmp_path / "one") in sources()
    link.unlink()
    link.symlink_to(tmp_path / "two")
    assert str(tmp_path / "one") in sources()  # within the TTL: the shared layout
    monkeypatch.setattr(plan_module, "LAYOUT_TTL", 0.0)
    got = sources()
    assert str(tmp_path / "two") in got and str(tmp_path / "one") not in got
