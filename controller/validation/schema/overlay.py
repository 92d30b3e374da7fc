"""Merging ``validation.schemaOverlays`` into a family schema, and refusing bad overlays.

Merge model (the cloudformation-validate one):

- keyed maps (``properties``, ``patternProperties``, ``definitions``, ``$defs``,
  ``dependencies``) are deep-merged entry by entry;
- nested schemas (``items``, ``additionalProperties``, ``if``/``then``/``else``, ...) merge
  recursively when both sides are objects;
- single-valued constraints (``type``, ``minimum``, ``pattern``, ``enum``, ``const``, ...) are
  replaced;
- ``required`` is replaced when the overlay states it (each requirement it drops is logged and
  reported in :attr:`OverlayResult.removed_requirements`) and kept — the union of the base list
  and nothing — when the overlay omits it;
- composition keywords (``allOf``, ``anyOf``, ``oneOf``, ``not``) are replaced whole.

An overlay must never weaken validation by accident, so construction fails with
:class:`SchemaOverlayError` (and an ``E3012`` diagnostic) when it is *malformed* (not a draft-07
JSON Schema), *contradictory* (no value could satisfy a constraint it produces) or
*unenforceable* (it targets a section or keyword that does not exist, constrains something the
stage does not validate, or uses a keyword the compiled validator would silently ignore).
Explicit loosening (a larger ``maximum``, extra ``enum`` values) is allowed but logged.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fastjsonschema
from fastjsonschema.draft07 import CodeGeneratorDraft07

from controller.diagnostics import Diagnostic, Phase, make
from controller.observability import get_logger

log = get_logger("controller.validation.schema.overlay")

KEYED_MAPS = frozenset({"properties", "patternProperties", "definitions", "$defs", "dependencies"})
NESTED = frozenset(
    {"items", "additionalItems", "additionalProperties", "contains", "propertyNames"}
    | {"if", "then", "else"}
)
COMPOSITION = frozenset({"allOf", "anyOf", "oneOf", "not"})
#: Validation keywords fastjsonschema's draft-07 generator enforces.
ENFORCED = frozenset(
    {
        "additionalItems", "additionalProperties", "allOf", "anyOf", "const", "contains",
        "dependencies", "else", "enum", "exclusiveMaximum", "exclusiveMinimum", "format", "if",
        "items", "maxItems", "maxLength", "maxProperties", "maximum", "minItems", "minLength",
        "minProperties", "minimum", "multipleOf", "not", "oneOf", "pattern",
        "patternProperties", "properties", "propertyNames", "required", "then", "type",
        "uniqueItems",
    }
)  # fmt: skip
ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly"}
    | {"writeOnly", "contentEncoding", "contentMediaType"}
)
FORMATS = frozenset(CodeGeneratorDraft07.FORMAT_REGEXS) | {"regex"}

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


class SchemaOverlayError(ValueError):
    """An overlay that would be malformed, contradictory or unenforceable."""

    def __init__(self, index: int, kind: str, pointer: str, detail: str) -> None:
        self.index = index
        self.kind = kind
        """``malformed``, ``contradictory`` or ``unenforceable``."""
        self.pointer = pointer
        self.detail = detail
        where = f"validation.schemaOverlays[{index}]" + (f" at {pointer}" if pointer else "")
        self.message = f"{where}: {kind} overlay: {detail}"
        super().__init__(self.message)

    @property
    def diagnostic(self) -> Diagnostic:
        return make("E3012", Phase.SCHEMA, self.message)


@dataclass
class OverlayResult:
    document: dict[str, Any]
    touched: dict[int, frozenset[str]] = field(default_factory=dict)
    """``id(schema node)`` → keywords an overlay set there (to attribute violations)."""
    touched_directives: set[tuple[str, str]] = field(default_factory=set)
    """(section, keyword) pairs whose schema an overlay changed."""
    removed_requirements: list[str] = field(default_factory=list)
    loosened: list[str] = field(default_factory=list)


def _ptr(path: Sequence[str | int]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def apply_overlays(base: Mapping[str, Any], overlays: Sequence[Mapping[str, Any]]) -> OverlayResult:
    """Merge ``overlays`` (in order) over ``base``; shared subtrees stay shared, never mutated."""
    result = OverlayResult(document=dict(base))
    for index, overlay in enumerate(overlays):
        _check_form(index, overlay)
        _check_targets(index, overlay, result.document)
        merged = _merge(result.document, overlay, [], index, result)
        if not isinstance(merged, dict):  # pragma: no cover - guarded by _check_targets
            raise SchemaOverlayError(index, "unenforceable", "", "the overlay must be an object")
        result.document = merged
        for section, keyword in _directive_targets(overlay):
            result.touched_directives.add((section, keyword))
            node = merged["definitions"][section]["properties"][keyword]
            path: list[str | int] = ["definitions", section, "properties", keyword]
            _check_contradictions(index, node, path)
            _check_compiles(index, node, path)
    return result


# --- form -----------------------------------------------------------------------------------


def _check_form(index: int, overlay: Any) -> None:
    if not isinstance(overlay, Mapping):
        raise SchemaOverlayError(index, "malformed", "", "an overlay must be a JSON object")
    import jsonschema  # only a config with overlays pays its import (about 60 ms)

    try:
        jsonschema.Draft7Validator.check_schema(overlay)
    except jsonschema.SchemaError as exc:
        raise SchemaOverlayError(
            index, "malformed", _ptr(list(exc.absolute_path)), exc.message
        ) from None
    for path, node in _schema_nodes(overlay, []):
        for key, value in node.items():
            if key in ENFORCED or key in ANNOTATIONS or key.startswith("x-"):
                if key == "format" and value not in FORMATS:
                    raise SchemaOverlayError(
                        index,
                        "unenforceable",
                        _ptr([*path, key]),
                        f"format {value!r} is not checked by the validator "
                        f"(known: {', '.join(sorted(FORMATS))})",
                    )
                if key == "pattern":
                    try:
                        re.compile(value)
                    except re.error as exc:
                        raise SchemaOverlayError(
                            index, "malformed", _ptr([*path, key]), f"invalid regex: {exc}"
                        ) from None
                continue
            if key in ("definitions", "$schema") and not path:
                continue
            raise SchemaOverlayError(
                index,
                "unenforceable",
                _ptr([*path, key]),
                f"keyword {key!r} is not enforced by the draft-07 validator; it would be "
                "silently ignored",
            )


def _schema_nodes(
    node: Any, path: list[str | int]
) -> Iterator[tuple[list[str | int], dict[str, Any]]]:
    """Every sub-schema object of a schema, with its path (boolean schemas skipped)."""
    if not isinstance(node, dict):
        return
    yield path, node
    for key, value in node.items():
        if key in KEYED_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                if isinstance(sub, dict):
                    yield from _schema_nodes(sub, [*path, key, name])
        elif key in NESTED or key == "not":
            if isinstance(value, dict):
                yield from _schema_nodes(value, [*path, key])
            elif isinstance(value, list):
                for i, sub in enumerate(value):
                    yield from _schema_nodes(sub, [*path, key, i])
        elif key in COMPOSITION and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from _schema_nodes(sub, [*path, key, i])


# --- targets --------------------------------------------------------------------------------


def _unknown(
    index: int, path: list[str | int], name: str, known: Any, what: str
) -> SchemaOverlayError:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return SchemaOverlayError(index, "unenforceable", _ptr(path), f"unknown {what} {name!r}{hint}")


def _check_targets(index: int, overlay: Mapping[str, Any], doc: Mapping[str, Any]) -> None:
    """Only directive schemas are enforced, so that is all an overlay may constrain."""
    for key in overlay:
        if key in ANNOTATIONS or key.startswith("x-") or key in ("$schema", "definitions"):
            continue
        raise SchemaOverlayError(
            index,
            "unenforceable",
            _ptr([key]),
            "only definitions.<section>.properties.<keyword> is validated; "
            f"a top-level {key!r} would not be enforced",
        )
    defs = overlay.get("definitions", {})
    for section, snode in defs.items():
        if section not in doc["definitions"]:
            raise _unknown(index, ["definitions", section], section, doc["definitions"], "section")
        base_section = doc["definitions"][section]
        if not isinstance(snode, dict):
            raise SchemaOverlayError(
                index, "unenforceable", _ptr(["definitions", section]),
                "a section must be constrained through its properties, not replaced",
            )  # fmt: skip
        for key in snode:
            if key in ANNOTATIONS or key.startswith("x-") or key == "properties":
                continue
            raise SchemaOverlayError(
                index,
                "unenforceable",
                _ptr(["definitions", section, key]),
                "section-level constraints are not enforced; constrain keywords under 'properties'",
            )
        for keyword, knode in snode.get("properties", {}).items():
            kpath: list[str | int] = ["definitions", section, "properties", keyword]
            base_kw = base_section.get("properties", {})
            if keyword not in base_kw:
                raise _unknown(index, kpath, keyword, base_kw, f"keyword in section {section!r}:")
            _check_known_properties(index, knode, base_kw[keyword], kpath)


def _check_known_properties(index: int, over: Any, base: Any, path: list[str | int]) -> None:
    """Every ``properties`` entry an overlay names must exist in the base schema there."""
    if not isinstance(over, dict) or not isinstance(base, dict):
        return
    for key, value in over.items():
        if key in ("properties", "definitions", "$defs") and isinstance(value, dict):
            known = base.get(key, {}) if isinstance(base.get(key), dict) else {}
            for name, sub in value.items():
                if name not in known:
                    raise _unknown(index, [*path, key, name], name, known, "property")
                _check_known_properties(index, sub, known[name], [*path, key, name])
        elif key in NESTED and isinstance(value, dict):
            _check_known_properties(index, value, base.get(key), [*path, key])


def _directive_targets(overlay: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for section, snode in overlay.get("definitions", {}).items():
        for keyword in snode.get("properties", {}):
            yield section, keyword


# --- merge ----------------------------------------------------------------------------------


def _merge(base: Any, over: Any, path: list[str | int], index: int, result: OverlayResult) -> Any:
    if not isinstance(base, dict) or not isinstance(over, dict):
        return copy.deepcopy(over)
    out = dict(base)
    for key, value in over.items():
        here = [*path, key]
        if key in KEYED_MAPS and isinstance(value, dict) and isinstance(base.get(key), dict):
            merged_map = dict(base[key])
            for name, sub in value.items():
                merged_map[name] = _merge(base[key].get(name), sub, [*here, name], index, result)
            out[key] = merged_map
        elif key in NESTED and isinstance(value, dict) and isinstance(base.get(key), dict):
            out[key] = _merge(base[key], value, here, index, result)
        elif key == "required":
            dropped = sorted(set(base.get("required", [])) - set(value))
            for name in dropped:
                entry = f"{_ptr(path)}: {name}"
                result.removed_requirements.append(entry)
                log.warning(
                    "overlay removes a requirement", overlay=index, at=_ptr(path), name=name
                )
            out[key] = list(value)
        else:
            if key == "type" and "type" in base and not _types_overlap(base["type"], value):
                raise SchemaOverlayError(
                    index,
                    "contradictory",
                    _ptr(here),
                    f"the configuration always yields {base['type']!r} values here; "
                    f"type {value!r} could never match",
                )
            _note_loosening(base, key, value, path, index, result)
            out[key] = copy.deepcopy(value)
    result.touched[id(out)] = frozenset(over)
    return out


def _note_loosening(
    base: Mapping[str, Any],
    key: str,
    value: Any,
    path: list[str | int],
    index: int,
    result: OverlayResult,
) -> None:
    if key not in base:
        return
    old = base[key]
    looser = (
        (key in ("maximum", "exclusiveMaximum", "maxLength", "maxItems") and _num(value) > _num(old))
        or (key in ("minimum", "exclusiveMinimum", "minLength", "minItems") and _num(value) < _num(old))
        or (key == "enum" and isinstance(value, list) and isinstance(old, list) and not set(map(repr, value)) <= set(map(repr, old)))
    )  # fmt: skip
    if looser:
        entry = f"{_ptr([*path, key])}: {old!r} -> {value!r}"
        result.loosened.append(entry)
        log.warning("overlay loosens a bundled constraint", overlay=index, change=entry)


def _types_overlap(old: Any, new: Any) -> bool:
    a = {old} if isinstance(old, str) else set(old)
    b = {new} if isinstance(new, str) else set(new)
    widen = {"integer": {"integer", "number"}, "number": {"integer", "number"}}
    return any(widen.get(t, {t}) & b for t in a)


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


# --- contradictions -------------------------------------------------------------------------


def _fits_type(value: Any, types: Any) -> bool:
    names = [types] if isinstance(types, str) else list(types)
    for name in names:
        kinds = _JSON_TYPES.get(name, ())
        if isinstance(value, bool) and name not in ("boolean",):
            continue
        if isinstance(value, kinds):
            if name == "integer" and isinstance(value, float) and not value.is_integer():
                continue
            return True
    return False


def _check_contradictions(index: int, root: Any, root_path: list[str | int]) -> None:
    for path, node in _schema_nodes(root, root_path):
        where = _ptr(path)

        def bad(detail: str, where: str = where) -> SchemaOverlayError:
            return SchemaOverlayError(index, "contradictory", where, detail)

        for lo_key, hi_key in (
            ("minimum", "maximum"),
            ("minLength", "maxLength"),
            ("minItems", "maxItems"),
            ("minProperties", "maxProperties"),
        ):
            lo, hi = node.get(lo_key), node.get(hi_key)
            if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo > hi:
                raise bad(f"{lo_key} {lo} is greater than {hi_key} {hi}")
        lo = node.get("exclusiveMinimum", node.get("minimum"))
        hi = node.get("exclusiveMaximum", node.get("maximum"))
        strict = "exclusiveMinimum" in node or "exclusiveMaximum" in node
        if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and strict and lo >= hi:
            raise bad(f"no number lies between {lo} and {hi} (exclusive bounds)")
        if "enum" in node and not node["enum"]:
            raise bad("an empty enum admits no value")
        candidates: list[Any] | None = None
        if "enum" in node:
            candidates = list(node["enum"])
        if "const" in node:
            if candidates is not None and node["const"] not in candidates:
                raise bad(f"const {node['const']!r} is not among the enum values")
            candidates = [node["const"]]
        if candidates is not None:
            probe = {k: node[k] for k in _VALUE_RULES if k in node}
            check = fastjsonschema.compile(probe) if probe else None
            for value in candidates:
                if "type" in node and not _fits_type(value, node["type"]):
                    raise bad(f"value {value!r} does not fit type {node['type']!r}")
                if check is not None:
                    try:
                        check(value)
                    except fastjsonschema.JsonSchemaValueException as exc:
                        raise bad(
                            f"value {value!r} violates its own constraints: {exc.message}"
                        ) from None
        base_required = node.get("required", [])
        props = node.get("properties", {})
        if node.get("additionalProperties") is False and isinstance(props, dict):
            for name in base_required:
                if name not in props and not node.get("patternProperties"):
                    raise bad(
                        f"required {name!r} can never be present (additionalProperties false)"
                    )
                if props.get(name) is False:
                    raise bad(f"required {name!r} is forbidden by its own schema")


_VALUE_RULES = (
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "format",
)  # fmt: skip


def _check_compiles(index: int, node: Any, path: list[str | int]) -> None:
    try:
        fastjsonschema.compile(node)
    except (fastjsonschema.JsonSchemaDefinitionException, TypeError, ValueError) as exc:
        raise SchemaOverlayError(
            index, "unenforceable", _ptr(path), f"the validator cannot compile it: {exc}"
        ) from None
