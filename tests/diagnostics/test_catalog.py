"""docs/diagnostics.md is generated from the registry, and ids keep the meaning they were given.

The page is what every ``documentationUrl`` points at, so it must exist, list every id and say
what the registry says. The snapshot (``rule_titles.tsv``) freezes id → title: an id that is
renumbered, removed or repurposed breaks filters, dashboards and SARIF baselines that name
it, so changing one must be a deliberate edit of the snapshot, not a side effect.
"""

from __future__ import annotations

import re
from pathlib import Path

from controller.diagnostics import RULES
from controller.diagnostics.catalog import anchor, rules_markdown
from controller.diagnostics.rules import DOCS_PAGE

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / DOCS_PAGE
SNAPSHOT = Path(__file__).with_name("rule_titles.tsv")


def test_committed_page_is_current() -> None:
    assert PAGE.read_text(encoding="utf-8") == rules_markdown(), (
        f"{DOCS_PAGE} is stale: run `python -m controller.diagnostics docs > {DOCS_PAGE}`"
    )


def test_every_documentation_url_lands_on_a_heading_of_the_page() -> None:
    headings = set(re.findall(r"^### (\S+)$", PAGE.read_text(encoding="utf-8"), re.M))
    assert {anchor(h) for h in headings} == {anchor(rid) for rid in RULES}
    for rid, r in RULES.items():
        page, _, fragment = r.documentation_url.partition("#")
        assert page == DOCS_PAGE and fragment == anchor(rid)
        assert "://" not in r.documentation_url  # no site that does not exist


def test_page_carries_the_registry_text() -> None:
    text = rules_markdown()
    for r in RULES.values():
        section = text.split(f"\n### {r.id}\n", 1)[1].split("\n### ", 1)[0]
        assert r.title in section and r.description in section and r.fix in section


def _snapshot() -> dict[str, str]:
    pairs = (line.split("\t", 1) for line in SNAPSHOT.read_text(encoding="utf-8").splitlines())
    return {rid: title for rid, title in pairs}


def test_ids_keep_their_titles() -> None:
    frozen = _snapshot()
    changed = {
        rid: (title, RULES[rid].title if rid in RULES else None)
        for rid, title in frozen.items()
        if rid not in RULES or RULES[rid].title != title
    }
    assert not changed, (
        f"rule ids lost or renamed (snapshot title, registry title): {changed}. Ids are API: "
        "register a new id instead, or edit tests/diagnostics/rule_titles.tsv on purpose."
    )


def test_new_ids_are_added_to_the_snapshot() -> None:
    missing = sorted(set(RULES) - set(_snapshot()))
    assert not missing, (
        f"ids not in tests/diagnostics/rule_titles.tsv: {missing}; append their lines from "
        "`python -m controller.diagnostics titles` (never regenerate the whole file blindly)"
    )
