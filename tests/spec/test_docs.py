"""docs/api.md is generated from the models and must be current."""

from __future__ import annotations

import re
from pathlib import Path

from controller.spec import HAProxyTemplateConfig
from controller.spec.docs import DOC_PATH, _reachable, generate_api_docs

REPO = Path(__file__).resolve().parents[2]


def test_committed_api_reference_is_current() -> None:
    path = REPO / DOC_PATH
    assert path.exists(), f"{DOC_PATH} is missing: run `htc crd --write`"
    assert path.read_text(encoding="utf-8") == generate_api_docs(), (
        f"{DOC_PATH} differs from the models: run `htc crd --write`"
    )


def test_every_model_and_field_appears_once() -> None:
    text = generate_api_docs()
    for model in _reachable(HAProxyTemplateConfig):
        assert text.count(f"\n## {model.__name__}\n") == 1, model.__name__
        section = text.split(f"\n## {model.__name__}\n", 1)[1].split("\n## ", 1)[0]
        for name, field in model.model_fields.items():
            assert f"| `{field.alias or name}` |" in section, f"{model.__name__}.{name}"


def test_reference_shows_types_defaults_and_rules() -> None:
    text = generate_api_docs()
    assert '| `debounce` | duration | `"200ms"` |' in text
    assert "| `watchedResources` | map[string][WatchedResource](#watchedresource) |" in text
    assert "| `haproxyConfig` | [Output](#output) | **required** |" in text
    assert "| `extraContext` | object (free-form) |" in text
    assert "- Rule: type command needs a non-empty command." in text
    assert "At most 16 items; unique by name." in text
    # table cells never break a row
    for line in text.splitlines():
        if line.startswith("| `"):
            assert len(re.split(r"(?<!\\)\|", line)) == 6, line
