"""A judgement without a diagnostic is one object per state (issue 20): a deferred stage
remembers one per rule and object, and one made per evaluation, or unpickled per object from
the fork or worker that judged the batch, cost about 150 bytes each (4.5 MB for the
quickstart's three Ingress rules at 10,000 Ingresses)."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from controller.diagnostics import Phase, make
from controller.render import Renderer
from controller.validation import StageContext
from controller.validation.rules import Isolation, RuleSet, RulesStage
from controller.validation.rules.judge import Judgement, State, plain
from tests.rules.rules_helpers import filled_store, ingress, make_spec
from tests.rules.test_deferred_memo import WATCHED


def test_a_plain_judgement_comes_back_from_pickle_as_the_shared_one() -> None:
    for state in State:
        made = Judgement(state)
        back = pickle.loads(pickle.dumps(made))
        assert back is plain(state) and back == made
    failed = Judgement(State.FAILED, make("E5003", Phase.RULES, "x: no"))
    back = pickle.loads(pickle.dumps(failed))
    assert back == failed and back is not failed


@pytest.mark.parametrize("isolation", [Isolation.NEVER, Isolation.ALWAYS])
def test_a_stage_remembers_one_judgement_object_per_state(isolation: Isolation) -> None:
    """Judged in this process or in a fork, the stage keeps per object only a reference to
    the shared judgements."""
    spec = make_spec(watched=WATCHED)
    stage = RulesStage(RuleSet.from_spec(spec), isolation=isolation)
    objects = [ingress(f"i{k}", f"h{k}") for k in range(40)]
    store = filled_store(spec, {"ingresses": objects})
    render = Renderer(spec).render(store.snapshot())
    outcome = asyncio.run(stage.run(StageContext(render=render)))
    assert not [d for d in outcome.diagnostics if d.severity.value == "error"]
    judged = [j for memo in stage._known.by_memo.values() for j in memo.values()]
    assert len(judged) >= 3 * 40
    assert {id(j) for j in judged if j.diagnostic is None} <= {id(plain(s)) for s in State}
