"""Inline rules: outputs right after they render (fail-fast), watched objects before any render."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from controller.diagnostics import Severity
from controller.validation.rules import Isolation, RuleSet, check_objects
from tests.rules.rules_helpers import INGRESSES, MINIMAL_CFG, ingress, make_spec, rule, ruled_render

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


HOSTS_MAP = (
    "{% for i in resources.ingresses.list() %}{% for r in i.spec.rules %}"
    "{{ r.host }} {{ i.metadata.name }}\n{% endfor %}{% endfor %}"
)
CFG_READING_HOSTS = MINIMAL_CFG.replace(
    "    default_backend be\n",
    "    http-request set-var(txn.x) str(x),map({{ outputs['hosts.map'].path }})\n"
    "    default_backend be\n",
)


def test_a_bad_object_stops_only_the_outputs_that_read_its_collection() -> None:
    spec = make_spec(
        watched=WATCHED,
        cfg=CFG_READING_HOSTS,
        maps={"hosts.map": {"template": HOSTS_MAP}, "static.map": {"template": "k v\n"}},
    )
    result = ruled_render(spec, {"ingresses": [ingress("bad", "evil host")]})
    assert not result.ok
    states = {n: s.state for n, s in result.outputs.items()}
    assert states == {"hosts.map": "blocked", "haproxy.cfg": "blocked", "static.map": "rendered"}
    assert list(result.files.files) == ["maps/static.map"]  # nothing built from the object
    [failure] = [d for d in result.diagnostics if d.rule_id == "E5003"]
    blocked = {
        d.template_location.template: d.message
        for d in result.diagnostics
        if d.rule_id == "E1008" and d.template_location
    }
    cause = f"root cause: E5003 {failure.message}"
    assert blocked["hosts.map"].endswith(cause)
    assert "ingresses rule dns-hosts on default/bad" in blocked["hosts.map"]
    assert "depends on output 'hosts.map'" in blocked["haproxy.cfg"]
    assert blocked["haproxy.cfg"].endswith(cause)
    assert result.inputs is not None  # deferred consumers still know what was read
    fine = ruled_render(spec, {"ingresses": [ingress("ok", "a.local")]})
    assert fine.ok and {s.state for s in fine.outputs.values()} == {"rendered"}


def test_an_unresolvable_use_of_resources_counts_as_reading_everything() -> None:
    spec = make_spec(
        watched={**WATCHED, "services": {"apiVersion": "v1", "kind": "Service"}},
        maps={
            "loop.map": {"template": "{% for c in resources %}{{ c }} x\n{% endfor %}"},
            "svc.map": {"template": "{{ resources.services.list() | length }} x\n"},
        },
    )
    result = ruled_render(spec, {"ingresses": [ingress("bad", "evil host")]})
    states = {n: s.state for n, s in result.outputs.items()}
    assert states == {"loop.map": "blocked", "svc.map": "rendered", "haproxy.cfg": "rendered"}


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
    from controller.validation.rules.inline import ObjectMemo
    from tests.rules.rules_helpers import filled_store

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


def test_inline_counters_and_time_of_one_render() -> None:
    from controller.render import Renderer
    from controller.validation import Pipeline
    from controller.validation.report import RuleCounters
    from controller.validation.rules import RuledRenderer
    from tests.rules.rules_helpers import filled_store

    spec = make_spec(
        watched=WATCHED,
        cfg_rules=[
            rule("listens", "self.content.contains('bind ')"),
            rule("short", "self.lines.size() < 3", severity="warning"),
            rule("never", "false", when="self.path == 'elsewhere'"),
        ],
    )
    rr = RuledRenderer(Renderer(spec), RuleSet.from_spec(spec))
    store = filled_store(spec, {"ingresses": [ingress("a", "a.local"), ingress("b", "b.local")]})
    result = rr.render(store.snapshot())
    assert result.ok
    # one unit per rule: dns-hosts over both objects, and the three rules of haproxy.cfg
    tally = result.inline_rules
    assert tally is not None and (tally.evaluated, tally.failed, tally.skipped) == (3, 1, 1)
    assert 0 < tally.ms <= result.render_ms  # the render's time includes its rules'

    # The report carries them: counters in metadata, their time among the timings.
    report = asyncio.run(Pipeline([], haproxy_version=None, cache=None).validate(result))
    assert report.metadata.inline_rules == RuleCounters(evaluated=3, failed=1, skipped=1)
    assert report.metadata.rules is None  # no rules stage ran
    assert report.timings["rulesInlineMs"] == round(tally.ms, 3)
    wire = report.model_dump(by_alias=True)
    assert wire["metadata"]["inlineRules"]["evaluated"] == 3

    # A plain render ran no rules and claims none.
    plain = Renderer(spec).render(store.snapshot())
    assert plain.inline_rules is None
    assert (
        asyncio.run(
            Pipeline([], haproxy_version=None, cache=None).validate(plain)
        ).metadata.inline_rules
        is None
    )


def test_hostile_text_in_an_evaluated_message_is_escaped() -> None:
    """An Ingress host carrying ESC sequences and a line break must reach terminals, logs
    and CI annotations as inert, one-line text."""
    spec = make_spec(
        watched={
            "ingresses": {
                **INGRESSES,
                "validate": {
                    "rules": [
                        rule(
                            "no-spaces",
                            "self.spec.rules.all(r, !r.host.contains(' '))",
                            messageExpression="'bad host: ' + self.spec.rules[0].host",
                        )
                    ]
                },
            }
        }
    )
    host = "a b\x1b[2J\x1b]0;owned\x07\n    lua-load /tmp/x.lua\u2028\x85"
    rs = RuleSet.from_spec(spec)
    [d] = check_objects(rs, {"ingresses": [ingress("evil\x1b[31m", host)]}).diagnostics
    assert d.rule_id == "E5003"
    assert d.message == (
        "ingresses rule no-spaces on default/evil\\x1b[31m: bad host: a b\\x1b[2J\\x1b]0;owned"
        "\\x07\\n    lua-load /tmp/x.lua\\u2028\\x85"
    )
    assert d.message.isprintable()


def test_long_messages_are_capped_after_escaping() -> None:
    text = "'\\x01\\x01x' + self.content + self.content + self.content"
    spec = make_spec(cfg=MINIMAL_CFG * 2, cfg_rules=[rule("r", "false", messageExpression=text)])
    [d] = [d for d in ruled_render(spec).diagnostics if d.rule_id == "E5003"]
    shown = d.message.removeprefix("haproxy.cfg rule r: ")
    assert shown.startswith("\\x01\\x01xglobal\\n    maxconn 100\\n")
    assert len(shown) == 1024 + 1 and shown.endswith("…") and "\n" not in shown


def test_lines_split_where_haproxy_splits_them() -> None:
    """HAProxy ends a line at LF only; CR, form feed and U+2028 stay inside the line."""
    from controller.validation.rules.judge import output_value

    content = "a\rb\nc\x0cd\u2028e\n\nf"
    assert output_value("x", "x", content)["lines"] == ["a\rb", "c\x0cd\u2028e", "", "f"]
    assert output_value("x", "x", "one\n")["lines"] == ["one"]
    assert output_value("x", "x", "")["lines"] == []


def _outcome(result: Any) -> tuple[Any, ...]:
    return (
        result.files.checksum,
        {n: (s.state, s.reason) for n, s in result.outputs.items()},
        [(d.rule_id, d.message) for d in result.diagnostics],
        [(b.budget, b.limit) for b in result.budgets],
    )


@pytest.mark.parametrize("bad", [None, 0, 249], ids=["all-good", "first-bad", "last-bad"])
def test_objects_judged_beside_the_render_give_the_sequential_outcome(
    bad: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past a cheap batch's size, the objects are judged in a worker while the render runs
    with none blocked; the outcome must be what judging first, then rendering, gives —
    whether the speculative render is kept (all good) or redone (an object blocks)."""
    from controller.render import Renderer
    from controller.validation.rules import RuledRenderer
    from controller.validation.rules.budget import MAX_CHEAP_EVALUATIONS
    from tests.rules.rules_helpers import filled_store

    objs = [ingress(f"i{k:03}", f"h{k}.local") for k in range(250)]
    assert len(objs) > MAX_CHEAP_EVALUATIONS
    if bad is not None:
        objs[bad] = ingress(objs[bad]["metadata"]["name"], "evil host")
    spec = make_spec(
        watched=WATCHED,
        cfg=CFG_READING_HOSTS,
        cfg_rules=[rule("listens", "self.content.contains('bind ')")],
        maps={"hosts.map": {"template": HOSTS_MAP}, "static.map": {"template": "k v\n"}},
    )
    snapshot = filled_store(spec, {"ingresses": objs}).snapshot()
    overlapped = RuledRenderer(Renderer(spec), RuleSet.from_spec(spec))
    renders: list[str] = []
    real_render = overlapped.renderer.render

    def counted(*args: Any, **kwargs: Any) -> Any:
        renders.append("skip" if kwargs.get("skip") else "plain")
        return real_render(*args, **kwargs)

    monkeypatch.setattr(overlapped.renderer, "render", counted)
    got = overlapped.render(snapshot)
    assert renders == (["plain"] if bad is None else ["plain", "skip"])

    sequential = RuledRenderer(Renderer(spec), RuleSet.from_spec(spec))
    monkeypatch.setattr(sequential, "_worth_overlapping", lambda wanted: False)
    want = sequential.render(snapshot)
    assert _outcome(got) == _outcome(want)
    assert got.ok is (bad is None)
    assert got.inline_rules is not None and want.inline_rules is not None
    assert got.inline_rules == dataclasses.replace(want.inline_rules, ms=got.inline_rules.ms)


