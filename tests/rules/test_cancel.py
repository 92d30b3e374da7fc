"""A rules stage that is cancelled mid-evaluation kills its forked CEL worker at once.

The pipeline runs the rules stage ahead, next to ``haproxy -c``, and cancels it when an
earlier stage fails. The evaluation waits in a thread that cancellation cannot interrupt;
without a signal it would keep the worker alive until the rule deadline, burning a core
for a verdict nobody reads.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from controller.diagnostics import Phase
from controller.validation import Pipeline
from controller.validation.rules import RuledRenderer
from tests.rules.rules_helpers import MINIMAL_CFG, filled_store, make_spec, rule

BIG_MAP = "{% for i in range(9000) %}k{{ i }} v\n{% endfor %}"
SLOW = "self.lines.map(l, l + '!').size() > 0 && outputs['haproxy.cfg'].content != ''"
"""Seconds of work in the worker: map() copies its list at every step."""


def _forked_children() -> list[int]:
    """Children of this process that run this very program: forks, not subprocesses."""
    me = os.getpid()
    own = Path(f"/proc/{me}/cmdline").read_bytes()
    found: list[int] = []
    for task in Path(f"/proc/{me}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in children:
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes() == own:
                    found.append(int(pid))
            except OSError:
                continue
    return found


def test_a_cancelled_rules_stage_leaves_no_worker(haproxy_bin: str) -> None:
    # haproxy -c refuses the unknown backend while the deferred rule is being evaluated.
    bad = MINIMAL_CFG.replace("default_backend be", "default_backend nosuch")
    spec = make_spec(
        cfg=bad,
        maps={"big.map": {"template": BIG_MAP, "validate": {"rules": [rule("slow", SLOW)]}}},
    )
    pipeline = Pipeline.from_spec(spec, haproxy_binary=haproxy_bin)
    render = RuledRenderer.from_spec(spec).render(filled_store(spec).snapshot())
    assert render.ok
    before = set(_forked_children())

    async def run() -> tuple[list[str], set[int]]:
        report = await pipeline.validate(render)
        # Still inside the loop, as in the controller: asyncio.run's shutdown would wait
        # for the thread, and so hide a worker that outlives its pipeline run.
        await asyncio.sleep(0.3)  # an uncancelled worker computes until its 2 s deadline
        assert Phase.RULES not in report.metadata.stages_run
        return [d.phase.value for d in report.errors], set(_forked_children()) - before

    started = time.monotonic()
    phases, left = asyncio.run(run())
    assert "haproxy" in phases  # the earlier stage that stopped the run
    assert left == set()
    assert time.monotonic() - started < 1.5  # the thread did not wait for the deadline
