"""``htc lint``: everything that can be found wrong in a config without any resources.

:func:`lint_spec` builds the renderer and the rule set exactly as a run would (so lint and
reconcile can never disagree about a template or a rule) and adds the static checks of
``templates.py`` and ``embedded.py``. The reconcile loop calls it on every new
HAProxyTemplateConfig and refuses one with errors (the admission webhook, a later issue, is
meant to do the same); :func:`lint_report` turns the findings into
the same :class:`ValidationReport` that ``htc validate`` prints, in any of its formats.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from controller.diagnostics import Diagnostic, Location, Phase, Severity, make
from controller.render import Renderer
from controller.spec import HAProxyTemplateConfigSpec, ValidateBlock
from controller.validation.finalize import finalize
from controller.validation.lint.embedded import assertion_problems, lint_tests
from controller.validation.lint.locations import in_config
from controller.validation.lint.templates import (
    constant_whens,
    denied_literals,
    dynamic_references,
    undefined_names,
    unused_snippets,
)
from controller.validation.options import ValidationOptions
from controller.validation.report import Counts, ReportMetadata, ReportStatus, ValidationReport
from controller.validation.rules import CompiledRule, Locator, RuleSet
from controller.validation.rules.compiled import PathKey
from controller.validation.rules.refs import ANY, EXTRA

__all__ = [
    "LintResult",
    "assertion_problems",
    "lint_report",
    "lint_spec",
    "spec_failure_report",
    "spec_locator",
]


@dataclass(frozen=True)
class LintResult:
    diagnostics: tuple[Diagnostic, ...]
    renderer: Renderer
    ruleset: RuleSet
    lint_ms: float = 0.0

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity.rank <= Severity.ERROR.rank]


def spec_locator(file: str, lines: Mapping[PathKey, int]) -> Locator:
    """Locations in a YAML file from :func:`controller.spec.loader.read_documents`' line
    index; a path that is not in the file (a default) gets its parent's line."""

    def locate(path: PathKey) -> Location | None:
        p = tuple(path)
        while p and p not in lines:
            p = p[:-1]
        line = lines.get(p)
        return Location(file=file, line=line) if line else Location(file=file)

    return locate


def _reads(rule: CompiledRule) -> str:
    parts = [f"outputs[{n!r}]" if n != ANY else "outputs[…]" for n in sorted(rule.refs.outputs)]
    parts += [
        f"resources.{n}" if n != ANY else "resources[…]" for n in sorted(rule.refs.collections)
    ]
    if EXTRA in rule.refs.variables:
        parts.append("extraContext")
    return ", ".join(parts)


def _deferred_advice(ruleset: RuleSet, locate: Locator | None) -> list[Diagnostic]:
    by_owner: dict[str, list[CompiledRule]] = {}
    for r in ruleset.deferred:
        by_owner.setdefault(r.owner.key, []).append(r)
    out: list[Diagnostic] = []
    for _, rules in sorted(by_owner.items()):
        owner = rules[0].owner
        listed = "; ".join(f"{r.name} reads {_reads(r)}" for r in rules)
        out.append(
            make(
                "I8052",
                Phase.LINT,
                f"deferred-validation-not-fail-fast: {owner.label} has {len(rules)} deferred "
                f"rule(s) ({listed}); they run after every output rendered and haproxy -c "
                "passed, so they do not fail fast",
                location=locate((*owner.spec_path, "validate")) if locate else None,
            )
        )
    return out


def lint_spec(
    spec: HAProxyTemplateConfigSpec,
    *,
    locate: Locator | None = None,
    source: str | None = None,
) -> LintResult:
    """All static findings for ``spec``. Never raises.

    With ``locate`` (and the config file's text as ``source``), findings about templates
    point at the config file's lines (see ``locations.py``)."""
    started = time.perf_counter()
    renderer = Renderer(spec)
    ruleset = RuleSet.from_spec(spec, locate)
    found: list[Diagnostic] = [
        *renderer.diagnostics,
        *dynamic_references(renderer),
        *unused_snippets(renderer),
        *undefined_names(renderer),
        *denied_literals(renderer, spec.validation.policy.allow_directives),
        *constant_whens(renderer),
        *ruleset.diagnostics,
        *_constant_cel_whens(spec, ruleset, locate),
        *_deferred_advice(ruleset, locate),
        *lint_tests(spec.tests, spec.watched_resources, renderer.outputs, locate),
    ]
    if locate is not None:
        lines = source.split("\n") if source is not None else None
        found = in_config(found, renderer, locate, lines)
    return LintResult(tuple(found), renderer, ruleset, (time.perf_counter() - started) * 1000)


def _constant_cel_whens(
    spec: HAProxyTemplateConfigSpec, ruleset: RuleSet, locate: Locator | None
) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    owners = [*ruleset.outputs.values(), *ruleset.collections.values()]
    for owner in owners:
        block = _block(spec, owner.spec_path)
        if block is None:
            continue
        conditions: list[tuple[PathKey, str | None]] = [
            ((*owner.spec_path, "validate", "when"), block.when)
        ]
        conditions += [
            ((*owner.spec_path, "validate", "rules", i, "when"), r.when)
            for i, r in enumerate(block.rules)
        ]
        for path, when in conditions:
            if when is not None and when.strip() in ("true", "false"):
                out.append(
                    make(
                        "W8054",
                        Phase.LINT,
                        f"{owner.label}: `when: {when.strip()}` never decides anything",
                        location=locate(path) if locate else None,
                    )
                )
    return out


def _block(spec: HAProxyTemplateConfigSpec, path: PathKey) -> ValidateBlock | None:
    if path == ("spec", "haproxyConfig"):
        block = spec.haproxy_config.validate_
    elif path[1] == "watchedResources":
        block = spec.watched_resources[str(path[2])].validate_
    else:
        block = getattr(spec, str(path[1]))[str(path[2])].validate_
    return block if isinstance(block, ValidateBlock) else None


def lint_report(result: LintResult, options: ValidationOptions | None = None) -> ValidationReport:
    """The findings as a report: ``valid`` when nothing at error severity remains."""
    opts = options or ValidationOptions()
    done = finalize(result.diagnostics, opts)
    counts = Counts.of(done.diagnostics)
    bad = counts.fatal + counts.error
    return ValidationReport(
        valid=not bad,
        status=ReportStatus.ERROR if bad else ReportStatus.OK,
        diagnostics=done.diagnostics,
        metadata=ReportMetadata(counts=counts, suppressed=done.suppressed),
        timings={"lintMs": round(result.lint_ms, 3), "totalMs": round(result.lint_ms, 3)},
    )


def spec_failure_report(diagnostics: list[Diagnostic]) -> ValidationReport:
    """A lint report for a config that did not even load (E8001/E8004)."""
    done = finalize(diagnostics, ValidationOptions())
    return ValidationReport(
        valid=False,
        status=ReportStatus.ERROR,
        diagnostics=done.diagnostics,
        metadata=ReportMetadata(counts=Counts.of(done.diagnostics), suppressed=done.suppressed),
    )
