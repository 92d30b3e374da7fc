"""The documentation site (mkdocs.yml over docs/) builds with --strict, offline.

Strict mode turns every warning into a failure: a link to a page or an anchor that does not
exist, a page left out of the navigation. Then the built site is checked against the sources
it documents: every rule id of the registry has its anchor on the diagnostics page, and the
``documentationUrl`` a report carries, pointed at the published page, lands on it; the CLI
reference names every command.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from controller.cli import main
from controller.diagnostics.rules import DOCS_URL_ENV, RULES, configure_docs_url, documentation_url
from tests.packaging.manifests import REPO


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(out)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def ids_in(page: Path) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', page.read_text()))


def test_every_rule_id_has_its_anchor_and_documentation_urls_land_on_it(site: Path) -> None:
    anchors = ids_in(site / "diagnostics" / "index.html")
    rule_ids = sorted(RULES)
    assert len(rule_ids) > 50
    missing = [r for r in rule_ids if r.lower() not in anchors]
    assert missing == []
    before = documentation_url(rule_ids[0])
    try:
        page = configure_docs_url("https://docs.example.test/{version}/diagnostics/")
        url = documentation_url(rule_ids[0])
        assert url.startswith(page) and url.split("#", 1)[1] in anchors
    finally:
        configure_docs_url(os.environ.get(DOCS_URL_ENV))
    assert documentation_url(rule_ids[0]) == before


def test_the_cli_reference_names_every_command(site: Path) -> None:
    text = html.unescape((site / "cli" / "index.html").read_text())
    for name in main.list_commands(None):  # type: ignore[arg-type]
        assert f"htc {name}" in text, name


def test_links_out_of_docs_become_repository_paths(site: Path) -> None:
    text = (site / "topologies" / "index.html").read_text()
    assert "hack/dataplaneapi/haproxy-reload.sh" in text
    assert 'href="../../hack/' not in text and 'href="../hack/' not in text


FIRST = REPO / "docs" / "first-template.md"
MARKER = "<!-- tested: tests/packaging/test_docs_site.py runs `htc test` on the block below -->"


def fenced(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_the_first_template_walkthrough_passes_its_own_tests(tmp_path: Path) -> None:
    text = FIRST.read_text()
    _, whole = fenced(text.split(MARKER, 1)[1])[0]
    config = tmp_path / "first.yaml"
    config.write_text(whole)
    result = CliRunner().invoke(main, ["test", str(config)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "2 tests: 2 passed, 0 failed" in result.output
    # Every step shows lines of the whole config, not a variant of it.
    lines = {line.strip() for line in whole.splitlines()}
    for language, body in fenced(text.split(MARKER, 1)[0]):
        if language in ("jinja", "yaml"):
            missing = [ln for ln in body.splitlines() if ln.strip() and ln.strip() not in lines]
            assert missing == [], missing
