"""An output's ``lines`` are converted for deferred rules only when one of them may read them.

The analysis (``refs.collect``: which fields of an output's value an expression reads) must be
conservative: a field chosen at evaluation time, or the value used whole (compared, sized,
iterated, passed on), may read ``lines``. The stage tests then judge rules that need the
whole value, with and without the evaluation worker, so leaving ``lines`` out where a rule
could see it changes a verdict here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.validation.rules import RuledRenderer, RuleSet, pool
from controller.validation.rules.budget import Isolation
from controller.validation.rules.classify import analyse
from controller.validation.rules.deferred import evaluate_deferred, plan
from controller.validation.rules.refs import ANY
from controller.validation.rules.stage import RulesStage, deferred_inputs, reads_lines
from controller.validation.stage import StageContext
from tests.rules.rules_helpers import filled_store, make_spec, rule, ruled_render

FIELDS = [
    # (expression, fields read through outputs, fields read of self)
    ("self.content.size() > 0", set(), {"content"}),
    ("self['content'] != '' && self.path != ''", set(), {"content", "path"}),
    ("self.lines.size() > 0", set(), {"lines"}),
    ("has(self.lines)", set(), {"lines"}),
    ("size(self) == 4", set(), {ANY}),
    ("self == self", set(), {ANY}),
    ("self[self.name] != ''", set(), {ANY, "name"}),
    ("self.exists(k, k == 'lines')", set(), {ANY}),
    ("outputs['a.map'].content != ''", {"content"}, set()),
    ("outputs.a.path != ''", {"path"}, set()),
    ("has(outputs.a) && has(outputs.a.lines)", {"lines"}, set()),
    ("outputs['a.map']['li' + 'nes'].size() > 0", {ANY}, set()),
    ("outputs[?'a.map'].hasValue()", {ANY}, set()),
    ("outputs['a.map'] == outputs['b.map']", {ANY}, set()),
    ("[outputs['a.map']].all(m, m.content != '')", {ANY}, set()),
    ("outputs.exists(k, k == 'a.map')", {ANY}, set()),
    ("size(outputs['a.map']) > 3", {ANY}, set()),
    # outputs passed on whole, next to a constant field: the constant does not hide it
    ("outputs.a.content != '' && [outputs].all(o, o.a.lines.size() > 0)", {"content", ANY}, set()),
    (
        "outputs.a.content != '' && outputs.all(k, outputs[k].lines.size() > 0)",
        {"content", ANY},
        set(),
    ),
    ("[1].all(self, self > 0)", set(), set()),
]


@pytest.mark.parametrize(("source", "via_outputs", "of_self"), FIELDS)
def test_fields_read_of_an_output(source: str, via_outputs: set[str], of_self: set[str]) -> None:
    refs = analyse(source).refs
    assert refs.output_fields == frozenset(via_outputs)
    assert refs.self_fields == frozenset(of_self)


def test_the_message_and_conditions_count() -> None:
    """A rule reads what its expression, message, ``when`` and its block's ``when`` read."""
    for extra in (
        {"messageExpression": "string(self.lines.size())"},
        {"when": "self.lines.size() > 0"},
    ):
        spec = make_spec(
            cfg_rules=[rule("r", "extraContext.x == 1", **extra)], extraContext={"x": 1}
        )
        assert reads_lines(RuleSet.from_spec(spec).deferred)
    spec = make_spec(
        cfg_rules=[rule("r", "extraContext.x == 1")],
        cfg_when="self.lines.size() > 0",
        extraContext={"x": 1},
    )
    assert reads_lines(RuleSet.from_spec(spec).deferred)


MAPS = {"a.map": {"template": "a be_a\nb be_b\n"}}


def _judged(expression: str, isolation: Isolation) -> tuple[bool, dict[str, Any]]:
    """The verdict of one deferred ``haproxy.cfg`` rule (deferred: it reads extraContext;
    a loop makes it no cheap batch, which the worker takes under AUTO), and the values the
    stage converted."""
    spec = make_spec(
        cfg_rules=[rule("r", f"extraContext.x == [1].map(i, i)[0] && ({expression})")],
        maps=MAPS,
        extraContext={"x": 1},
    )
    rs = RuleSet.from_spec(spec)
    render = RuledRenderer.from_spec(spec).render(filled_store(spec).snapshot())
    stage = RulesStage(rs, isolation=isolation)
    outputs = stage._inputs(render).outputs  # what the run converts, memoized per candidate
    outcome = asyncio.run(stage.run(StageContext(render=render)))
    converted = dict(getattr(outputs, "converted", {}))
    assert not [d for d in outcome.diagnostics if d.rule_id not in ("E5003",)]
    return not outcome.diagnostics, converted


