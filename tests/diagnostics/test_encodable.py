"""Findings always serialize, whatever bytes the configuration held.

Configurations are decoded with ``surrogateescape``, so a byte that is not UTF-8 reaches
messages and locations as a lone surrogate, which UTF-8 cannot encode.
"""

from __future__ import annotations

import json

from controller.diagnostics import Location, Phase, TemplateLocation, make
from controller.diagnostics.model import encodable


def test_stray_bytes_become_hex_escapes_everywhere() -> None:
    raw = b"caf\xe9 \xff"
    text = raw.decode("utf-8", "surrogateescape")
    d = make(
        "E3006",
        Phase.SCHEMA,
        f"unknown keyword {text!s}",
        location=Location(file=f"maps/{text}"),
        template_location=TemplateLocation(template=text, line=1),
        suggested_fix=text,
    )
    doc = json.loads(d.model_dump_json())
    assert doc["message"] == "unknown keyword caf\\xe9 \\xff"
    assert doc["location"]["file"] == "maps/caf\\xe9 \\xff"
    assert doc["template_location"]["template"] == "caf\\xe9 \\xff"
    assert doc["suggested_fix"] == "caf\\xe9 \\xff"


def test_valid_text_is_kept_as_it_is() -> None:
    for text in ("plain", "grüße", "日本", "tab\there"):
        assert encodable(text) is text
    assert encodable("a\ud800b") == "a\\ud800b"  # a surrogate that is no escaped byte
