"""The rule registry is the only source of ids: every id the code names must be registered."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pytest

from controller import __version__
from controller.diagnostics import (
    RULES,
    Phase,
    RuleId,
    Severity,
    UnknownRuleError,
    configure_docs_url,
    make,
)
from controller.diagnostics.catalog import IDS_MODULE, rule_id_module
from controller.diagnostics.rules import DOCS_URL_ENV

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
        make("E9999", Phase.RENDER, "nope")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["X1000", "", "1000"])
def test_severity_prefix_is_enforced(bad: str) -> None:
    with pytest.raises(ValueError):
        Severity.from_prefix(bad)


# -- rule ids as a type ----------------------------------------------------------------------


def test_the_rule_id_type_is_generated_from_the_registry() -> None:
    committed = (SRC.parent / IDS_MODULE).read_text(encoding="utf-8")
    assert committed == rule_id_module(), (
        f"{IDS_MODULE} is stale: run `python -m controller.diagnostics ids > {IDS_MODULE}`"
    )
    assert set(get_args(RuleId)) == set(RULES)


def test_a_misspelt_rule_id_is_a_type_error() -> None:
    code = (
        "from controller.diagnostics import Phase, make\n"
        "make('E1001', Phase.RENDER, 'fine')\n"
        "make('E1O01', Phase.RENDER, 'typo')\n"
    )
    # In a process of its own: mypy raises the interpreter's recursion limit for good.
    args = ["--config-file=/dev/null", "--cache-dir=/dev/null", "--follow-imports=silent"]
    run = subprocess.run(
        [sys.executable, "-m", "mypy", *args, "-c", code], capture_output=True, text=True
    )
    out, status = run.stdout, run.returncode
    assert status == 1, out + run.stderr
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "<string>:3:" in errors[0] and '"make"' in errors[0], out


# -- documentation links ---------------------------------------------------------------------


@pytest.fixture
def docs_site() -> Iterator[str]:
    yield configure_docs_url("https://docs.example.test/htc/v{version}/diagnostics/")
    configure_docs_url(None)


def test_a_configured_documentation_url_is_absolute_and_versioned(docs_site: str) -> None:
    assert docs_site == f"https://docs.example.test/htc/v{__version__}/diagnostics/"
    d = make("E1001", Phase.RENDER, "boom")
    assert d.documentation_url == f"{docs_site}#e1001"
    assert RULES["W3003"].documentation_url == f"{docs_site}#w3003"


def test_without_a_site_the_link_is_the_repository_page() -> None:
    assert configure_docs_url(None) == "docs/diagnostics.md"
    assert make("E1001", Phase.RENDER, "boom").documentation_url == "docs/diagnostics.md#e1001"


@pytest.mark.parametrize(
    "bad", ["docs/diagnostics.md", "ftp://docs.example.test/", "https:///x", "https://a.test/#x"]
)
def test_a_documentation_url_must_be_absolute_http(bad: str) -> None:
    with pytest.raises(ValueError, match=DOCS_URL_ENV):
        configure_docs_url(bad)
    assert make("E1001", Phase.RENDER, "x").documentation_url == "docs/diagnostics.md#e1001"


def test_the_environment_names_the_site() -> None:
    code = "from controller.diagnostics import RULES; print(RULES['E1001'].documentation_url)"
    env = {**os.environ, DOCS_URL_ENV: "https://docs.example.test/v{version}/d.html"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out == f"https://docs.example.test/v{__version__}/d.html#e1001\n"


def test_no_message_ends_on_a_dangling_colon() -> None:
    from controller.diagnostics import Phase, make

    reason = str(TimeoutError())  # "" — the classic way a reason goes missing
    d = make("E7002", Phase.DEPLOY, f"could not reach the master socket: {reason}")
    assert d.message == "could not reach the master socket"
    assert make("E7002", Phase.DEPLOY, "ipv6 [::").message == "ipv6 [::"
