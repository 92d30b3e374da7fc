"""`htc validate --raw --settings FILE`: the ``validation:`` block without a whole config.

A hand-written haproxy.cfg has no HAProxyTemplateConfig around it, yet the pipeline's
behaviour depends on ``spec.validation`` (allowed directives, strictness, filters, schema
overlays, external validators). The file holds that block as it appears in the config —
``validation:`` at the top — or a whole HAProxyTemplateConfig, whose ``spec.validation`` is
taken. It is read with the same YAML reader and the same strict model as the config itself,
so a setting means the same in both places and errors point at the same lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from controller.cli.inputs import InputError
from controller.diagnostics import Diagnostic, Location, Phase, RuleId, make
from controller.spec import (
    KIND,
    ValidationSettings,
    describe_error,
    format_path,
    prune_nulls,
    read_documents,
)

__all__ = ["load_settings"]

PathKey = tuple[str | int, ...]


def load_settings(path: Path) -> ValidationSettings:
    """The settings in ``path``; raises :class:`InputError` (E8001/E8002) when unusable."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError([_error("E8002", file, None, f"cannot read: {reason}")]) from None
    docs, problems = read_documents(text, file)
    if problems:
        raise InputError(problems)
    if len(docs) != 1 or not isinstance(docs[0][0], Mapping):
        raise InputError(
            [_error("E8002", file, 1, "expected one YAML mapping with a `validation:` key")]
        )
    doc, lines = docs[0]
    prefix: PathKey = ("spec", "validation") if doc.get("kind") == KIND else ("validation",)
    block: Any = doc
    for key in prefix:
        block = block.get(key) if isinstance(block, Mapping) else None
    if prefix == ("validation",):
        extra = sorted(str(k) for k in doc if k != "validation")
        if extra:
            why = "only `validation:` (or a whole HAProxyTemplateConfig) is read"
            raise InputError(
                [_error("E8001", file, lines.get((k,)), f"unknown key {k!r}; {why}") for k in extra]
            )
    if block is None:
        block = {}
    try:
        wire = json.dumps(prune_nulls(block))
    except (TypeError, ValueError) as exc:
        where = _line(lines, prefix)
        raise InputError([_error("E8001", file, where, f"not JSON data: {exc}")]) from None
    try:
        return ValidationSettings.model_validate_json(
            wire, strict=True, by_alias=True, by_name=False
        )
    except ValidationError as exc:
        raise InputError(
            [_problem(err, prefix, file, lines) for err in exc.errors(include_url=False)]
        ) from None


def _problem(err: Any, prefix: PathKey, file: str, lines: Mapping[PathKey, int]) -> Diagnostic:
    path: PathKey = (*prefix, *err["loc"])
    if len(path) > 1 and path[-1] == "[key]":
        path = path[:-1]
    message = f"{format_path(path)}: {describe_error(err, ValidationSettings)}"
    return _error("E8001", file, _line(lines, path), message)


def _line(lines: Mapping[PathKey, int], path: Sequence[str | int]) -> int | None:
    """Line of the deepest part of ``path`` in the document (a missing field's parent)."""
    p = tuple(path)
    while p and p not in lines:
        p = p[:-1]
    return lines.get(p)


def _error(rule_id: RuleId, file: str, line: int | None, message: str) -> Diagnostic:
    return make(rule_id, Phase.SPEC, message, location=Location(file=file, line=line))