def test_an_object_batch_out_of_time_beside_the_render_stops_it_all() -> None:
    """The worker runs out of time while the render goes on: the render is dropped, and the
    result says the analysis is incomplete, as when the objects are judged first."""
    slow = "self.spec.rules.all(r, [1, 2, 3, 4, 5, 6, 7, 8, 9].all(a, [1, 2, 3, 4, 5, 6, 7, 8, 9].all(b, r.host.matches('^[-a-z0-9.]+$'))))"
    watched = {"ingresses": {**INGRESSES, "validate": {"rules": [rule("slow", slow)]}}}
    spec = make_spec(watched=watched)
    objs = [ingress(f"i{k:03}", *(f"h{k}-{j}.local" for j in range(40))) for k in range(300)]
    enough = ruled_render(spec, {"ingresses": objs[:3]}, time_budget=5.0)
    assert enough.ok and enough.files.files  # the rule passes every object given time
    result = ruled_render(spec, {"ingresses": objs}, time_budget=0.05)
    assert not result.files.files
    assert [(b.budget, b.phase) for b in result.budgets] == [("ruleTime", "rules")]


@pytest.mark.parametrize("bad", [None, 0], ids=["kept", "redone"])
def test_beside_the_render_the_rules_share_one_budget_as_if_judged_first(
    bad: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept, the render's budget ends up charged with the objects' time too; redone, the
    second render starts from what the objects left — never from what the discarded render
    already spent on output rules."""
    import controller.validation.rules.render as ruled
    from controller.render import Renderer
    from tests.rules.rules_helpers import filled_store

    hooks: list[Any] = []
    real_hook = ruled.InlineRules  # type: ignore[attr-defined]

    def recorded(*args: Any, **kwargs: Any) -> Any:
        hook = real_hook(*args, **kwargs)
        hooks.append((hook, kwargs["budget"], kwargs["budget"].used))
        return hook

    checks: list[Any] = []
    real_check = ruled._timed_check

    def timed(*args: Any) -> Any:
        out = real_check(*args)
        checks.append(args[2])  # the objects' own budget
        return out

    monkeypatch.setattr(ruled, "InlineRules", recorded)
    monkeypatch.setattr(ruled, "_timed_check", timed)
    objs = [ingress(f"i{k:03}", f"h{k}.local") for k in range(250)]
    if bad is not None:
        objs[bad] = ingress("i000", "evil host")
    slow = "self.lines.all(l, [1, 2, 3].all(a, l.matches('^[ -~]*$')))"
    spec = make_spec(
        watched=WATCHED,
        cfg=CFG_READING_HOSTS,
        maps={
            "hosts.map": {"template": HOSTS_MAP},
            "static.map": {
                "template": "{% for i in range(2000) %}k{{ i }} v\n{% endfor %}",
                "validate": {"rules": [rule("slow", slow)]},
            },
        },
    )
    rr = ruled.RuledRenderer(Renderer(spec), RuleSet.from_spec(spec))
    result = rr.render(filled_store(spec, {"ingresses": objs}).snapshot())
    [objects_budget] = checks
    assert objects_budget.used > 0
    if bad is None:
        [(hook, budget, _)] = hooks
        assert budget.used == pytest.approx(objects_budget.used + hook.charged, abs=0.005)
        assert result.ok
    else:
        [(first, _, _), (_, budget, start)] = hooks
        assert first.seconds > 0  # the discarded render did spend on its output rule
        assert start == objects_budget.used  # and the redo was not charged for it
        assert not result.ok and result.outputs["static.map"].state == "rendered"
