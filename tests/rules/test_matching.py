"""``matches()`` answered with cached patterns (``matching.py``): the runtime's answers and
errors, word for word, compared against the runtime's own ``matches`` in a plain
environment (no rewrite), on hostile patterns and texts."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from cel_expr_python import cel

from controller.validation.rules import Isolation, RuleSet, RunBudget, check_objects, deadline
from controller.validation.rules import inline as inline_module
from controller.validation.rules.cel import (
    EvalError,
    Program,
    compile_expression,
    evaluate,
    full_env,
)
from controller.validation.rules.checked import decode_checked, records
from controller.validation.rules.isolate import run_isolated
from controller.validation.rules.matching import FUNCTION, matches
from tests.rules.rules_helpers import INGRESSES, filled_store, ingress, make_spec, rule

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "config.yaml"

_PLAIN = cel.NewEnv(variables={"self": cel.Type.DYN})
"""The runtime's standard library only: its ``matches`` is the one being matched."""

HOST = r"^([*][.])?[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

PATTERNS = [
    HOST,
    r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$",
    r"^(?i)(HTTP|HTTPS|GRPC|GRPCS|H2C)$",
    r"^[0-9a-fA-F.:/]+( *, *[0-9a-fA-F.:/]+){0,63}$",
    r"^/[!-~]{0,1000}$",
    "^abc$",
    "abc",
    "",
    r"\d",
    r"^\w+$",
    r"\s",
    r"\bx",
    r"\Bx",
    "(?i)k",
    "(?i)s",
    "^.$",
    "(?s)^.$",
    "(?m)^b$",
    "^a.b$",
    "[[:alpha:]]+",
    "[[:^alpha:]]",
    r"\pL",
    r"\p{Greek}",
    r"\PL",
    r"\C",
    r"\x41",
    r"\x{41}",
    r"\101",
    r"\Q*\E",
    "a{2,3}",
    "(?U)a+",
    "é",
    "日本",
    "[é-ü]",
    "\\\\p",
    "(?P<n>a)",
    "(?<n>a)",
    # refused by RE2: syntax, backreferences, lookaround, repetition limits
    "(",
    "[z-a]",
    "*",
    r"(a)\1",
    r"\8",
    r"\Z",
    r"[\b]",
    "(?=a)",
    "(?!a)",
    "(?<=a)",
    "(?P<n>a)(?P=n)",
    "a{1001}",
    "((a{1000}){1000}){1000}",
    "a++",
    "\x00",
    "[\n]",
    "\u2028",
]

TEXTS = [
    "",
    "abc",
    "ABC",
    "abc\n",
    "a\nb",
    "K",
    "\u212a",  # Kelvin sign: case-folds to k
    "\u017f",  # long s: case-folds to s
    "é",
    "\u0663",  # Arabic-Indic three: a Unicode digit, not an RE2 \d
    "\u2028",
    "\u03b1",  # Greek alpha
    "😀",
    "x\x00y",
    "app-1.example.test",
    "*.example.com",
    "Foo.com",
    "a.-b",
    "/" + "a" * 300,
    "HTTPS",
    "10.0.0.0/8 , ::1",
    "*",
    "aaa",
    "A",
    "x",
]


def _outcome(program: Program, text: Any, pattern: Any) -> tuple[str, Any]:
    try:
        return "value", evaluate(program, {"self": {"t": text, "p": pattern}})
    except EvalError as exc:
        return "error", str(exc)


def _plain(source: str) -> Program:
    return Program(source, _PLAIN.compile(source), "BOOL")


@pytest.mark.parametrize("pattern", PATTERNS)
def test_same_answers_and_errors_as_the_runtime(pattern: str) -> None:
    """Member and global form, pattern from data (the rewritten program cannot know it
    ahead), against every text: the same value, or the same error message."""
    for source in ("self.t.matches(self.p)", "matches(self.t, self.p)"):
        ours, theirs = compile_expression(source), _plain(source)
        assert FUNCTION in {n.name for n in decode_checked(ours.expression.serialize()).walk()}
        for text in TEXTS:
            assert _outcome(ours, text, pattern) == _outcome(theirs, text, pattern), (text, source)


