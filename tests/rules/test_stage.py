"""The ``rules`` stage inside the real pipeline (real ``haproxy -c``, both binaries)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.diagnostics import Phase
from controller.render import Renderer
from controller.spec.models import ExternalValidator, HAProxyTemplateConfigSpec
from controller.validation import Pipeline, ValidationReport
from controller.validation.report import ReportStatus, RuleCounters
from controller.validation.rules import RuledRenderer, RuleSet, rules_stage
from tests.rules.rules_helpers import INGRESSES, MINIMAL_CFG, filled_store, ingress, make_spec, rule


def validate(
    spec: HAProxyTemplateConfigSpec,
    binary: str,
    fixtures: dict[str, list[dict[str, Any]]] | None = None,
    pipeline: Pipeline | None = None,
) -> ValidationReport:
    p = pipeline or Pipeline.from_spec(spec, haproxy_binary=binary)
    render = RuledRenderer.from_spec(spec).render(filled_store(spec, fixtures).snapshot())
    return asyncio.run(p.validate(render))


def test_rules_run_between_haproxy_and_external(haproxy_bin: str) -> None:
    spec = make_spec(
        cfg_rules=[rule("r", "extraContext.x == 1")],
        extraContext={"x": 1},
        validation={
            "externalValidators": [ExternalValidator(name="t", type="command", command=["true"])]
        },
    )
    p = Pipeline.from_spec(spec, haproxy_binary=haproxy_bin)
    assert p.phases == (Phase.SYNTAX, Phase.SCHEMA, Phase.HAPROXY, Phase.RULES, Phase.EXTERNAL)


def test_no_rules_stage_without_deferred_rules(haproxy_bin: str) -> None:
    inline_only = make_spec(cfg_rules=[rule("r", "self.content != ''")])
    assert rules_stage(inline_only) is None
    p = Pipeline.from_spec(inline_only, haproxy_binary=haproxy_bin)
    assert Phase.RULES not in p.phases
    # a broken rule keeps the stage, so the compile error is reported by every run
    assert rules_stage(make_spec(cfg_rules=[rule("r", "self.(")])) is not None


def test_deferred_failure_fails_the_verdict_with_counters(haproxy_bin: str) -> None:
    spec = make_spec(
        cfg_rules=[rule("r", "extraContext.x == 1", message="x is not 1")], extraContext={"x": 2}
    )
    report = validate(spec, haproxy_bin)
    assert not report.valid and report.status is ReportStatus.ERROR
    assert report.metadata.stages_run[-1] is Phase.RULES
    assert [(d.rule_id, d.message) for d in report.errors] == [
        ("E5003", "haproxy.cfg rule r: x is not 1")
    ]
    assert report.metadata.rules == RuleCounters(evaluated=1, failed=1)
    good = validate(spec.model_copy(update={"extra_context": {"x": 1}}), haproxy_bin)
    assert good.valid and good.metadata.rules == RuleCounters(evaluated=1)


def test_a_cached_verdict_is_not_reused_when_read_resources_change(haproxy_bin: str) -> None:
    """The file set does not depend on the ingresses, but the rule does: the second run
    must judge again, not reuse the first verdict."""
    spec = make_spec(
        watched={"ingresses": INGRESSES},
        cfg_rules=[rule("one-ingress", "resources.ingresses.size() == 1")],
    )
    pipeline = Pipeline.from_spec(spec, haproxy_binary=haproxy_bin)
    first = validate(spec, haproxy_bin, {"ingresses": [ingress("a", "a.local")]}, pipeline)
    assert first.valid
    again = validate(spec, haproxy_bin, {"ingresses": [ingress("a", "a.local")]}, pipeline)
    assert again.valid and again.metadata.cache_hit
    second = validate(
        spec,
        haproxy_bin,
        {"ingresses": [ingress("a", "a.local"), ingress("b", "b.local")]},
        pipeline,
    )
    assert first.metadata.checksum == second.metadata.checksum
    assert not second.valid and not second.metadata.cache_hit
    assert "E5003" in second.rule_ids()


def test_a_skipped_output_fails_closed_through_the_pipeline(haproxy_bin: str) -> None:
    spec = make_spec(
        cfg_rules=[rule("sees-opt", "outputs['opt.map'].content != ''")],
        maps={"opt.map": {"template": "k v\n", "when": "extraContext.opt | default(false)"}},
    )
    report = validate(spec, haproxy_bin)
    assert not report.valid
    [d] = report.errors
    assert d.rule_id == "E5005"
    assert 'references output "opt.map" which did not produce a value' in d.message
    assert validate(spec.model_copy(update={"extra_context": {"opt": True}}), haproxy_bin).valid


@pytest.mark.parametrize("bad", [False, True])
def test_inline_object_rules_run_before_the_render_in_the_validate_path(
    haproxy_bin: str, bad: bool
) -> None:
    spec = make_spec(
        watched={
            "ingresses": {
                **INGRESSES,
                "validate": {
                    "rules": [rule("no-spaces", "self.spec.rules.all(r, !r.host.contains(' '))")]
                },
            }
        }
    )
    report = validate(spec, haproxy_bin, {"ingresses": [ingress("x", "a b" if bad else "ab")]})
    assert report.valid is not bad
    if bad:
        assert report.metadata.stages_run == []  # nothing rendered, nothing ran
        assert "E5003" in report.rule_ids()


def test_ruleset_is_shared_between_render_and_stage() -> None:
    spec = make_spec(cfg_rules=[rule("r", "extraContext.a == 1"), rule("i", "self.content != ''")])
    rs = RuleSet.from_spec(spec)
    assert [r.name for r in rs.deferred] == ["r"]
    assert [r.name for r in rs.inline] == ["i"]
    assert Renderer(spec).graph.cycles == ()


def test_a_collection_rule_reading_only_outputs_is_judged_for_every_new_object(
    haproxy_bin: str,
) -> None:
    """Its objects are inputs even though the expression reads nothing but ``outputs``: a
    violating new Ingress that leaves every rendered byte unchanged must not meet the cached
    "valid" of the candidate before it."""
    spec = make_spec(
        watched={
            "ingresses": {
                **INGRESSES,
                "validate": {
                    "rules": [
                        rule(
                            "host-in-config",
                            "self.spec.rules.all(r, "
                            "outputs['haproxy.cfg'].content.contains(r.host))",
                        )
                    ]
                },
            }
        },
        cfg=MINIMAL_CFG + "# a.local\n",
    )
    assert RuleSet.from_spec(spec).reads_inputs()
    pipeline = Pipeline.from_spec(spec, haproxy_binary=haproxy_bin)
    first = validate(spec, haproxy_bin, {"ingresses": [ingress("a", "a.local")]}, pipeline)
    assert first.valid
    second = validate(
        spec,
        haproxy_bin,
        {"ingresses": [ingress("a", "a.local"), ingress("b", "b.local")]},
        pipeline,
    )
    assert first.metadata.checksum == second.metadata.checksum  # same bytes ...
    assert not second.metadata.cache_hit  # ... but judged again
    assert not second.valid
    [d] = second.errors
    assert d.rule_id == "E5003" and d.object is not None and d.object.name == "b"
