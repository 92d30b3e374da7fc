"""Pydantic errors rewritten for people who write manifests, not Python.

pydantic's messages speak of "inputs" and "valid arrays"; a user needs the wire path, what the
field expects in Kubernetes terms (list, mapping, string), what was found instead, and for a typo
the field that was probably meant.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from controller.spec.hints import unwrap
from controller.spec.models import PATTERN_HINTS

__all__ = ["describe_error", "format_path", "model_at"]

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")

_EXPECTED = {
    "bool_type": "must be true or false",
    "int_type": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
}


def format_path(path: Sequence[str | int]) -> str:
    """``('spec', 'maps', 'hosts.map', 'template')`` → ``spec.maps["hosts.map"].template``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out or "(document)"


def describe_error(err: ErrorDetails, root: type[BaseModel]) -> str:
    """What is wrong at ``err['loc']``, without repeating the path."""
    kind, value = err["type"], err.get("input")
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return _unknown_field(err["loc"], root)
    if kind in ("value_error", "assertion_error"):
        ctx = err.get("ctx") or {}
        return str(ctx.get("error", err["msg"]))
    if kind == "string_pattern_mismatch":
        pattern = str((err.get("ctx") or {}).get("pattern", ""))
        if pattern in PATTERN_HINTS:
            return f"must be {PATTERN_HINTS[pattern]}, got {_show(value)}"
        return f"must match the pattern {pattern}, got {_show(value)}"
    if kind == "string_too_short" and (err.get("ctx") or {}).get("min_length") == 1:
        return "must not be empty"
    if kind in _EXPECTED:
        return f"{_EXPECTED[kind]}, got {_show(value)}"
    msg = err["msg"]
    for prefix, replacement in (
        ("Input should be", "must be"),
        ("String should", "must"),
        ("List should", "must"),
        ("Dictionary should", "must"),
        ("Value should", "must"),
    ):
        if msg.startswith(prefix):
            msg = replacement + msg[len(prefix) :]
            break
    if kind.startswith(("literal", "enum")) or kind.endswith("_parsing"):
        return f"{msg}, got {_show(value)}"
    return msg


def _unknown_field(loc: Sequence[str | int], root: type[BaseModel]) -> str:
    name = str(loc[-1])
    model = model_at(root, loc[:-1])
    if model is None:
        return "unknown field"
    known = [f.alias or n for n, f in model.model_fields.items()]
    if to_camel(name) in known and to_camel(name) != name:
        return f"unknown field (fields are camelCase: {to_camel(name)})"
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"unknown field (did you mean {close[0]}?)"
    return f"unknown field; {model.__name__} has: {', '.join(known)}"


def model_at(root: type[BaseModel], path: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that describes the value at ``path`` (wire names), if it is a model."""
    current: Any = root
    for part in path:
        current = unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = next(
                (f for n, f in current.model_fields.items() if (f.alias or n) == part), None
            )
            if field is None:
                return None
            current = field.annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        elif get_origin(current) is list:
            current = get_args(current)[0]
        else:
            return None
    current = unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return current
    return None


def _show(value: Any) -> str:
    """Name a wrong value in wire terms: the string 'x', the number 5, a mapping, null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "the boolean " + ("true" if value else "false")
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return f"the string {json.dumps(text)}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
