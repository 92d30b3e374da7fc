"""The output verdict memo keeps no past render's text alive (issue 20, memory).

It finds a kept output's digest by the text's identity, which needs a strong reference to
the text; one that only the memo still holds can never be handed in again.
"""

from __future__ import annotations

import gc

from controller.render import FileKind, RenderedOutput
from controller.validation.rules.inline import OutputMemo


def _out(content: str) -> RenderedOutput:
    return RenderedOutput("haproxy.cfg", FileKind.CONFIG, "haproxy.cfg", content)


def _text(i: int) -> str:
    return "".join(["global\n", f"    # render {i}\n", "x" * 4096])  # a fresh string object


def test_texts_held_only_by_the_memo_are_forgotten() -> None:
    memo = OutputMemo()
    live = _text(0)
    key_live = memo.key("haproxy.cfg", _out(live))
    for i in range(1, 6):
        memo.key("haproxy.cfg", _out(_text(i)))  # each text dropped by its caller at once
    gc.collect()
    held = [text for text, _ in memo._ids.values()]
    # The live text (held here) and the latest one (not checked yet) at most.
    assert any(t is live for t in held)
    assert len(held) <= 2
    # The live text is still found by its identity, with the same key.
    assert memo.key("haproxy.cfg", _out(live)) == key_live


def test_texts_held_elsewhere_are_kept() -> None:
    memo = OutputMemo()
    texts = [_text(i) for i in range(8)]
    for t in texts:
        memo.key("haproxy.cfg", _out(t))
    assert len(memo._ids) == 8
    ids = {id(t) for t, _ in memo._ids.values()}
    assert ids == {id(t) for t in texts}
