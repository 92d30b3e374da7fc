"""Inline vs deferred comes from the parsed expression, proven two ways that must agree."""

from __future__ import annotations

import pytest

from controller.validation.rules import RuleSet
from controller.validation.rules import classify as classify_module
from controller.validation.rules.cel import compiles_in, probe_env
from controller.validation.rules.checked import DecodeError
from controller.validation.rules.classify import analyse
from controller.validation.rules.refs import ANY
from tests.rules.rules_helpers import make_spec, rule

NONE: frozenset[str] = frozenset()

CORPUS = [
    # (expression, reads only self?, output names, collection names)
    ("self.content.size() > 0", True, NONE, NONE),
    ("self.lines.exists(l, l.startsWith('frontend '))", True, NONE, NONE),
    # comprehension variables shadow the globals: no reference
    ("[1, 2].all(outputs, outputs > 0)", True, NONE, NONE),
    ("self.lines.exists(resources, resources == 'x')", True, NONE, NONE),
    ("self.lines.map(extraContext, extraContext + '!').size() > 0", True, NONE, NONE),
    # has() macros and presence tests are references
    ("has(outputs.x)", False, {"x"}, NONE),
    ("'hosts.map' in outputs", False, {"hosts.map"}, NONE),
    ("outputs['hosts.map'].content != ''", False, {"hosts.map"}, NONE),
    ("outputs[?'hosts.map'].hasValue()", False, {"hosts.map"}, NONE),
    ("outputs.?x.hasValue()", False, {"x"}, NONE),
    ("outputs.x.content == self.content", False, {"x"}, NONE),
    # computed names are "any output"
    ("outputs[self.name].content == ''", False, {ANY}, NONE),
    ("outputs.all(k, k != '')", False, {ANY}, NONE),
    ("size(outputs) > 0", False, {ANY}, NONE),
    ("resources.ingresses.size() > 0", False, NONE, {"ingresses"}),
    ("resources['services'].all(s, s.metadata.name != '')", False, NONE, {"services"}),
    ("resources.all(c, c != '')", False, NONE, {ANY}),
    ("extraContext.listen != ''", False, NONE, NONE),
    # references inside loop bodies and after a shadowing loop still count
    ("self.lines.all(l, l != '' || outputs['a'].content != '')", False, {"a"}, NONE),
    ("[outputs['a'], outputs['b']].all(m, m.content != '')", False, {"a", "b"}, NONE),
    (
        "self.lines.exists(extraContext, extraContext == '') || extraContext.y == 1",
        False,
        NONE,
        NONE,
    ),
]


@pytest.mark.parametrize(("source", "self_only", "outputs", "collections"), CORPUS)
def test_classification_and_names(
    source: str, self_only: bool, outputs: frozenset[str], collections: frozenset[str]
) -> None:
    a = analyse(source)
    assert a.decoded
    assert a.self_only is self_only
    assert a.refs.outputs == frozenset(outputs)
    assert a.refs.collections == frozenset(collections)


@pytest.mark.parametrize(("source", "self_only", "outputs", "collections"), CORPUS)
def test_tree_walk_agrees_with_the_checker(
    source: str, self_only: bool, outputs: frozenset[str], collections: frozenset[str]
) -> None:
    """The checker proves a reference by failing without the declaration; the tree walk
    must find exactly the same free variables."""
    a = analyse(source)
    for var in ("outputs", "resources", "extraContext"):
        proven = not compiles_in(source, probe_env(var))
        assert proven == (var in a.refs.variables), var


@pytest.mark.parametrize(
    ("source", "iterates"),
    [
        ("self.content.contains('x')", False),
        # Element-local all/exists/exists_one: each step reads one element, builds nothing.
        ("self.lines.all(l, l != '')", False),
        ("self.lines.exists(l, l.matches('^global'))", False),
        ("self.lines.exists_one(l, l == 'global')", False),
        ("self.lines.all(l, l.split(' ').size() < 64)", False),
        # Growing faster than the input, or possibly so.
        ("self.lines.all(l, self.content.contains(l))", True),  # reads the whole input
        ("self.lines.map(l, l).size() > 0", True),  # builds a list each step
        ("self.lines.filter(l, l == 'a').size() > 0", True),
        ("self.lines.all(l, l.split(',').all(x, x != ''))", True),  # nested
        ("[1, 2].all(a, [1, 2].exists(b, a == b))", True),
        ("self.lines.all(l, [l, l].size() == 2)", True),  # builds a list each step
        # Output that can be a multiple of the input: chained, exponential.
        ("self.content.replace('a', self.content).size() > 0", True),
        ("self.content.replace('a', 'bb').size() > 0", True),
        ("self.content.split(',').join('x').size() > 0", True),
        ("strings.quote(self.content).size() > 0", True),
        # optMap binds a value (a loop over nothing whose result computes with it).
        ("optional.of(self.content).optMap(a, a + a).hasValue()", True),
        ("optional.of(self.content).optMap(a, optional.of(a).optMap(b, b)).hasValue()", True),
        ("optional.of(self.content).optMap(a, a.size()).hasValue()", False),
        # A pattern from the input: RE2's time per character grows with the pattern.
        ("self.content.matches(self.lines[0])", True),
        ("regex.extractAll(self.content, self.lines[0]).size() > 0", True),
        ("self.content.matches('^global')", False),
        ("regex.extractAll(self.content, '(a)').size() > 0", False),
    ],
)
def test_loops_that_may_outgrow_their_input_are_detected(source: str, iterates: bool) -> None:
    assert analyse(source).refs.iterates is iterates


def test_unreadable_tree_falls_back_to_the_conservative_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(_: bytes) -> None:
        raise DecodeError("pretend the wire format changed")

    monkeypatch.setattr(classify_module, "decode_checked", broken)
    deferred = analyse("outputs['a'].content != '' && resources.x.size() > 0")
    assert not deferred.decoded
    assert not deferred.self_only
    assert deferred.refs.outputs == {ANY}  # the name is unknown: every output
    assert deferred.refs.collections == {ANY}
    assert deferred.refs.iterates  # so it is never judged "cheap"
    inline = analyse("self.content != ''")
    assert inline.self_only  # the checker's proof still classifies it


def _kinds(rs: RuleSet) -> dict[str, bool]:
    return {r.name: r.deferred for r in rs.rules}


def test_every_part_of_a_rule_counts() -> None:
    spec = make_spec(
        maps={"a.map": {"template": "k v\n"}},
        cfg_rules=[
            rule("plain", "self.content != ''"),
            rule(
                "message-only",
                "self.content != ''",
                messageExpression="'see ' + outputs['a.map'].path",
            ),
            rule("when-only", "self.content != ''", when="extraContext.strict == true"),
            rule("expression", "self.content.contains(outputs['a.map'].content)"),
        ],
    )
    rs = RuleSet.from_spec(spec)
    assert not rs.diagnostics
    assert _kinds(rs) == {
        "plain": False,
        "message-only": True,
        "when-only": True,
        "expression": True,
    }


def test_a_block_when_that_reads_others_defers_the_whole_block() -> None:
    spec = make_spec(
        cfg_rules=[rule("plain", "self.content != ''"), rule("other", "size(self.lines) > 1")],
        cfg_when="extraContext.validate == true",
    )
    assert _kinds(RuleSet.from_spec(spec)) == {"plain": True, "other": True}
    inline = make_spec(cfg_rules=[rule("plain", "self.content != ''")], cfg_when="self.path != ''")
    assert _kinds(RuleSet.from_spec(inline)) == {"plain": False}