WHOLE = [
    # (a rule that holds on the real value, whether it may read lines)
    ("self.content.startsWith('global')", False),
    ("size(self) == 4", True),
    ("self.lines.size() > 1", True),
    ("self.lines[0] == self.content.split('\\n')[0]", True),
    ("outputs['a.map'].content == 'a be_a\\nb be_b\\n'", False),
    ("size(outputs['a.map']) == 4", True),
    ("outputs['a.map']['li' + 'nes'] == ['a be_a', 'b be_b']", True),
]


@pytest.mark.parametrize("isolation", [Isolation.NEVER, Isolation.AUTO])
@pytest.mark.parametrize(("expression", "needs"), WHOLE)
def test_rules_see_the_whole_value_when_they_may_read_lines(
    expression: str, needs: bool, isolation: Isolation
) -> None:
    """Every rule here holds on the real value; it fails when ``lines`` were left out
    although the rule may read them (``size(...) == 4`` counts the fields). In the worker
    (AUTO) too, where the value is made again from what was sent."""
    if isolation is Isolation.AUTO:
        assert pool.warm(wait=30)
    before = pool.stats()["jobs"]
    passed, converted = _judged(expression, isolation)
    assert passed
    assert (pool.stats()["jobs"] > before) is (isolation is Isolation.AUTO)
    assert converted, "the rule's output was converted"
    assert all(("lines" in v) is needs for v in converted.values())


def test_content_only_rules_get_no_lines() -> None:
    """The quickstart's kind of rule: ``content`` of ``self`` and of the maps."""
    assert pool.warm(wait=30)
    passed, converted = _judged(
        "self.content != '' && outputs['a.map'].content.contains('be_b')", Isolation.AUTO
    )
    assert passed
    assert set(converted) == {"haproxy.cfg", "a.map"}
    assert all("lines" not in v for v in converted.values())


@pytest.mark.parametrize(
    ("expression", "with_lines"),
    [
        ("self.content.contains('be_a')", False),
        ("self.lines.size() == 2", True),
        ("size(self) == 4", True),  # name, path, content, lines: the whole value
    ],
)
def test_inline_output_rules_get_lines_only_when_they_may_read_them(
    expression: str, with_lines: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inline output rules (judged right after the output renders) too: every one of these
    passes, so a value without ``lines`` where a rule reads them fails it."""
    from controller.validation.rules import inline, judge

    made: list[bool] = []
    real = judge.output_value

    def recording(name: str, path: str, content: str, *, lines: bool = True) -> dict[str, Any]:
        made.append(lines)
        return real(name, path, content, lines=lines)

    monkeypatch.setattr(inline, "output_value", recording)
    spec = make_spec(
        maps={"a.map": {**MAPS["a.map"], "validate": {"rules": [rule("r", expression)]}}}
    )
    render = ruled_render(spec, isolation=Isolation.NEVER)
    assert not render.diagnostics, render.diagnostics
    assert made == [with_lines]


@pytest.mark.parametrize(
    ("expression", "listed"),
    [
        ("outputs['a.map'].content.contains('be_a')", {"haproxy.cfg", "a.map"}),
        ("outputs['a' + '.map'].content.contains('be_a')", {"haproxy.cfg", "a.map", "b.map"}),
        ("outputs['b.map'].content.contains('be_a')", {"haproxy.cfg", "b.map"}),  # fails
    ],
)
def test_the_stage_lists_only_the_outputs_its_rules_can_read(
    expression: str, listed: set[str]
) -> None:
    """No deferred rule can see an output it does not name, unless one names an output at
    evaluation time: then every output is listed. The verdict is the one of inputs that list
    every output."""
    spec = make_spec(
        cfg_rules=[rule("r", f"extraContext.x == 1 && {expression}")],
        maps={**MAPS, "b.map": {"template": "c be_c\n"}},
        extraContext={"x": 1},
    )
    rs = RuleSet.from_spec(spec)
    render = ruled_render(spec)
    stage = RulesStage(rs, isolation=Isolation.NEVER)
    assert set(stage._inputs(render).outputs) == listed
    outcome = asyncio.run(stage.run(StageContext(render=render)))
    full = evaluate_deferred(rs, plan(rs), deferred_inputs(rs, render))
    assert [d.rule_id for d in outcome.diagnostics] == [d.rule_id for d in full.diagnostics]
    assert outcome.rules == full.counters
    assert bool(outcome.diagnostics) == expression.startswith("outputs['b.map']")
