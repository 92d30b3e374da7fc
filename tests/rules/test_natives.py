"""Native list functions: sets.* and regex.extractAll, and the quickstart rule built on them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from controller.validation.rules import Isolation, RuleSet
from controller.validation.rules.budget import is_cheap
from controller.validation.rules.cel import EvalError, compile_expression, evaluate
from controller.validation.rules.isolate import run_isolated
from tests.rules.rules_helpers import make_spec, rule, ruled_render

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "config.yaml"


def cel(expression: str, **data: object) -> object:
    return evaluate(compile_expression(expression), {"self": data})


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("sets.contains([1, 2, 3], [3, 1])", True),
        ("sets.contains([1, 2], [4])", False),
        ("sets.contains([], [])", True),
        ("sets.contains([1], [1.0])", True),  # CEL equality across numbers
        ("sets.contains([1], [true])", False),  # but a bool is not a number
        ("sets.contains(['1'], [1])", False),  # nor a string
        ("sets.contains([b'a'], ['a'])", False),  # and bytes are not a string
        ("sets.contains([['a']], [['a']])", True),
        ("sets.contains([{'a': 'b'}], [{'a': 'b'}])", True),
        ("sets.contains([{'a': [1]}], [{'a': [1]}])", True),
        ("sets.equivalent([1, 1, 2], [2, 1])", True),
        ("sets.equivalent([1], [1, 2])", False),
        ("sets.intersects(['a', 'b'], ['c', 'b'])", True),
        ("sets.intersects(['a'], [])", False),
    ],
)
def test_sets(expression: str, expected: bool) -> None:
    assert cel(expression) is expected


def test_extract_all() -> None:
    text = "backend a\n    server x\nbackend b\n# backend c\n"
    assert cel(r"regex.extractAll(self.t, r'(?m)^backend (\S+)')", t=text) == ["a", "b"]
    assert cel(r"regex.extractAll(self.t, r'backend \S+')", t=text) == [
        "backend a",
        "backend b",
        "backend c",
    ]
    assert cel(r"regex.extractAll(self.t, r'(?m)^# (x)?backend')", t=text) == []  # no group
    # A group that took part but matched nothing is kept; one that took no part is not.
    assert cel(r"regex.extractAll(self.t, r'(x*)backend')", t=text) == ["", "", ""]
    assert cel(r"regex.extractAll(self.t, r'(?m)^(#)? ?backend')", t=text) == ["#"]
    # Empty matches are skipped, whatever the text's characters.
    for t in ("abc", "日本x", "😀é"):
        assert cel(r"regex.extractAll(self.t, r'x*')", t=t) == (["x"] if "x" in t else [])
        assert cel(r"regex.extractAll(self.t, r'(x*)')", t=t) == (["x"] if "x" in t else [])
    assert cel(r"regex.extractAll(self.t, r'(.)')", t="é日x") == ["é", "日", "x"]
    with pytest.raises(EvalError, match="at most one capture group"):
        cel(r"regex.extractAll(self.t, r'(a)(b)')", t=text)
    with pytest.raises(EvalError, match="invalid regular expression"):
        cel("regex.extractAll(self.t, '(')", t=text)


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"(?m)^(\w+) \1$", "backreferences or lookaround"),  # a backreference
        (r"backend(?= )", "backreferences or lookaround"),  # lookahead
        (r"(?<=x)y", "backreferences or lookaround"),  # lookbehind
        (r"((a{100}){100}){100}", "or is too large"),
    ],
)
def test_extract_all_refuses_what_only_a_backtracking_engine_runs(pattern: str, why: str) -> None:
    with pytest.raises(EvalError, match=why):
        cel(f"regex.extractAll(self.t, r'{pattern}')", t="backend backend\n")


def test_extract_all_takes_linear_time_on_a_pattern_that_backtracks_elsewhere() -> None:
    """``(a+)+$`` against a's followed by a b takes 2^n steps in a backtracking engine (hours
    for n = 40); RE2 answers at once. Run in a killable worker so that a regression fails
    at the deadline instead of hanging the suite."""
    text = "a" * 40 + "b"
    found = run_isolated(lambda: cel(r"regex.extractAll(self.t, r'(a+)+$')", t=text), 10.0)
    assert found == []
    assert cel(r"regex.extractAll(self.t, r'(a+)+$')", t="aab") == []
    assert cel(r"regex.extractAll(self.t, r'(a+)+b')", t="aab") == ["aa"]


def test_a_rule_calling_them_is_cheap_unless_it_loops() -> None:
    """Without a comprehension a rule runs in-process: the sets functions are linear in
    their input, like ``contains``, and ``regex.extractAll`` watches the deadline itself."""
    for expression in (
        "sets.contains(self.lines, ['global'])",
        "sets.contains(regex.extractAll(self.content, '(a)'), ['a'])",
    ):
        [r] = RuleSet.from_spec(make_spec(cfg_rules=[rule("r", expression)])).rules
        assert not r.refs.iterates and is_cheap([r], 1), expression
    looped = "self.lines.all(l, sets.contains([l], ['a']))"
    [r] = RuleSet.from_spec(make_spec(cfg_rules=[rule("r", looped)])).rules
    assert r.refs.iterates and not is_cheap([r], 1)


@pytest.mark.parametrize("isolation", [Isolation.AUTO, Isolation.NEVER])
def test_an_in_process_batch_past_its_budget_is_no_verdict(isolation: Isolation) -> None:
    """A cheap batch cannot be interrupted, but one that ran past the budget gives no
    verdict either way: a worker would have been killed by then."""
    spec = make_spec(cfg_rules=[rule("r", "self.content.contains('frontend')")])
    [r] = RuleSet.from_spec(spec).rules
    assert is_cheap([r], 1)
    late = ruled_render(spec, time_budget=1e-9, isolation=isolation)
    assert [b.budget for b in late.budgets] == ["ruleTime"]
    assert not any(d.rule_id.startswith("E5") for d in late.diagnostics)
    assert ruled_render(spec, isolation=isolation).ok  # in time, the same rule passes


@pytest.mark.parametrize("isolation", [Isolation.AUTO, Isolation.NEVER, Isolation.ALWAYS])
def test_a_quadratic_extraction_is_stopped_by_the_time_budget(isolation: Isolation) -> None:
    """80,000 matches of ``a(?:.*z)?`` each scan to the end of 80,000 characters: seconds of
    work (about 4 s here, unchecked) that must end at the rule time budget as incomplete,
    in-process as in the worker, and never become a verdict."""
    import time

    spec = make_spec(
        cfg="{{ 'a' * 80000 }}\n",
        cfg_rules=[rule("r", "regex.extractAll(self.content, 'a(?:.*z)?').size() > 0")],
    )
    started = time.monotonic()
    result = ruled_render(spec, time_budget=0.2, isolation=isolation)
    assert time.monotonic() - started < 1.5
    assert [(b.budget, b.limit) for b in result.budgets] == [("ruleTime", 0.2)]
    assert not any(d.rule_id == "E5007" for d in result.diagnostics)  # no verdict from it
    # Given the time, the same rule simply passes.
    short = make_spec(
        cfg="{{ 'a' * 2000 }}\n",
        cfg_rules=[rule("r", "regex.extractAll(self.content, 'a(?:.*z)?').size() > 0")],
    )
    assert ruled_render(short, isolation=isolation).ok


def _quickstart_rule(name: str) -> dict[str, object]:
    doc = yaml.safe_load(QUICKSTART.read_text())
    [found] = [r for r in doc["spec"]["haproxyConfig"]["validate"]["rules"] if r["name"] == name]
    return dict(found)


CFG = """\
global
    maxconn 10

