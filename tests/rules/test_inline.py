"""Inline rules: outputs right after they render (fail-fast), watched objects before any render."""

from __future__ import annotations

from typing import Any

import pytest
from rules_helpers import INGRESSES, MINIMAL_CFG, ingress, make_spec, rule, ruled_render

from controller.diagnostics import Severity
from controller.validation.rules import Isolation, RuleSet, check_objects

CFG_USING_MAP = MINIMAL_CFG.replace(
    "    default_backend be\n",
    "    http-request set-var(txn.x) str(x),map({{ outputs['a.map'].path }})\n"
    "    default_backend be\n",
)


def _map(rules: list[dict[str, Any]], template: str = "k v\n") -> dict[str, Any]:
    return {"a.map": {"template": template, "validate": {"rules": rules}}}


def test_failing_inline_rule_blocks_dependants_with_the_root_cause() -> None:
    spec = make_spec(
        cfg=CFG_USING_MAP,
        maps=_map([rule("enough-lines", "self.lines.size() > 5", message="too short")]),
    )
    result = ruled_render(spec)
    assert not result.ok
    states = {n: s.state for n, s in result.outputs.items()}
    assert states == {"a.map": "failed", "haproxy.cfg": "blocked"}
    by_id = {d.rule_id: d for d in result.diagnostics}
    assert by_id["E5003"].message == "a.map rule enough-lines: too short"
    assert by_id["E5003"].location is not None and by_id["E5003"].location.file == "maps/a.map"
    assert "root cause: a.map: E5003 a.map rule enough-lines: too short" in by_id["E1008"].message


def test_warning_rule_reports_without_blocking() -> None:
    spec = make_spec(
        cfg=CFG_USING_MAP,
        maps=_map([rule("enough-lines", "self.lines.size() > 5", severity="warning")]),
    )
    result = ruled_render(spec)
    assert result.ok
    assert {s.state for s in result.outputs.values()} == {"rendered"}
    [d] = [d for d in result.diagnostics if d.rule_id == "W5004"]
    assert d.severity is Severity.WARNING
    assert d.message == "a.map rule enough-lines: self.lines.size() > 5 is false"


def test_evaluation_errors_fail_closed() -> None:
    spec = make_spec(cfg_rules=[rule("missing-field", "self.nokey == 1")])
    result = ruled_render(spec)
    [d] = [d for d in result.diagnostics if d.rule_id.startswith("E5")]
    assert d.rule_id == "E5007"
    assert "could not be evaluated" in d.message and "nokey" in d.message
    assert result.outputs["haproxy.cfg"].state == "failed"


def test_message_expression_and_its_fallback() -> None:
    spec = make_spec(
        cfg_rules=[
            rule("a", "false", messageExpression="'has ' + string(self.lines.size()) + ' lines'"),
            rule("b", "false", messageExpression="self.nokey"),
        ]
    )
    msgs = sorted(d.message for d in ruled_render(spec).diagnostics if d.rule_id == "E5003")
    assert msgs[0] == f"haproxy.cfg rule a: has {MINIMAL_CFG.count(chr(10))} lines"
    assert msgs[1].startswith("haproxy.cfg rule b: false is false (messageExpression failed:")


def test_when_conditions_skip() -> None:
    spec = make_spec(
        cfg_rules=[
            rule("never", "false", when="self.path == 'elsewhere'"),
            rule("checked", "self.content != ''", when="self.path == 'haproxy.cfg'"),
        ]
    )
    assert ruled_render(spec).ok
    blocked = make_spec(cfg_rules=[rule("x", "false")], cfg_when="self.content == ''")
    assert ruled_render(blocked).ok


def test_compile_errors_fail_the_render() -> None:
    result = ruled_render(make_spec(cfg_rules=[rule("broken", "self.(")]))
    assert not result.ok
    assert "E5001" in {d.rule_id for d in result.diagnostics}


HOSTS = [rule("dns-hosts", "self.spec.rules.all(r, r.host.matches('^[a-z0-9.-]+$'))")]
WATCHED = {"ingresses": {**INGRESSES, "validate": {"rules": HOSTS}}}


def test_object_rules_judge_each_object() -> None:
    rs = RuleSet.from_spec(make_spec(watched=WATCHED))
    good, bad = ingress("good", "a.local"), ingress("bad", "a.local", "evil host")
    batch = check_objects(rs, {"ingresses": [good, bad]})
    [d] = batch.diagnostics
    assert d.rule_id == "E5003"
    assert d.message.startswith("ingresses rule dns-hosts on default/bad: ")
    assert d.object is not None and (d.object.kind, d.object.name) == ("Ingress", "bad")
    assert batch.counters.evaluated == 1 and batch.counters.failed == 1


def test_a_bad_object_stops_the_render_before_it_starts() -> None:
    spec = make_spec(watched=WATCHED)
    result = ruled_render(spec, {"ingresses": [ingress("bad", "evil host")]})
    assert not result.ok
    assert result.files.files == {} or len(result.files.files) == 0
    assert result.outputs == {}
    assert "E5003" in {d.rule_id for d in result.diagnostics}
    assert result.inputs is not None  # deferred consumers still know what was read
    fine = ruled_render(spec, {"ingresses": [ingress("ok", "a.local")]})
    assert fine.ok and "haproxy.cfg" in fine.outputs


@pytest.mark.parametrize("isolation", [Isolation.NEVER, Isolation.ALWAYS])
def test_forked_and_in_process_evaluation_agree(isolation: Isolation) -> None:
    spec = make_spec(
        cfg_rules=[
            rule("loop", "self.lines.all(l, l.size() < 10)", message="long line"),
            rule("plain", "self.content.contains('frontend')"),
        ]
    )
    result = ruled_render(spec, isolation=isolation)
    assert [(d.rule_id, d.message) for d in result.diagnostics] == [
        ("E5003", "haproxy.cfg rule loop: long line")
    ]


def test_unchanged_objects_are_not_judged_again() -> None:
    from rules_helpers import filled_store

    from controller.validation.rules.inline import ObjectMemo

    spec = make_spec(watched=WATCHED)
    rs = RuleSet.from_spec(spec)
    store = filled_store(spec, {"ingresses": [ingress("bad", "a b"), ingress("ok", "a.local")]})
    memo = ObjectMemo()

    def judge(view_objects: list[Any]) -> Any:
        return check_objects(rs, {"ingresses": view_objects}, memo=memo)

    first = judge(store.snapshot().collection("ingresses").list())
    again = judge(store.snapshot().collection("ingresses").list())
    assert first.counters.evaluated == 1 and again.counters.evaluated == 0  # all remembered
    assert [d.message for d in again.diagnostics] == [d.message for d in first.diagnostics]
    store.apply("ingresses", ingress("ok", "still.ok"))  # a new object for one key
    third = judge(store.snapshot().collection("ingresses").list())
    assert third.counters.evaluated == 1
    assert [d.object.name for d in third.diagnostics if d.object] == ["bad"]
