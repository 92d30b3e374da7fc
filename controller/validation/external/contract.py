"""The wire contract with external validators: what they receive and what they may answer.

Receive (command): a directory holding the complete file set in deploy layout plus
``manifest.json``; (http): a POST whose JSON body carries the same file list with contents.
Answer: nothing, or ``{"diagnostics": [{"severity", "message", "ruleId"?, "file"?, "line"?,
"column"?}]}``. Anything else is garbage — reported, never guessed at. The full contract is in
``docs/security.md``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from controller.render import FileSet

__all__ = [
    "Answer",
    "ContractError",
    "Finding",
    "manifest",
    "parse_answer",
    "parse_findings",
    "payload",
]

CONTRACT_VERSION = 1
MAX_FINDINGS = 1000
_SEVERITIES = {"fatal": "error", "error": "error", "warning": "warning", "info": "info"}


class ContractError(ValueError):
    """The answer is not the documented JSON document."""


@dataclass(frozen=True, slots=True)
class Finding:
    severity: str
    """``error``, ``warning`` or ``info`` (``fatal`` is read as ``error``)."""
    message: str
    rule_id: str | None = None
    file: str | None = None
    line: int | None = None
    column: int | None = None


def _files(files: FileSet, *, content: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for e in files:
        item: dict[str, Any] = {"path": e.path, "kind": e.kind.value, "sha256": e.sha256}
        if content:
            item["content"] = base64.b64encode(e.content).decode("ascii")
        else:
            item["size"] = len(e.content)
        out.append(item)
    return out


def manifest(files: FileSet) -> bytes:
    """``manifest.json`` next to the files: what is there, so a validator need not walk."""
    doc = {
        "version": CONTRACT_VERSION,
        "checksum": files.checksum,
        "files": _files(files, content=False),
    }
    return json.dumps(doc, indent=2, sort_keys=True).encode()


def payload(files: FileSet) -> bytes:
    doc = {
        "version": CONTRACT_VERSION,
        "checksum": files.checksum,
        "files": _files(files, content=True),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Answer:
    findings: list[Finding]
    dropped: int = 0
    """Findings beyond :data:`MAX_FINDINGS`, neither read nor checked; the report says how
    many, so a validator's flood is visible instead of silently cut."""


def parse_findings(text: str) -> list[Finding]:
    """Findings of an answer (at most :data:`MAX_FINDINGS`). Raises :class:`ContractError`."""
    return parse_answer(text).findings


def parse_answer(text: str) -> Answer:
    """Findings of an answer and how many were over the cap; empty text means none.
    Raises :class:`ContractError`."""
    if not text.strip():
        return Answer([])
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    except ValueError as exc:  # e.g. numbers too long to convert
        raise ContractError(f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ContractError("the answer must be a JSON object")
    items = doc.get("diagnostics", [])
    if not isinstance(items, list):
        raise ContractError('"diagnostics" must be a list')
    findings = [_finding(i, item) for i, item in enumerate(items[:MAX_FINDINGS])]
    return Answer(findings, max(0, len(items) - MAX_FINDINGS))


def _finding(i: int, item: object) -> Finding:
    where = f"diagnostics[{i}]"
    if not isinstance(item, dict):
        raise ContractError(f"{where} must be an object")
    sev = item.get("severity")
    if not isinstance(sev, str) or sev.lower() not in _SEVERITIES:
        raise ContractError(f"{where}.severity must be one of error, warning, info")
    message = item.get("message")
    if not isinstance(message, str) or not message.strip():
        raise ContractError(f"{where}.message must be a non-empty string")
    rule_id = _opt(item, "ruleId", str, where)
    file = _opt(item, "file", str, where)
    line = _opt(item, "line", int, where)
    column = _opt(item, "column", int, where)
    for name, value in (("line", line), ("column", column)):
        if value is not None and value < 1:
            raise ContractError(f"{where}.{name} must be a positive integer")
    return Finding(
        severity=_SEVERITIES[sev.lower()],
        message=message.strip(),
        rule_id=rule_id,
        file=file,
        line=line,
        column=column,
    )


def _opt(item: dict[str, Any], key: str, typ: type, where: str) -> Any:
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, typ) or isinstance(value, bool):
        raise ContractError(f"{where}.{key} must be a {typ.__name__}")
    return value
