"""Messages a template author reads, and a file set that cannot change after it was hashed."""

from __future__ import annotations

import pickle

import pytest

from controller.render import FileEntry, FileKind, FileSet
from tests.render.render_kit import render, spec


def test_a_cycle_made_by_a_snippet_names_the_snippet() -> None:
    s = spec(
        "global\n",
        maps={"a.map": "{{ outputs['b.map'].content }}", "b.map": "{% include 's1' %}"},
        snippets={"s1": "{{ outputs['a.map'].content }}"},
    )
    [cycle] = [d for d in render(s).diagnostics if d.rule_id == "E1005"]
    assert cycle.message == "render cycle: a.map -> b.map (via snippet 's1') -> a.map"


def test_a_direct_reference_is_not_blamed_on_a_snippet() -> None:
    s = spec(
        "global\n",
        maps={
            "a.map": "{{ outputs['b.map'].content }}",
            "b.map": "{% include 's1' %}{{ outputs['a.map'].path }}",
        },
        snippets={"s1": "{{ outputs['a.map'].content }}"},
    )
    [cycle] = [d for d in render(s).diagnostics if d.rule_id == "E1005"]
    assert cycle.message == "render cycle: a.map -> b.map -> a.map"


@pytest.mark.parametrize("expression", ["resources.nothere.list()", "resources['nothere'].list()"])
def test_an_unknown_collection_lists_the_defined_ones(expression: str) -> None:
    r = render(spec("global\n{{ " + expression + " }}\n"))
    [d] = r.diagnostics
    assert d.rule_id == "E1002"
    assert d.message == "no watched collection named 'nothere' (defined: ingresses, services)"
    assert d.template_location is not None and d.template_location.line == 2


def test_known_collections_still_read_and_test_as_before() -> None:
    r = render(
        spec(
            "{{ 'services' in resources }} {{ 'nothere' in resources }} "
            "{{ resources | length }} {{ resources.services | length }} "
            "{{ resources.get('nothere', 'dflt') }}"
        )
    )
    assert r.ok, r.diagnostics
    assert r.files.main.content == b"True False 2 0 dflt"


def _files() -> FileSet:
    return FileSet.of(
        [
            FileEntry("maps/b.map", FileKind.MAP, b"b"),
            FileEntry("haproxy.cfg", FileKind.CONFIG, b"global\n"),
        ]
    )


def test_a_file_set_cannot_be_changed_after_it_was_hashed() -> None:
    files = _files()
    checksum = files.checksum
    with pytest.raises(TypeError):
        files.files["maps/evil.map"] = FileEntry("maps/evil.map", FileKind.MAP, b"")  # type: ignore[index]
    with pytest.raises(TypeError):
        del files.files["haproxy.cfg"]  # type: ignore[attr-defined]
    source = {"haproxy.cfg": FileEntry("haproxy.cfg", FileKind.CONFIG, b"x")}
    direct = FileSet(source)
    source["maps/late.map"] = FileEntry("maps/late.map", FileKind.MAP, b"")
    assert list(direct.files) == ["haproxy.cfg"]  # a copy, not a view of the caller's dict
    assert files.checksum == checksum and len(files) == 2


def test_file_set_keeps_its_semantics() -> None:
    files = _files()
    assert list(files.files) == ["haproxy.cfg", "maps/b.map"]  # sorted by path
    assert files.main.content == b"global\n" and "maps/b.map" in files
    assert files == _files() and files.checksum == _files().checksum
    copy = pickle.loads(pickle.dumps(files))
    assert copy == files and copy.checksum == files.checksum
    with pytest.raises(ValueError, match="duplicate path"):
        FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, b"")] * 2)
