"""What an unchanged output or a known object costs the rules (issue 14, items 3 and 5).

* Deferred rules remember each judgement by content: a run whose objects and outputs were
  all judged before judges nothing (and so needs no worker); one new object is judged alone;
  an output rule's judgement is remembered by the content of what it reads.
* Inline output rules remember their verdict by the output's name, path and content: an
  unchanged output is not judged again; a changed one is; an error is never remembered.
"""

from __future__ import annotations

import asyncio
from typing import Any

from controller.diagnostics import Severity
from controller.render import Renderer, RenderResult
from controller.validation import StageContext
from controller.validation.rules import RuledRenderer, RuleSet, RulesStage
from tests.rules.rules_helpers import INGRESSES, MINIMAL_CFG, filled_store, make_spec, rule
from tests.rules.test_deferred_memo import CLASSES

OURS = "self.spec.?ingressClassName.orValue('') == extraContext.?cls.orValue('ours')"
WATCHED: dict[str, dict[str, Any]] = {
    "ingresses": {
        **INGRESSES,
        "validate": {
            "rules": [
                # reads extraContext and another collection: deferred, judged per object
                rule(
                    "known-class",
                    "resources.ingressclasses.exists(c, c.metadata.name == "
                    "self.spec.ingressClassName)",
                    when=OURS,
                    messageExpression="'no class ' + self.spec.ingressClassName",
                ),
            ]
        },
    },
    "ingressclasses": CLASSES,
}
# haproxy.cfg lists the Ingresses of our class only; its deferred rule reads the map
CFG = MINIMAL_CFG + (
    "{% for i in resources.ingresses.list() %}"
    "{% if i.spec.ingressClassName == 'ours' %}# {{ i.metadata.name }}\n{% endif %}"
    "{% endfor %}"
)
MAPS = {"hosts.map": {"template": "{{ extraContext.get('host', 'a.test') }} be\n"}}
CFG_RULES = [
    rule("map-names-backend", "outputs['hosts.map'].content.contains(' be')"),
    # inline (reads self only): one warning, then an error when the marker is there
    rule("few-lines", "size(self.lines) < 25", severity="warning"),
    rule("no-marker", "!self.content.contains('# forbidden')"),
]


def _ingress(name: str, cls: str) -> dict[str, Any]:
    return {
        **INGRESSES,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ingressClassName": cls},
    }


def _spec(watched: dict[str, dict[str, Any]] | None = None) -> Any:
    return make_spec(cfg=CFG, cfg_rules=CFG_RULES, maps=MAPS, watched=watched or WATCHED)


def _fixtures() -> dict[str, list[dict[str, Any]]]:
    return {
        "ingresses": [_ingress(f"i{k}", "ours" if k % 2 else "theirs") for k in range(6)],
        "ingressclasses": [{**CLASSES, "metadata": {"name": "ours"}}],
    }


def _run(stage: RulesStage, render: RenderResult) -> tuple[list[str], Any]:
    outcome = asyncio.run(stage.run(StageContext(render=render)))
    return sorted(d.model_dump_json() for d in outcome.diagnostics), outcome.rules


def test_known_objects_and_outputs_are_not_judged_again() -> None:
    spec = _spec()
    rs = RuleSet.from_spec(spec)
    stage = RulesStage(rs)
    store = filled_store(spec, _fixtures())
    renderer = Renderer(spec)
    first = renderer.render(store.snapshot())
    assert _run(stage, first) == _run(RulesStage(rs), first)
    assert stage.evaluations_pending == 6 + 1  # every object, and the output rule

    again = renderer.render(store.snapshot())  # the same objects and bytes
    assert _run(stage, again) == _run(RulesStage(rs), again)
    assert stage.evaluations_pending == 0

    store.apply("ingresses", _ingress("new", "theirs"))  # ignored by the templates
    ignored = renderer.render(store.snapshot())
    assert ignored.files.checksum == first.files.checksum
    assert _run(stage, ignored) == _run(RulesStage(rs), ignored)
    assert stage.evaluations_pending == 1  # the new object alone

    store.apply("ingresses", _ingress("bad", "ours"))  # ours, and no class of that name...
    store.apply("ingressclasses", {**CLASSES, "metadata": {"name": "other"}})  # ...changes keys
    changed = renderer.render(store.snapshot())
    diags, counters = _run(stage, changed)
    assert (diags, counters) == _run(RulesStage(rs), changed)
    assert stage.evaluations_pending == 8 + 1  # the collection it reads changed: all again


def test_a_changed_output_is_judged_again() -> None:
    spec = _spec()
    rs = RuleSet.from_spec(spec)
    stage = RulesStage(rs)
    store = filled_store(spec, _fixtures())
    renderer = Renderer(spec)
    _run(stage, renderer.render(store.snapshot()))
    other = renderer.render(store.snapshot(), extra_context={"host": "b.test"})
    assert _run(stage, other) == _run(RulesStage(rs), other)
    # the map the output rule reads changed; so did extraContext, which the object rule reads
    assert stage.evaluations_pending == 6 + 1
    store.apply("ingresses", _ingress("seen", "ours"))  # haproxy.cfg changes, the map not
    seen = renderer.render(store.snapshot(), extra_context={"host": "b.test"})
    assert _run(stage, seen) == _run(RulesStage(rs), seen)
    assert stage.evaluations_pending == 1 + 1  # the new object, and the output rule


def _ruled(spec: Any) -> RuledRenderer:
    return RuledRenderer(Renderer(spec), RuleSet.from_spec(spec))


def test_an_unchanged_output_keeps_its_inline_verdict() -> None:
    spec = _spec()
    renderer = _ruled(spec)
    store = filled_store(spec, _fixtures())
    first = renderer.render(store.snapshot())
    assert renderer._outputs.hits == 0
    for k in range(30):  # past the warning's threshold of lines
        store.apply("ingresses", _ingress(f"x{k}", "ours"))
    warned = renderer.render(store.snapshot())
    assert [d.rule_id for d in warned.diagnostics] == ["W5004"]  # the inline warning
    hits = renderer._outputs.hits
    store.apply("ingresses", _ingress("ignored", "theirs"))
    again = renderer.render(store.snapshot())
    assert renderer._outputs.hits == hits + 1  # haproxy.cfg, unchanged: not judged again
    assert again.diagnostics == warned.diagnostics  # the warning travels with it
    assert again.inline_rules is not None and warned.inline_rules is not None
    assert again.inline_rules.evaluated == warned.inline_rules.evaluated
    assert first.files.checksum != warned.files.checksum


def test_an_inline_error_is_never_remembered() -> None:
    spec = _spec()
    renderer = _ruled(spec)
    store = filled_store(spec, {"ingresses": [_ingress("forbidden", "ours")]})
    for _ in range(3):
        result = renderer.render(store.snapshot())
        errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
        assert [d.rule_id for d in errors] == ["E5003"]  # the inline error
    assert renderer._outputs.hits == 0
