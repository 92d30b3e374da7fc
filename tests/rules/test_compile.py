"""Compile errors, unknown references and type errors are diagnostics at the rule's place."""

from __future__ import annotations

from controller.diagnostics import Location
from controller.validation.rules import RuleSet
from controller.validation.rules.cel import MAX_EXPRESSION_LENGTH
from controller.validation.rules.compiled import PathKey
from tests.rules.rules_helpers import INGRESSES, make_spec, rule


def _ids(rs: RuleSet) -> list[tuple[str, str]]:
    return [(d.rule_id, d.message) for d in rs.diagnostics]


def test_syntax_error_names_the_field_and_position() -> None:
    spec = make_spec(cfg_rules=[rule("ok", "true"), rule("broken", "self.content +")])
    rs = RuleSet.from_spec(spec)
    [(rid, msg)] = _ids(rs)
    assert rid == "E5001"
    assert msg.startswith("spec.haproxyConfig.validate.rules[1].expression: ")
    assert "(at 1:15)" in msg
    assert [r.name for r in rs.rules] == ["ok"]  # the broken rule is never evaluated


def test_undeclared_variable_is_a_compile_error() -> None:
    rs = RuleSet.from_spec(make_spec(cfg_rules=[rule("typo", "outptus['x'].content == ''")]))
    [(rid, msg)] = _ids(rs)
    assert rid == "E5001"
    assert "undeclared reference to 'outptus'" in msg


def test_unknown_output_and_collection_are_reported() -> None:
    spec = make_spec(
        watched={"ingresses": INGRESSES},
        cfg_rules=[
            rule("o", "outputs['nope.map'].content == ''"),
            rule("c", "resources.ingressez.size() > 0"),
            rule("fine", "resources.ingresses.size() >= 0"),
        ],
    )
    rs = RuleSet.from_spec(spec)
    assert [rid for rid, _ in _ids(rs)] == ["E5002", "E5002"]
    assert "outputs['nope.map'] is not an output (defined: haproxy.cfg)" in _ids(rs)[0][1]
    assert "resources.ingressez is not a watched collection (defined: ingresses)" in _ids(rs)[1][1]
    assert [r.name for r in rs.rules] == ["fine"]


def test_result_types_are_checked() -> None:
    spec = make_spec(
        cfg_rules=[
            rule("not-bool", "self.content.size()"),
            rule("msg-not-string", "true", messageExpression="1 + 1"),
            rule("when-not-bool", "true", when="'yes'"),
            rule("dyn-is-fine", "self.flag", messageExpression="self.note"),
        ]
    )
    found = _ids(RuleSet.from_spec(spec))
    assert [rid for rid, _ in found] == ["E5009", "E5009", "E5009"]
    assert "rules[0].expression: must evaluate to bool" in found[0][1]
    assert "rules[1].messageExpression: must evaluate to string" in found[1][1]
    assert "rules[2].when: must evaluate to bool" in found[2][1]


def test_broken_block_when_is_reported_once() -> None:
    spec = make_spec(cfg_rules=[rule("a", "true"), rule("b", "true")], cfg_when="self.(")
    rs = RuleSet.from_spec(spec)
    assert [rid for rid, _ in _ids(rs)] == ["E5001"]
    assert rs.rules == ()


def test_overlong_expression_is_refused() -> None:
    long = " && ".join(["true"] * (MAX_EXPRESSION_LENGTH // 8 + 1))
    [(rid, msg)] = _ids(RuleSet.from_spec(make_spec(cfg_rules=[rule("long", long)])))
    assert rid == "E5001"
    assert f"the limit is {MAX_EXPRESSION_LENGTH}" in msg


def test_locations_come_from_the_locator() -> None:
    seen: list[PathKey] = []

    def locate(path: PathKey) -> Location:
        seen.append(path)
        return Location(file="config.yaml", line=42)

    spec = make_spec(maps={"a.map": {"template": "", "validate": {"rules": [rule("x", "1 +")]}}})
    [d] = RuleSet.from_spec(spec, locate).diagnostics
    assert d.location == Location(file="config.yaml", line=42)
    assert seen == [("spec", "maps", "a.map", "validate", "rules", 0, "expression")]


def test_a_position_the_parser_does_not_know_is_not_printed() -> None:
    deep = "self" + ".b" * 40 + " == 1"  # past the parser's nesting limit: it has no position
    [(rid, msg)] = _ids(RuleSet.from_spec(make_spec(cfg_rules=[rule("deep", deep)])))
    assert rid == "E5001"
    assert msg == (
        "spec.haproxyConfig.validate.rules[0].expression: "
        "Exceeded max recursion depth of 32 when parsing."
    )
    nested = "(" * 40 + "true" + ")" * 40
    [(_, msg)] = _ids(RuleSet.from_spec(make_spec(cfg_rules=[rule("nested", nested)])))
    assert "<input>" not in msg and "[" not in msg.split(": ", 1)[1]
