"""``docs/diagnostics.md``, generated from the rule registry.

Every report links each finding to its entry there (``documentationUrl``), so the page must
list exactly the registered ids with the registry's own words. Writing it by hand would let
the two drift apart; a test compares the committed page with :func:`rules_markdown`.
Regenerate with ``python -m controller.diagnostics docs > docs/diagnostics.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.diagnostics.rules import DOCS_PAGE, DOCS_URL_ENV, RULES, Rule

__all__ = ["AREAS", "anchor", "rule_id_module", "rules_markdown", "titles"]

AREAS: Mapping[str, str] = {
    "0": "Internal and pipeline",
    "1": "Render",
    "2": "Syntax and directive policy",
    "3": "Schema",
    "4": "haproxy -c",
    "5": "CEL rules",
    "6": "External validators",
    "7": "Deploy and runtime",
    "8": "Spec, lint and input files",
}


def anchor(rule_id: str) -> str:
    """The fragment a heading ``### E1001`` gets on the usual Markdown renderers."""
    return rule_id.lower()


def _ordered(rules: Iterable[Rule]) -> list[Rule]:
    # By number, then severity letter: an area reads in the order its ids were handed out.
    return sorted(rules, key=lambda r: (r.id[1:], "FEWI".index(r.id[0])))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def rules_markdown(rules: Mapping[str, Rule] = RULES) -> str:
    ordered = _ordered(rules.values())
    out = [
        "# Diagnostics",
        "",
        "<!-- Generated from controller/diagnostics/rules.py by "
        "`python -m controller.diagnostics docs`; do not edit by hand. -->",
        "",
        "Every finding in a validation report carries a rule id. The id is stable: it is never "
        "reused for another meaning, so filters (`filters.exclude: [W3003]`), dashboards and "
        "SARIF viewers may rely on it. Its first letter is the severity the rule is declared "
        "with — **F** fatal, **E** error, **W** warning, **I** info (strict mode reports a "
        "warning as an error but keeps its `W` id) — and its first digit the area that reports "
        "it. A finding's `documentationUrl` points at the entry below: "
        f"`{DOCS_PAGE}#<id in lower case>`, relative to the repository root, or, where the "
        f"controller runs with `{DOCS_URL_ENV}` set to the absolute URL of this page as "
        "published (`{version}` standing for the controller's version), that URL and the "
        "same anchor, so that a link in a Kubernetes Event or a CI log leads somewhere.",
        "",
        "| id | severity | title |",
        "|---|---|---|",
    ]
    out += [
        f"| [{r.id}](#{anchor(r.id)}) | {r.severity.value} | {_cell(r.title)} |" for r in ordered
    ]
    area = None
    for r in ordered:
        if r.id[1] != area:
            area = r.id[1]
            out += ["", f"## {area}xxx — {AREAS.get(area, 'Other')}"]
        out += [
            "",
            f"### {r.id}",
            "",
            f"**{r.title}** ({r.severity.value})",
            "",
            r.description,
            "",
            f"Fix: {r.fix}",
        ]
    return "\n".join(out) + "\n"


def titles(rules: Mapping[str, Rule] = RULES) -> str:
    """``ID<TAB>title`` per line: the snapshot ``tests/diagnostics`` freezes."""
    return "".join(f"{r.id}\t{r.title}\n" for r in _ordered(rules.values()))


IDS_MODULE = "controller/diagnostics/ids.py"


def rule_id_module(rules: Mapping[str, Rule] = RULES) -> str:
    """The source of :data:`controller.diagnostics.ids.RuleId`: every registered id as a
    ``Literal``, so that a typo in ``make("E1O01", ...)`` is a type error (pydantic's habit
    with its error codes). ``tests/diagnostics`` compares the committed module with this."""
    out = [
        '"""Every registered rule id, as a type.',
        "",
        "Generated from controller/diagnostics/rules.py by",
        f"``python -m controller.diagnostics ids > {IDS_MODULE}``; do not edit by hand.",
        '"""',
        "",
        "from typing import Literal",
        "",
        '__all__ = ["RuleId"]',
        "",
        "RuleId = Literal[",
        *(f'    "{r.id}",' for r in _ordered(rules.values())),
        "]",
    ]
    return "\n".join(out) + "\n"
