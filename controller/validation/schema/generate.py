"""Generating one JSON Schema document per family from the catalog.

The document describes a configuration in its *parsed form*: each section kind maps to a list
of sections, each section to a list of one-key directive objects
``{"<keyword>": {<named arguments>, "options": {...}, "condition": {...}}}``. Keywords sit under
``definitions.<section kind>.properties.<keyword>``, which is also the address overlays use.
The stage validates directive by directive against those sub-schemas, but the document is a
complete, honest schema: validating a whole configuration's JSON form against it gives the same
verdict (a test proves it).

Lifecycle and placement facts that JSON Schema cannot express as validation are carried as
annotations the stage reads: ``deprecated``/``x-deprecated``, ``x-removed`` (with ``not: {}`` so
plain validators reject it too), ``x-ignored`` (HAProxy accepts the keyword in that section
but ignores it), ``x-core``, ``x-feature``, ``x-since``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from controller.validation.schema.catalog import (
    Family,
    KeywordSpec,
    Lifecycle,
    OptionEntry,
    family,
)

SCHEMA_DIALECT = "http://json-schema.org/draft-07/schema#"
ID_BASE = "https://haproxy-template.dev/schemas/"

CONDITION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "enum": ["if", "unless"]},
        "terms": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
    "required": ["kind", "terms"],
    "additionalProperties": False,
}


def _lifecycle(node: dict[str, Any], spec: Any) -> None:
    dep: Lifecycle | None = spec.deprecated
    rem: Lifecycle | None = spec.removed
    if rem is not None:
        node["not"] = {}
        node["x-removed"] = rem.as_json()
    elif dep is not None:
        node["deprecated"] = True
        node["x-deprecated"] = dep.as_json()


def option_schema(entry: OptionEntry) -> dict[str, Any]:
    node = entry.spec.schema()
    if entry.core:
        node["x-core"] = True
    if entry.feature:
        node["x-feature"] = entry.feature
    _lifecycle(node, entry)
    return node


@cache
def _options_object(fam_name: str, table: str) -> dict[str, Any]:
    """Shared (never mutated) schema of one option table; overlays copy what they change."""
    fam = family(fam_name)
    return {
        "type": "object",
        "properties": {
            name: option_schema(entry) for name, entry in fam.option_tables[table].items()
        },
        "additionalProperties": False,
    }


def directive_schema(fam: Family, spec: KeywordSpec, *, ignored: bool = False) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    for arg in spec.args:
        props[arg.name] = arg.schema()
        if arg.required:
            required.append(arg.name)
    if spec.parser == "log":
        props.update(_LOG_PROPS)
    if spec.options:
        props["options"] = _options_object(fam.name, spec.options)
    if spec.cond:
        props["condition"] = CONDITION_SCHEMA
    if spec.prefixes:
        props["prefix"] = {"type": "string", "enum": list(spec.prefixes)}
    node: dict[str, Any] = {
        "title": spec.key,
        "type": "object",
        "properties": props,
        "additionalProperties": False,
    }
    if required:
        node["required"] = required
    if spec.parser == "log":
        node.update(_LOG_RULES)
    node["x-since"] = spec.since
    if spec.core:
        node["x-core"] = True
    if spec.feature:
        node["x-feature"] = spec.feature
    if spec.experimental:
        node["x-experimental"] = True
    if ignored:
        node["x-ignored"] = True
    _lifecycle(node, spec)
    return node


_LEVELS = ["emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"]
_FACILITIES = [
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
    "auth2", "ftp", "ntp", "audit", "alert", "cron2",
    "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
]  # fmt: skip
_LOG_PROPS: dict[str, Any] = {
    "target": {"type": "string"},
    "len": {"type": "integer", "minimum": 80, "maximum": 65535},
    "format": {"type": "string"},
    "sample": {"type": "string"},
    "profile": {"type": "string"},
    "facility": {"type": "string", "enum": _FACILITIES},
    "level": {"type": "string", "enum": _LEVELS},
    "minlevel": {"type": "string", "enum": _LEVELS},
}


#: ``no log`` stands alone; ``log global`` needs nothing else; any other target needs a facility.
#: ``default log`` takes the same arguments as ``log`` (both binaries load it).
_LOG_RULES: dict[str, Any] = {
    "if": {"required": ["prefix"], "properties": {"prefix": {"const": "no"}}},
    "then": {"maxProperties": 1},
    "else": {
        "required": ["target"],
        "if": {"properties": {"target": {"const": "global"}}},
        "then": {"maxProperties": 1},
        "else": {"required": ["facility"]},
    },
}


def section_schema(fam: Family, section: str) -> dict[str, Any]:
    spec = fam.sections[section]
    if spec.open:
        return {"title": section, "type": "object", "x-open": True}
    props: dict[str, Any] = {}
    for key, kw in sorted(fam.keywords.get(spec.group, {}).items()):
        placement = "ok"
        if spec.group == "proxy":
            # named-only keywords are described for defaults; the stage checks the name
            placement = kw.placement(section, named=True)
        if placement == "error":
            continue
        props[key] = directive_schema(fam, kw, ignored=placement == "warn")
    node: dict[str, Any] = {
        "title": section,
        "type": "object",
        "properties": props,
        "additionalProperties": False,
        "minProperties": 1,
        "maxProperties": 1,
        "x-group": spec.group,
        "x-name": spec.name,
    }
    if spec.deprecated is not None:
        node["x-deprecated"] = spec.deprecated.as_json()
    return node


@cache
def _document(fam_name: str) -> str:
    fam = family(fam_name)
    definitions = {sec: section_schema(fam, sec) for sec in sorted(fam.sections)}
    doc: dict[str, Any] = {
        "$schema": SCHEMA_DIALECT,
        "$id": f"{ID_BASE}haproxy-{fam.name}.schema.json",
        "title": f"HAProxy {fam.name} configuration (parsed form)",
        "description": (
            "Generated from controller/validation/schema/data. Each section kind holds a list of "
            "sections; each directive is a one-key object keyed by its (compound) keyword. "
            "Times are milliseconds, sizes bytes."
        ),
        "type": "object",
        "properties": {
            sec: {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": ["string", "null"]},
                        "directives": {
                            "type": "array",
                            "items": {"$ref": f"#/definitions/{sec}"},
                        },
                    },
                    "required": ["directives"],
                    "additionalProperties": False,
                },
            }
            for sec in sorted(fam.sections)
        },
        "additionalProperties": False,
        "definitions": definitions,
        "x-family": fam.name,
        "x-source": fam.source,
    }
    return json.dumps(doc, sort_keys=True)


def family_document(name: str) -> dict[str, Any]:
    """A fresh copy of the generated JSON Schema of one family (callers may mutate it)."""
    result: dict[str, Any] = json.loads(_document(name))
    return result


def shared_document(name: str) -> Mapping[str, Any]:
    """The generated document without copying: treat as read-only."""
    return _shared(name)


@cache
def _shared(name: str) -> dict[str, Any]:
    return family_document(name)
