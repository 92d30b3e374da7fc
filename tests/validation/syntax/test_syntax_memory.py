"""What the syntax stage's module caches keep, at most (issue 20: memory at 10,000 backends).

The parse itself is held to the full, uncached parse by ``test_syntax_incremental``; these
tests pin the footprint: the piece cache keys by digest (no second copy of the text), an
entry seen at one line is the bare result, the intern tables stay bounded, and a word
repeated on its line (``server a:80 a:80``) is one string.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from controller.validation.syntax import parse
from controller.validation.syntax import parser as parser_module
from controller.validation.syntax import tokenizer as tokenizer_module


def _config(backends: int, tag: str = "") -> str:
    out = [
        "global",
        "    maxconn 100",
        "",
        "defaults",
        "    mode http",
        "    timeout connect 5s",
        "",
    ]
    for i in range(backends):
        out.append(f"backend be_{tag}{i}")
        out.append("    balance roundrobin")
        for s in range(3):
            addr = f"10.{i // 250}.{i % 250}.{s + 1}:80{tag}"
            out.append(f"    server {addr} {addr}")
        out.append("")
    return "\n".join(out) + "\n"


def _fresh() -> None:
    parser_module._CACHE.clear()


def test_cache_keys_are_section_digests_not_texts() -> None:
    _fresh()
    parsed, found = parse(_config(200), "haproxy.cfg")
    assert not found
    cache = parser_module._CACHE
    hashes = {s.text_hash: s for s in parsed.sections}
    assert len(cache.current) >= 200
    for (file, key), entry in cache.current.items():
        assert file == "haproxy.cfg"
        assert re.fullmatch(r"[0-9a-f]{64}", key)
        # Seen at one line: the result itself, not a dict of one.
        assert isinstance(entry, parser_module._ChunkResult)
        (section,) = entry.sections
        if key in hashes:
            assert section.text_hash is key  # the key is the section's own string
    _fresh()


def test_a_moved_piece_keeps_both_lines() -> None:
    _fresh()
    text = _config(50)
    parse(text, "haproxy.cfg")
    shifted = text.replace("defaults\n", "defaults\n    option httplog\n", 1)
    spliced = parse(shifted, "haproxy.cfg")
    # Every backend moved one line down; its first line is still known beside the new one.
    entries = [e for e in parser_module._CACHE.current.values() if isinstance(e, dict)]
    assert len(entries) >= 50
    assert all(len(e) == 2 and sorted(e)[1] - sorted(e)[0] == 1 for e in entries)
    _fresh()
    assert spliced == parse(shifted, "haproxy.cfg")  # the same as a cold reading
    _fresh()


SPARE = 16


@pytest.fixture
def small_spare() -> Iterator[parser_module._ChunkCache]:
    """The module's piece cache, emptied, pruned after :data:`SPARE` additions."""
    cache = parser_module._CACHE
    spare = cache.spare
    cache.spare = SPARE
    _fresh()
    try:
        yield cache
    finally:
        cache.spare = spare
        _fresh()


def _same_as_cold(text: str) -> None:
    last = parse(text, "haproxy.cfg")
    _fresh()
    assert last == parse(text, "haproxy.cfg")


def test_pieces_of_past_texts_are_pruned(small_spare: parser_module._ChunkCache) -> None:
    cache = small_spare
    lines = _config(50).split("\n")
    servers = [i for i, line in enumerate(lines) if line.startswith("    server ")]
    for k in range(120):  # each edit makes one new piece; the old one is a past text
        i = servers[(k * 7) % len(servers)]
        lines[i] += " check" if k % 2 else " backup"
        parse("\n".join(lines), "haproxy.cfg")
        pieces = {r.key for b in cache.bases["haproxy.cfg"] for r in b.results}
        assert len(cache.current) <= len(pieces) + SPARE + 1
    # Every piece of the kept bases is still cached.
    assert pieces <= {key for _, key in cache.current}
    _same_as_cold("\n".join(lines))


def test_moved_copies_are_kept_only_at_the_bases_lines(
    small_spare: parser_module._ChunkCache,
) -> None:
    cache = small_spare
    text = _config(60)
    for k in range(12):  # each change moves every backend down a line
        text = text.replace("defaults\n", f"defaults\n    # change {k}\n", 1)
        parse(text, "haproxy.cfg")
        at_base_lines = {(r.key, r.start) for b in cache.bases["haproxy.cfg"] for r in b.results}
        cached = [
            (key, start)
            for (_, key), entry in cache.current.items()
            for start in (entry if isinstance(entry, dict) else [entry.start])
        ]
        assert len(cached) <= len(at_base_lines) + SPARE + 1
    assert at_base_lines <= set(cached)
    _same_as_cold(text)


def test_repeated_word_on_a_line_is_one_string() -> None:
    _fresh()
    parsed, _ = parse(_config(20, tag="7"), "haproxy.cfg")
    servers = [d for s in parsed.sections for d in s.directives if d.keyword == "server"]
    assert servers
    for d in servers:
        name, addr = d.tokens[1], d.tokens[2]
        assert name.value == addr.value
        assert name.value is addr.value
        assert name.column != addr.column
    _fresh()


def test_intern_tables_stay_bounded() -> None:
    _fresh()
    text = _config(6_000, tag="9")
    # Far more distinct (column, word) pairs and lines than either table keeps.
    distinct = {
        (m.start() - text.rfind("\n", 0, m.start()), m.group()) for m in _WORD.finditer(text)
    }
    assert len(distinct) > tokenizer_module._INTERN_MAX
    assert text.count("\n") > parser_module._LINES_MAX
    parse(text, "haproxy.cfg")
    interned = sum(len(d) for d in tokenizer_module._BY_COLUMN)
    assert interned <= tokenizer_module._INTERN_MAX + 64  # + one line's words
    assert len(parser_module._LINES) <= parser_module._LINES_MAX
    _fresh()


_WORD = re.compile(r"[^ \n]+")


def test_a_parse_leaves_the_intern_table_empty() -> None:
    """The table shares the words that recur within one parse; after it, it holds nothing
    (it kept the last entries' tokens and dicts alive between parses)."""
    _fresh()
    text = _config(300)
    parsed, _ = parse(text, "haproxy.cfg")
    assert sum(map(len, tokenizer_module._BY_COLUMN)) == 0
    servers = [d for s in parsed.sections for d in s.directives if d.keyword == "server"]
    assert len(servers) == 900 and all(d.tokens[0] is servers[0].tokens[0] for d in servers)
    changed = text.replace("be_7\n", "be_7\n    timeout server 5s\n")
    near = parser_module.parse_near(changed, "haproxy.cfg")
    assert near is not None
    assert sum(map(len, tokenizer_module._BY_COLUMN)) == 0
    sequential = text.replace("    maxconn 100", ".if 1\n    maxconn 100\n.endif")
    parse(sequential, "haproxy.cfg")
    assert sum(map(len, tokenizer_module._BY_COLUMN)) == 0
    _fresh()
    assert parse(changed, "haproxy.cfg")[0] == near[0]
    _fresh()
