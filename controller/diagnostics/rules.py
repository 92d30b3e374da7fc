"""The rule registry: the only source of rule ids, titles, descriptions and fix hints.

Ids are stable API (reports, filters, dashboards and SARIF results refer to them), so an id is
never reused for a different meaning. The first letter is the severity (F fatal, E error,
W warning, I info); the digits group by area:

    0xxx  internal / pipeline          1xxx  render
    2xxx  syntax + directive policy    3xxx  schema
    4xxx  haproxy -c                   5xxx  CEL rules
    6xxx  external validators          7xxx  deploy / runtime
    8xxx  spec, lint, input files

Each area keeps its entries in its own block below. ``tests/diagnostics`` fails if any code
emits an id that is not registered here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.diagnostics.model import Diagnostic, Phase, Severity

DOCS_BASE = "https://haproxy-template.dev/docs/rules/"


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    title: str
    description: str
    fix: str

    @property
    def severity(self) -> Severity:
        return Severity.from_prefix(self.id)

    @property
    def documentation_url(self) -> str:
        return f"{DOCS_BASE}{self.id}"


class UnknownRuleError(KeyError):
    """Raised when code emits an id that the registry does not know (a programming error)."""


def _rules(*entries: tuple[str, str, str, str]) -> dict[str, Rule]:
    out: dict[str, Rule] = {}
    for rid, title, description, fix in entries:
        if rid in out:
            raise ValueError(f"duplicate rule id {rid}")
        Severity.from_prefix(rid)
        out[rid] = Rule(rid, title, description, fix)
    return out


# --- 0xxx internal / pipeline ---------------------------------------------------------------
_INTERNAL = _rules(
    (
        "F0001",
        "Internal error",
        "An unexpected error inside the controller stopped the analysis.",
        "Report this as a bug with the report attached; the last good configuration keeps serving.",
    ),
    (
        "E0002",
        "Analysis incomplete",
        "A stage ran out of its time or cost budget, so the candidate could not be proven valid.",
        "Simplify the input or raise the budget; it is never a pass.",
    ),
    (
        "I0003",
        "Stage skipped",
        "A stage did not run because an earlier stage failed.",
        "Fix the earlier failure first.",
    ),
)

# --- 1xxx render -----------------------------------------------------------------------------
_RENDER = _rules(
    (
        "E1001",
        "Template syntax error",
        "A template could not be parsed by Jinja2.",
        "Fix the template syntax at the reported line.",
    ),
    (
        "E1002",
        "Undefined value",
        "A template used a variable or attribute that does not exist.",
        "Check the name, or guard it with `is defined` / `default(...)`.",
    ),
    (
        "E1003",
        "Sandbox violation",
        "A template tried an operation the sandbox forbids "
        "(private attributes, mutation, unsafe calls).",
        "Use the documented context and filters.",
    ),
    (
        "E1004",
        "Template raised an error",
        "A filter, test or expression raised an exception while rendering.",
        "Check the values passed to the filter at the reported line.",
    ),
    (
        "E1005",
        "Render cycle",
        "Outputs reference each other through `outputs[...]` so no render order exists.",
        "Break the cycle: one side must not read the other's output.",
    ),
    (
        "E1006",
        "Unknown output referenced",
        "A template references `outputs[...]` with a name that is not defined.",
        "Use the name of a defined output (e.g. `haproxy.cfg`, a map name).",
    ),
    (
        "E1007",
        "Missing snippet",
        "A template includes or imports a snippet that is not defined.",
        "Define the snippet under templateSnippets or fix its name.",
    ),
    (
        "E1008",
        "Output skipped by a dependency",
        "An output was not rendered because an output it depends on failed.",
        "Fix the root cause reported for the dependency.",
    ),
    (
        "E1009",
        "Invalid `when` expression",
        "An output's `when` condition could not be evaluated.",
        "Use a Jinja2 expression that evaluates to true or false.",
    ),
)

# --- 2xxx syntax + directive policy ----------------------------------------------------------
_SYNTAX: dict[str, Rule] = _rules()

# --- 3xxx schema -----------------------------------------------------------------------------
_SCHEMA: dict[str, Rule] = _rules()

# --- 4xxx haproxy -c -------------------------------------------------------------------------
_HAPROXY: dict[str, Rule] = _rules()

# --- 5xxx CEL rules --------------------------------------------------------------------------
_CEL: dict[str, Rule] = _rules()

# --- 6xxx external validators ----------------------------------------------------------------
_EXTERNAL: dict[str, Rule] = _rules()

# --- 7xxx deploy / runtime -------------------------------------------------------------------
_DEPLOY: dict[str, Rule] = _rules()

# --- 8xxx spec, lint, input files ------------------------------------------------------------
_SPEC: dict[str, Rule] = _rules(
    (
        "E8001",
        "Invalid HAProxyTemplateConfig",
        "The configuration resource does not match its schema.",
        "Fix the field named in the message; `kubectl explain haproxytemplateconfig` "
        "documents every field.",
    ),
    (
        "E8002",
        "Unreadable input file",
        "An input manifest could not be read or parsed as YAML.",
        "Fix the YAML at the reported line.",
    ),
    (
        "E8003",
        "Invalid resource manifest",
        "A manifest lacks apiVersion, kind or metadata.name.",
        "Every object needs apiVersion, kind and metadata.name.",
    ),
)


def _merge(*tables: dict[str, Rule]) -> dict[str, Rule]:
    merged: dict[str, Rule] = {}
    for table in tables:
        clash = merged.keys() & table.keys()
        if clash:
            raise ValueError(f"rule ids registered twice: {sorted(clash)}")
        merged.update(table)
    return merged


RULES: dict[str, Rule] = _merge(
    _INTERNAL, _RENDER, _SYNTAX, _SCHEMA, _HAPROXY, _CEL, _EXTERNAL, _DEPLOY, _SPEC
)


def rule(rule_id: str) -> Rule:
    try:
        return RULES[rule_id]
    except KeyError:
        raise UnknownRuleError(f"rule id {rule_id} is not registered") from None


def make(rule_id: str, phase: Phase, message: str, **fields: Any) -> Diagnostic:
    """Build a diagnostic for a registered rule; severity and links come from the registry.

    ``fields`` are the optional Diagnostic fields (location, template_location, object,
    suggested_fix). The rule's fix hint is used when no specific fix is given.
    """
    r = rule(rule_id)
    fields.setdefault("suggested_fix", r.fix)
    return Diagnostic(
        rule_id=r.id,
        severity=r.severity,
        phase=phase,
        message=message,
        documentation_url=r.documentation_url,
        **fields,
    )