frontend fe
    bind 127.0.0.1:18080
    use_backend %[var(txn.backend)]

backend be_a
    server s 127.0.0.1:1

backend be_b
    server s 127.0.0.1:2
"""


@pytest.mark.parametrize("isolation", [Isolation.NEVER, Isolation.ALWAYS])
def test_the_quickstart_map_rule_catches_a_missing_backend(isolation: Isolation) -> None:
    backends = _quickstart_rule("map-backends-exist")
    good = "# host+path backend\na.local/ be_a\nb.local/x be_b\n"

    def render(paths: str) -> list[str]:
        spec = make_spec(
            cfg=CFG,
            cfg_rules=[backends],
            maps={
                "paths.map": {"template": paths},
                "prefixes.map": {"template": "a/ be_a\n"},
                "regex.map": {"template": "(?i)^r\\.local/x be_b\n"},
                "passthrough.map": {"template": "# sni backend\n"},
            },
        )
        rs = RuleSet.from_spec(spec)
        assert not rs.diagnostics and rs.deferred
        from controller.validation.rules import deferred_inputs, evaluate_deferred, plan

        result = ruled_render(spec, isolation=isolation)
        found = evaluate_deferred(rs, plan(rs), deferred_inputs(rs, result))
        return [d.rule_id for d in found.diagnostics]

    assert render(good) == []
    assert render(good + "c.local/ be_gone\n") == ["E5003"]
    assert render(good + "c.local/ be_a \n") == []  # trailing blanks are not part of the name


def test_the_quickstart_listener_rule_is_loop_free() -> None:
    listener = _quickstart_rule("has-listener")
    [r] = RuleSet.from_spec(make_spec(cfg=CFG, cfg_rules=[listener])).rules
    assert not r.deferred and not r.refs.iterates
    assert ruled_render(make_spec(cfg=CFG, cfg_rules=[listener])).ok
    no_bind = CFG.replace("    bind 127.0.0.1:18080\n", "")
    assert not ruled_render(make_spec(cfg=no_bind, cfg_rules=[listener])).ok
