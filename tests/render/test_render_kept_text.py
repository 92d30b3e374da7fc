"""A kept output's text: held once, as bytes, unless another output reads it or it is not
ASCII (see ``_Kept.output`` in :mod:`controller.render.renderer`)."""

from __future__ import annotations

from typing import Any

from controller.render import Renderer
from controller.render.context import RenderedOutput
from tests.render.render_kit import snapshot, spec


def _spec() -> Any:
    return spec(
        "global\n{{ outputs['read.map'] }}",
        maps={
            "plain.map": "{% for i in range(3) %}host{{ i }} b{{ i }}\n{% endfor %}",
            "read.map": "x y\n",
            "wide.map": "h\u00e9 b\n",
        },
    )


def test_a_kept_output_nobody_reads_is_held_as_bytes_and_renders_the_same() -> None:
    s = _spec()
    snap = snapshot(s)
    renderer = Renderer(s)
    seen: list[dict[str, RenderedOutput]] = []

    def hook(name: str, out: RenderedOutput) -> list[Any]:
        seen[-1][name] = out
        return []

    results = []
    for _ in range(3):
        seen.append({})
        results.append(renderer.render(snap, after_output=hook))
    first, *later = results
    assert first.ok
    memo = renderer._memo
    assert memo["plain.map"].output is None  # ASCII, read by no other output
    assert memo["read.map"].output is not None  # haproxy.cfg reads it
    assert memo["wide.map"].output is not None  # not ASCII
    for r in later:
        assert [(e.path, e.content) for e in r.files] == [(e.path, e.content) for e in first.files]
    for name, out in seen[0].items():
        for again in seen[1:]:
            assert again[name] == out  # name, kind, path and text
            assert type(again[name].content) is str
    # a text another output reads stays the very same string: its reader compares it by
    # identity first, and keeps it in its record of what it read anyway
    assert seen[1]["read.map"].content is seen[0]["read.map"].content
    assert seen[2]["read.map"].content is seen[0]["read.map"].content
    assert seen[1]["plain.map"].content == "host0 b0\nhost1 b1\nhost2 b2\n"
