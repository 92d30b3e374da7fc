"""The bundled data: deltas apply in order, the generated documents are JSON Schema, and the
data is self-consistent (examples use the keyword they illustrate, tables exist)."""

from __future__ import annotations

import jsonschema
import pytest

from controller.validation.schema import families, family_schema
from controller.validation.schema.catalog import catalog, data_hash, family, first_family_with
from controller.validation.schema.grammar import GrammarError, parse_args, parse_type


def test_supported_families() -> None:
    assert families() == ["2.6", "2.8", "3.0", "3.2"]


def test_newest_family_document_is_draft7_json_schema() -> None:
    jsonschema.Draft7Validator.check_schema(family_schema("3.2"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["2.6", "2.8", "3.0"])
def test_every_family_document_is_draft7_json_schema(name: str) -> None:
    jsonschema.Draft7Validator.check_schema(family_schema(name))


def test_deltas_add_deprecate_remove_and_change() -> None:
    f26, f28, f30, f32 = (family(n) for n in families())
    assert "tune.disable-fast-forward" not in f26.keywords["global"]
    assert f28.keywords["global"]["tune.disable-fast-forward"].since == "2.8"
    assert first_family_with("global", "tune.disable-fast-forward") == "2.8"
    bp26, bp28 = f26.keywords["proxy"]["bind-process"], f28.keywords["proxy"]["bind-process"]
    assert bp26.deprecated is not None and bp26.removed is None
    assert bp28.removed is not None and bp28.removed.since == "2.7"
    assert f26.option_tables["bind"]["process"].deprecated is not None
    assert f28.option_tables["bind"]["process"].removed is not None
    assert "no-alpn" in f28.option_tables["bind"] and "no-alpn" not in f26.option_tables["bind"]
    assert "crt-store" not in f28.sections and "crt-store" in f30.sections
    assert f28.sections["program"].deprecated is None
    assert f32.sections["program"].deprecated is not None
    mode26 = f26.keywords["proxy"]["mode"].args[0].type.schema["enum"]
    mode30 = f30.keywords["proxy"]["mode"].args[0].type.schema["enum"]
    assert "log" not in mode26 and "log" in mode30
    assert f26.keywords["proxy"]["option dontlognull"].prefixes == ("no",)
    assert f28.keywords["proxy"]["option dontlognull"].prefixes == ("no", "default")


def test_examples_illustrate_their_own_keyword() -> None:
    """An example that starts with another keyword would prove the wrong thing."""
    for fam in catalog():
        for group, specs in fam.keywords.items():
            for spec in specs.values():
                for example in spec.examples:
                    words = example.split("\n")[-1].split()
                    if words[0] in ("no", "default"):
                        words = words[1:]
                    head = [w.split("(")[0] for w in words[: len(spec.words)]]
                    head = ["track-sc" if w.startswith("track-sc") else w for w in head]
                    assert head == list(spec.words), (group, spec.key, example)


def test_option_tables_referenced_exist_and_sections_have_groups() -> None:
    for fam in catalog():
        for specs in fam.keywords.values():
            for spec in specs.values():
                if spec.options:
                    assert spec.options in fam.option_tables, spec.key
        for section in fam.sections.values():
            assert section.open or section.group in fam.keywords, section.keyword


def test_data_hash_is_stable_and_hex() -> None:
    assert data_hash() == data_hash()
    assert len(data_hash()) == 64


def test_time_size_and_int_conversions() -> None:
    time = parse_type("time")
    assert [time.convert(w) for w in ("250ms", "5s", "2m", "1h", "1d", "100us", "42")] == [
        250,
        5000,
        120000,
        3600000,
        86400000,
        0.1,
        42,
    ]
    assert time.convert("1.5s") == "1.5s"  # left for the schema to reject
    assert parse_type("time(s)").convert("300") == 300000
    assert parse_type("size").convert("64k") == 65536
    assert parse_type("int(0..256)").schema == {"type": "integer", "minimum": 0, "maximum": 256}
    assert parse_type("list(enum(a|b))").convert("a,b") == ["a", "b"]


@pytest.mark.parametrize(
    "grammar", ["value:nosuchtype", "a:str* b:str", "a:str? b:str", "value", "a:enum(x"]
)
def test_bad_grammar_is_refused(grammar: str) -> None:
    with pytest.raises(GrammarError):
        parse_args(grammar)


def test_a_bang_marks_a_range_both_binaries_refuse() -> None:
    assert parse_type("int(0..256)!").schema == {
        "type": "integer",
        "minimum": 0,
        "maximum": 256,
        "x-checked": True,
    }
    assert "x-checked" not in parse_type("int(0..256)").schema
    (arg,) = parse_args("value:uint!?")
    assert arg.arity == "?" and arg.type.schema["x-checked"] is True
    with pytest.raises(GrammarError):
        parse_type("str!")