@pytest.mark.parametrize("source", ["self.t.matches(self.p)", "matches(self.t, self.p)"])
def test_operands_of_another_type_fail_as_before(source: str) -> None:
    """A hostile object's number, null, list or map where a string belongs: the runtime's
    "no matching overload" names ``matches``, as the author wrote it, not the rewrite's
    function."""
    ours, theirs = compile_expression(source), _plain(source)
    others: list[Any] = [1, 1.5, None, True, ["a"], {"a": "b"}, "a"]
    for t in others:
        for p in others:
            assert _outcome(ours, t, p) == _outcome(theirs, t, p), (t, p)
            if not (isinstance(t, str) and isinstance(p, str)):
                assert FUNCTION not in str(_outcome(ours, t, p)[1])


def test_constant_patterns_and_errors_inside_logic() -> None:
    """A constant pattern (the quickstart's case), and CEL's error absorption: an error on
    one side of ``||`` / ``&&`` is decided by the other side exactly as before."""
    sources = [
        f"self.t.matches('{HOST}')",
        "self.t.matches('(') || true",
        "self.t.matches('(') && false",
        "self.t.matches('(') || false",
        "[self.t, 'b'].all(x, x.matches('^[a-z]+$'))",
        "[self.t].exists(x, x.matches(self.p))",
        "!self.t.matches('^a') ? 'no' : 'yes'",
    ]
    for source in sources:
        ours, theirs = compile_expression(source), _plain(source)
        for text in ("abc", "app-1.example.test", "A.b", ""):
            for pattern in ("b", "(", "(?=x)"):
                assert _outcome(ours, text, pattern) == _outcome(theirs, text, pattern), source


def test_an_invalid_pattern_is_a_finding_with_the_runtime_message() -> None:
    """Not a crash: the rule fails on the object with the runtime's own words."""
    pattern = "(?=lookahead)"
    try:
        evaluate(_plain(f"'x'.matches('{pattern}')"), {})
    except EvalError as exc:
        runtime_says = str(exc)
    else:
        raise AssertionError("the runtime accepted a lookahead")
    assert "invalid" in runtime_says
    check = rule("pattern", f"self.spec.rules.all(r, r.host.matches('{pattern}'))")
    spec = make_spec(watched={"ingresses": {**INGRESSES, "validate": {"rules": [check]}}})
    rs = RuleSet.from_spec(spec)
    assert not rs.diagnostics
    objs = filled_store(spec, {"ingresses": [ingress("a", "a.local")]}).snapshot()
    found = check_objects(rs, {"ingresses": objs.collection("ingresses").list()})
    assert len(found.diagnostics) == 1
    diag = found.diagnostics[0]
    assert runtime_says in diag.message
    assert diag.object is not None and diag.object.name == "a"


def test_the_rewrite_keeps_positions_and_classification() -> None:
    """Source positions (CheckedExpr.source_info, field 5) are the checker's, unchanged; a
    constant pattern stays cheap, a pattern from data still counts as expensive."""
    rs = RuleSet.from_spec(_quickstart())
    by_name = {r.name: r for r in rs.rules}
    assert not by_name["hosts-are-dns-names"].refs.iterates
    assert by_name["annotation-values"].refs.iterates  # a pattern looked up from a map
    for name in ("hosts-are-dns-names", "tls-fields", "annotation-values"):
        program = by_name[name].expression
        checked = full_env().compile(program.source).serialize()  # before the rewrite
        called = {n.name for n in decode_checked(program.expression.serialize()).walk()}
        assert FUNCTION in called and "matches" not in called
        assert "matches" in {n.name for n in decode_checked(checked).walk()}
        assert _source_info(program.expression.serialize()) == _source_info(checked)
    bad = compile_expression("self.matches('a')")  # compiles; position errors come first
    assert bad.result_type == "BOOL"


