"""Deferred rules: fail-closed, own-skip exemption, cascade suppression, deterministic order,
and the render graph staying free of validation references."""

from __future__ import annotations

from typing import Any

from controller.diagnostics import Diagnostic, Phase, Severity, make
from controller.render import Renderer
from controller.spec.models import HAProxyTemplateConfigSpec
from controller.validation.finalize import finalize
from controller.validation.options import ValidationOptions
from controller.validation.report import RuleCounters
from controller.validation.rules import (
    Isolation,
    RuledRenderer,
    RuleSet,
    deferred_inputs,
    evaluate_deferred,
    plan,
)
from tests.rules.rules_helpers import INGRESSES, MINIMAL_CFG, filled_store, ingress, make_spec, rule

FAIL_CLOSED = 'deferred validation references output "opt.map" which did not produce a value'


def run(
    spec: HAProxyTemplateConfigSpec, fixtures: dict[str, list[dict[str, Any]]] | None = None
) -> tuple[list[Diagnostic], RuleCounters]:
    rs = RuleSet.from_spec(spec)
    assert not rs.diagnostics, rs.diagnostics
    render = RuledRenderer(Renderer(spec), rs, isolation=Isolation.NEVER).render(
        filled_store(spec, fixtures).snapshot()
    )
    result = evaluate_deferred(rs, plan(rs), deferred_inputs(rs, render))
    units = len(rs.deferred)
    c = result.counters
    assert c.evaluated + c.skipped + c.suppressed == units  # the counters always add up
    assert c.failed <= c.evaluated
    return result.diagnostics, c


def _map(template: str, *rules: dict[str, Any], when: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"template": template}
    if rules:
        out["validate"] = {"rules": list(rules)}
    if when is not None:
        out["when"] = when
    return out


def test_mutual_deferred_references_load_without_a_cycle_error() -> None:
    spec = make_spec(
        maps={
            "a.map": _map("a 1\n", rule("sees-b", "outputs['b.map'].content != ''")),
            "b.map": _map("b 1\n", rule("sees-a", "outputs['a.map'].content != ''")),
        }
    )
    renderer = Renderer(spec)
    assert "E1005" not in {d.rule_id for d in renderer.diagnostics}
    assert renderer.graph.cycles == ()
    rs = RuleSet.from_spec(spec)
    assert plan(rs).cycles == (("output:a.map", "output:b.map"),)
    diags, counters = run(spec)
    assert [d.rule_id for d in diags] == ["I5010"]  # reported, as info only
    assert counters == RuleCounters(evaluated=2)


def test_message_only_reference_adds_no_render_edge() -> None:
    cfg = MINIMAL_CFG.replace(
        "    default_backend be\n", "    # {{ outputs['a.map'].path }}\n    default_backend be\n"
    )
    with_rule = make_spec(
        cfg=cfg,
        maps={
            "a.map": _map(
                "k v\n",
                rule("m", "self.content != ''", messageExpression="outputs['haproxy.cfg'].path"),
            )
        },
    )
    without = make_spec(cfg=cfg, maps={"a.map": _map("k v\n")})
    graph = Renderer(with_rule).graph
    assert dict(graph.dependencies) == dict(Renderer(without).graph.dependencies)
    assert graph.dependencies["a.map"] == frozenset()
    assert graph.dependencies["haproxy.cfg"] == {"a.map"}
    assert graph.cycles == ()
    [r] = RuleSet.from_spec(with_rule).rules
    assert r.deferred  # reading haproxy.cfg in the message makes it deferred, nothing more


def test_a_rule_only_cross_reference_never_creates_a_render_cycle() -> None:
    cfg = MINIMAL_CFG.replace(
        "    default_backend be\n", "    # {{ outputs['a.map'].path }}\n    default_backend be\n"
    )
    spec = make_spec(
        cfg=cfg,
        maps={"a.map": _map("k v\n", rule("r", "outputs['haproxy.cfg'].content != ''"))},
    )
    assert not [d for d in Renderer(spec).diagnostics if d.rule_id == "E1005"]
    diags, counters = run(spec)
    assert diags == [] and counters.evaluated == 1


def test_a_template_cycle_is_a_hard_error_naming_it() -> None:
    spec = make_spec(
        maps={
            "a.map": _map("{{ outputs['b.map'].content }}"),
            "b.map": _map("{{ outputs['a.map'].content }}"),
        }
    )
    [cycle] = [d for d in Renderer(spec).diagnostics if d.rule_id == "E1005"]
    assert "render cycle: a.map -> b.map -> a.map" in cycle.message


def test_a_skipped_referenced_output_fails_closed() -> None:
    spec = make_spec(
        cfg_rules=[rule("sees-opt", "outputs['opt.map'].content == ''")],
        maps={"opt.map": _map("k v\n", when="false")},
    )
    diags, counters = run(spec)
    [d] = diags
    assert d.rule_id == "E5005"
    assert FAIL_CLOSED in d.message
    assert d.message.endswith("(it was skipped)")
    assert counters == RuleCounters(evaluated=1, failed=1)


def test_a_skipped_owner_skips_its_own_rules() -> None:
    spec = make_spec(
        maps={
            "opt.map": _map(
                "k v\n", rule("r", "outputs['haproxy.cfg'].content == ''"), when="false"
            )
        }
    )
    diags, counters = run(spec)
    assert diags == []
    assert counters == RuleCounters(skipped=1)


