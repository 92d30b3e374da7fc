"""The rule registry is the only source of ids: every id the code names must be registered."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller.diagnostics import RULES, Phase, Severity, UnknownRuleError, make

SRC = Path(__file__).resolve().parents[2] / "controller"
ID_LITERAL = re.compile(r"""["']([FEWI]\d{4})["']""")


def test_every_id_named_in_code_is_registered() -> None:
    named: dict[str, str] = {}
    for path in SRC.rglob("*.py"):
        for rid in ID_LITERAL.findall(path.read_text()):
            named.setdefault(rid, str(path.relative_to(SRC)))
    missing = {rid: where for rid, where in named.items() if rid not in RULES}
    assert not missing, f"unregistered rule ids: {missing}"
    assert len(named) >= 10


def test_registry_entries_are_complete() -> None:
    for rid, r in RULES.items():
        assert r.id == rid
        assert r.title and r.description and r.fix, rid
        assert r.severity is Severity.from_prefix(rid)


def test_make_takes_severity_and_docs_from_registry() -> None:
    d = make("E1001", Phase.RENDER, "boom")
    assert d.severity is Severity.ERROR
    assert d.documentation_url == "docs/diagnostics.md#e1001"
    assert d.suggested_fix == RULES["E1001"].fix


def test_unknown_id_is_refused() -> None:
    with pytest.raises(UnknownRuleError):
        make("E9999", Phase.RENDER, "nope")


@pytest.mark.parametrize("bad", ["X1000", "", "1000"])
def test_severity_prefix_is_enforced(bad: str) -> None:
    with pytest.raises(ValueError):
        Severity.from_prefix(bad)