def _source_info(serialized: bytes) -> list[bytes]:
    """Its fields, sorted: the positions are a map, written in no fixed order."""
    (_, checked, _) = next(r for r in records(serialized) if r[0] == 2)
    assert checked is not None
    info = next(payload for n, payload, _ in records(checked) if n == 5)
    assert info is not None
    return sorted(raw for _, _, raw in records(info))


def _quickstart() -> Any:
    from controller.spec.loader import load_config

    config, problems = load_config(QUICKSTART)
    assert config is not None and not problems
    return config.spec


def test_a_long_pattern_is_answered_by_the_runtime_uncached() -> None:
    """Patterns past the cache's length limit (only objects supply them) keep the runtime's
    answers and errors, and are not kept."""
    from controller.validation.rules import matching as module

    long_ok, long_bad = "(?:a|b)" * 1000 + "c", "(" * 5000
    ours, theirs = compile_expression("self.t.matches(self.p)"), _plain("self.t.matches(self.p)")
    before = module._plan.cache_info().currsize
    for pattern in (long_ok, long_bad):
        for text in ("ab" * 600 + "c", "c", ""):
            assert _outcome(ours, text, pattern) == _outcome(theirs, text, pattern)
    assert module._plan.cache_info().currsize == before


def test_a_long_text_looks_at_the_deadline() -> None:
    """In-process, a call on a long text stops once the deadline has passed, and the
    evaluation is void (``budget.execute`` reports the batch out of time)."""
    program = compile_expression("self.t.matches('^a+$')")
    with deadline.within(0.0) as d:
        evaluate_or_error(program, "a" * 10_000)
    assert d.tripped
    with deadline.within(10.0) as d:
        assert evaluate(program, {"self": {"t": "a" * 10_000}}) is True
    assert not d.tripped


def evaluate_or_error(program: Program, text: str) -> None:
    with contextlib.suppress(EvalError):
        evaluate(program, {"self": {"t": text}})


def test_linear_time_on_a_pattern_that_backtracks_elsewhere() -> None:
    """``(a+)+$`` on a's then a b: exponential in a backtracking engine, at once in RE2.
    In a killable worker, so that a regression fails at the deadline instead of hanging."""
    text = "a" * 50_000 + "b"
    found = run_isolated(lambda: matches(text, "(a+)+$"), 10.0)
    assert found is False
    assert matches("aab", "(a+)+b") is True


def _tls_ingress(i: int, extra_host: str | None = None) -> dict[str, Any]:
    """Two hosts, TLS with both: each rule calls ``matches`` (five calls per object)."""
    hosts = [f"app-{i}.example.test", f"www.app-{i}.example.test"]
    obj = ingress(f"app-{i}", *hosts, *([extra_host] if extra_host else []))
    obj["spec"]["tls"] = [{"secretName": f"tls-{i}", "hosts": hosts}]
    return obj


@pytest.mark.slow
def test_a_changed_object_is_the_only_one_judged_at_10000(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 20 item 1 at scale: the quickstart's inline rules over 10,000 Ingresses, then
    the same objects with one changed: only that one is evaluated again."""
    spec = _quickstart()
    rs = RuleSet.from_spec(spec)
    judged: list[int] = []
    real = inline_module.judge_many

    def counting(rules: Any, selves: Any, *args: Any, **kwargs: Any) -> Any:
        judged.append(len(selves))
        return real(rules, selves, *args, **kwargs)

    monkeypatch.setattr(inline_module, "judge_many", counting)
    store = filled_store(spec, {"ingresses": [_tls_ingress(i) for i in range(10_000)]})
    memo = inline_module.ObjectMemo()
    objs = store.snapshot().collection("ingresses").list()
    first = check_objects(
        rs, {"ingresses": objs}, memo=memo, budget=RunBudget(60.0), isolation=Isolation.NEVER
    )
    assert not first.diagnostics and judged == [10_000]
    store.apply("ingresses", _tls_ingress(7, extra_host="changed.example.test"))
    objs = store.snapshot().collection("ingresses").list()
    again = check_objects(
        rs, {"ingresses": objs}, memo=memo, budget=RunBudget(60.0), isolation=Isolation.NEVER
    )
    assert not again.diagnostics and judged == [10_000, 1]
