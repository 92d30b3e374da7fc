"""A candidate with known bytes and new objects, through the real pipeline and haproxy.

An object the templates ignore (an Ingress of another class) leaves the rendered bytes as
they were, but the deferred rules judge every object: only the rules stage runs again, for
the new object alone; ``haproxy -c`` and the other stages that judge the bytes keep their
pass (issue 14, items 3 and 5). A failure is still never cached.
"""

from __future__ import annotations

import asyncio
from typing import Any

from controller.diagnostics import Phase
from controller.render import RenderResult
from controller.resources import Overlay, Store
from controller.validation import Pipeline
from controller.validation.rules import RuledRenderer, RulesStage
from tests.rules.rules_helpers import filled_store, rule
from tests.rules.test_unchanged_inputs import WATCHED, _fixtures, _ingress, _spec

BANNED = rule(
    "not-banned",
    "self.metadata.name != extraContext.?banned.orValue('evil')",
    message="that name is banned",
)


def _setup(haproxy: str) -> tuple[RuledRenderer, Pipeline, Store]:
    rules = [*WATCHED["ingresses"]["validate"]["rules"], BANNED]
    spec = _spec({**WATCHED, "ingresses": {**WATCHED["ingresses"], "validate": {"rules": rules}}})
    renderer = RuledRenderer.from_spec(spec)
    pipeline = Pipeline.from_spec(spec, haproxy_binary=haproxy)
    return renderer, pipeline, filled_store(spec, _fixtures())


def _rules(p: Pipeline) -> RulesStage:
    stage = next(s for s in p.stages if s.phase is Phase.RULES)
    assert isinstance(stage, RulesStage)
    return stage


def _proposal(store: Store, obj: dict[str, Any]) -> Overlay:
    return Overlay(store.snapshot(), "ingresses", "create", obj)


async def test_an_ignored_object_reruns_only_the_rules_stage(haproxy_bin: str) -> None:
    renderer, p, store = _setup(haproxy_bin)
    live: RenderResult = renderer.render(store.snapshot())
    first = await p.validate(live)
    assert first.valid
    once = {Phase.SYNTAX: 1, Phase.SCHEMA: 1, Phase.HAPROXY: 1, Phase.RULES: 1}
    assert p.phase_runs == once

    proposal = renderer.render(_proposal(store, _ingress("new", "theirs")))
    assert proposal.files.checksum == live.files.checksum
    report = await p.validate(proposal)
    assert report.valid and not report.metadata.cache_hit
    assert report.metadata.stages_run == first.metadata.stages_run
    assert p.phase_runs == {**once, Phase.RULES: 2}
    assert _rules(p).evaluations_pending == 2  # the new object, by each object rule

    # Concurrent identical candidates share one run; the run after them is a cache hit.
    others = [renderer.render(_proposal(store, _ingress("other", "theirs"))) for _ in range(3)]
    reports = await asyncio.gather(*(p.validate(r) for r in others))
    assert all(r.valid for r in reports)
    assert p.phase_runs == {**once, Phase.RULES: 3}
    assert (await p.validate(others[0])).metadata.cache_hit


async def test_an_ignored_object_that_fails_a_rule_is_denied_every_time(haproxy_bin: str) -> None:
    renderer, p, store = _setup(haproxy_bin)
    assert (await p.validate(renderer.render(store.snapshot()))).valid
    for k in range(2):
        bad = renderer.render(_proposal(store, _ingress("evil", "theirs")))
        report = await p.validate(bad)
        assert not report.valid and not report.metadata.cache_hit
        assert [(d.phase, d.message) for d in report.errors] == [
            (Phase.RULES, "ingresses rule not-banned on default/evil: that name is banned")
        ]
        assert p.phase_runs[Phase.HAPROXY] == 1  # the bytes passed before
        assert p.phase_runs[Phase.RULES] == 2 + k  # a failure is judged again
