"""The syntax of names the API refuses before anything uses them.

Each syntax is written once, as a regular expression that means the same in Python's ``re``
(always applied with ``fullmatch``), in pydantic's Rust engine and in RE2, the engine of the
API server's OpenAPI ``pattern`` and CEL ``matches()``. The models check values with these
functions; the CRD carries the same expressions, so the API server and ``htc`` cannot
disagree about what a valid name is.
"""

from __future__ import annotations

import re

__all__ = [
    "FIELD_SELECTOR_PATTERN",
    "LABEL_KEY_PATTERN",
    "LABEL_PREFIX_PATTERN",
    "LABEL_VALUE_PATTERN",
    "MAX_OUTPUT_NAME",
    "OUTPUT_NAME_PATTERN",
    "check_label_key",
    "check_label_value",
    "check_output_name",
    "field_selector_error",
]

OUTPUT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
"""A map, file or certificate name: it becomes a file name in the deploy directory, so no
separators, no leading dot (hidden files, ``.``, ``..``), no whitespace or control characters
that would break the HAProxy line referencing it."""

MAX_OUTPUT_NAME = 253
"""Longer names would exceed common file-name limits (255 bytes) once written with a suffix."""

_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"

LABEL_KEY_PATTERN = rf"^({_SUBDOMAIN}/)?{_LABEL_NAME}$"
"""A Kubernetes qualified name: an optional DNS-subdomain prefix and ``/``, then a name of at
most 63 characters (alphanumeric at both ends, ``-``, ``_`` and ``.`` inside)."""

LABEL_PREFIX_PATTERN = r"^[^/]{1,253}/"
"""Bounds the prefix of a qualified name to 253 characters, which one pattern cannot do."""

LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
"""A Kubernetes label value: empty, or at most 63 characters shaped like a label name."""

_FIELD_KEY = r"[^,=!\\\s]+"
_FIELD_VALUE = r"([^,=\\]|\\[\\,=])*"
_FIELD_TERM = rf"{_FIELD_KEY}(=|==|!=){_FIELD_VALUE}"

FIELD_SELECTOR_PATTERN = rf"^({_FIELD_TERM}(,{_FIELD_TERM})*)?$"
"""``key=value``, ``key==value`` or ``key!=value`` terms separated by commas, as the API server
parses them: in a value ``\\``, ``,`` and ``=`` must be escaped with a backslash. An empty
selector selects everything."""

_OUTPUT_NAME = re.compile(OUTPUT_NAME_PATTERN)
_LABEL_KEY = re.compile(LABEL_KEY_PATTERN)
_LABEL_PREFIX = re.compile(LABEL_PREFIX_PATTERN)
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)
_FIELD_SELECTOR = re.compile(FIELD_SELECTOR_PATTERN)
_FIELD_TERM_RE = re.compile(_FIELD_TERM)


def check_output_name(name: str) -> str:
    """Return ``name`` if it can name an output file; raise ValueError saying why not."""
    if _OUTPUT_NAME.fullmatch(name) is None:
        raise ValueError(
            f"invalid output name {name!r}: a file name starts with a letter or digit and "
            "contains only letters, digits, '.', '_' and '-'"
        )
    if len(name) > MAX_OUTPUT_NAME:
        raise ValueError(
            f"invalid output name {name[:40]!r}...: {len(name)} characters, "
            f"at most {MAX_OUTPUT_NAME} allowed"
        )
    return name


def check_label_key(key: str) -> str:
    """Return ``key`` if it is a Kubernetes label key; raise ValueError saying why not."""
    if _LABEL_KEY.fullmatch(key) is None:
        raise ValueError(
            f"invalid label key {key!r}: an optional DNS subdomain prefix and '/', then a "
            "name of at most 63 letters, digits, '-', '_' or '.', alphanumeric at both ends"
        )
    if "/" in key and _LABEL_PREFIX.match(key) is None:
        raise ValueError(f"invalid label key {key[:40]!r}...: the prefix exceeds 253 characters")
    return key


def check_label_value(value: str) -> str:
    """Return ``value`` if it is a Kubernetes label value; raise ValueError saying why not."""
    if _LABEL_VALUE.fullmatch(value) is None:
        raise ValueError(
            f"invalid label value {value!r}: empty, or at most 63 letters, digits, '-', '_' "
            "or '.', alphanumeric at both ends"
        )
    return value


def field_selector_error(selector: str) -> str | None:
    """Why the API server would refuse ``selector``, or None when it parses."""
    if _FIELD_SELECTOR.fullmatch(selector) is not None:
        return None
    for term in _split_terms(selector):
        if not term:
            return f"field selector {selector!r} has an empty term"
        if _FIELD_TERM_RE.fullmatch(term) is None:
            return (
                f"field selector {selector!r}: cannot understand {term!r}; write key=value, "
                "key==value or key!=value (escape '\\', ',' and '=' in values with '\\')"
            )
    return f"field selector {selector!r} does not parse"


def _split_terms(selector: str) -> list[str]:
    """Split at commas that no backslash escapes."""
    terms, cur, i = [], [], 0
    while i < len(selector):
        ch = selector[i]
        if ch == "\\" and i + 1 < len(selector):
            cur.append(selector[i : i + 2])
            i += 2
            continue
        if ch == ",":
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    terms.append("".join(cur))
    return terms