CASCADE = {
    "root.map": _map("k v\n", rule("strict", "extraContext.ok == true", message="not ok")),
    "b.map": _map("k v\n", rule("sees-root", "outputs['root.map'].content == ''")),
}


def test_cascade_suppression_reports_the_root_cause_once() -> None:
    spec = make_spec(
        cfg_rules=[rule("sees-root", "outputs['root.map'].content == ''")],
        maps=CASCADE,
        extraContext={"ok": False},
    )
    diags, counters = run(spec)
    assert [(d.rule_id, d.message) for d in diags] == [
        ("E5003", "root.map rule strict: not ok"),
        (
            "I5011",
            "2 deferred rule(s) not evaluated because the rules of output root.map failed: "
            "b.map rule sees-root, haproxy.cfg rule sees-root",
        ),
    ]
    assert counters == RuleCounters(evaluated=1, failed=1, suppressed=2)
    # Fix the root cause and the dependants are judged on their own (and fail here).
    spec_ok = spec.model_copy(update={"extra_context": {"ok": True}})
    diags, counters = run(spec_ok)
    assert sorted(d.message.split(":")[0] for d in diags) == [
        "b.map rule sees-root",
        "haproxy.cfg rule sees-root",
    ]
    assert counters == RuleCounters(evaluated=3, failed=2)


def test_a_warning_does_not_suppress_errors_that_depend_on_it() -> None:
    maps = {
        "root.map": _map("k v\n", rule("strict", "extraContext.ok == true", severity="warning")),
        "b.map": CASCADE["b.map"],
    }
    diags, counters = run(make_spec(maps=maps, extraContext={"ok": False}))
    assert [d.rule_id for d in diags] == ["W5004", "E5003"]
    assert counters == RuleCounters(evaluated=2, failed=2)


CHAIN = ["z.map", "m.map", "a.map"]
"""Dependency order, root cause first: z.map is the root, m.map reads z.map, a.map reads m.map.
Deliberately the reverse of alphabetical order, so sorting by name or file cannot pass."""


def _chain(order: list[str]) -> dict[str, Any]:
    """Every rule fails as a warning (so nothing is suppressed and every failure shows)."""
    reads = {"z.map": None, "m.map": "z.map", "a.map": "m.map"}
    maps: dict[str, Any] = {}
    for name in order:
        other = reads[name]
        expr = f"outputs['{other}'].content == 'x'" if other else "extraContext.never == true"
        maps[name] = _map("k v\n", rule("r", expr, severity="warning"))
    return maps


def test_order_is_root_causes_first_and_stable_over_20_runs() -> None:
    expected: list[str] | None = None
    for i in range(20):
        order = CHAIN if i % 2 == 0 else sorted(CHAIN)  # spec order must not matter
        diags, counters = run(make_spec(maps=_chain(order), extraContext={"never": False}))
        got = [d.model_dump_json() for d in diags]
        if expected is None:
            expected = got
            assert [d.message.split(" rule")[0] for d in diags] == CHAIN
        assert got == expected
        assert counters == RuleCounters(evaluated=3, failed=3)


def test_the_final_report_keeps_root_causes_first() -> None:
    """finalize sorts by severity and file; the rules findings must still read cause first."""
    spec = make_spec(maps=_chain(sorted(CHAIN)), extraContext={"never": False})
    diags, _ = run(spec)
    done = finalize([*reversed(diags), make("I0003", Phase.SCHEMA, "x")], ValidationOptions())
    rules = [d for d in done.diagnostics if d.phase is Phase.RULES]
    assert [d.message.split(" rule")[0] for d in rules] == ["a.map", "m.map", "z.map"]
    done = finalize(diags, ValidationOptions())
    assert [d.message.split(" rule")[0] for d in done.diagnostics] == CHAIN
    assert [d.severity for d in done.diagnostics] == [Severity.WARNING] * 3


def test_collection_rules_run_per_object_with_object_references() -> None:
    spec = make_spec(
        watched={
            "ingresses": {
                **INGRESSES,
                "validate": {
                    "rules": [
                        rule(
                            "host-in-config",
                            "self.spec.rules.all(r, outputs['haproxy.cfg'].content.contains(r.host))",
                        )
                    ]
                },
            }
        },
        cfg=MINIMAL_CFG
        + "# {% for i in resources.ingresses.list() %}{{ i.spec.rules[0].host }} {% endfor %}\n",
    )
    diags, counters = run(
        spec, {"ingresses": [ingress("in", "a.local"), ingress("out", "b.local")]}
    )
    assert counters == RuleCounters(evaluated=1)
    # b.local is in the comment too, so both pass; now drop it from the config
    spec2 = spec.model_copy(
        update={
            "haproxy_config": spec.haproxy_config.model_copy(
                update={"template": MINIMAL_CFG + "# a.local\n"}
            )
        }
    )
    diags, counters = run(
        spec2, {"ingresses": [ingress("in", "a.local"), ingress("out", "b.local")]}
    )
    [d] = diags
    assert d.rule_id == "E5003"
    assert d.message.startswith("ingresses rule host-in-config on default/out:")
    assert d.object is not None and d.object.name == "out"
    assert counters == RuleCounters(evaluated=1, failed=1)
