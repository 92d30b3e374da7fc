"""Which watched collections an object belongs to, decided the way the API server would.

The cluster adapter gets this for free (the watch itself filters); the directory adapter and
``htc render`` read plain manifests, so they need the same decision made locally: apiVersion
and kind, label selector, field selector and — when namespace labels are known — namespace
selector. Label selectors follow Kubernetes semantics: all terms AND together, an empty
selector matches everything, ``NotIn`` and ``DoesNotExist`` match objects without the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from controller.resources.paths import (
    MISSING,
    FieldPath,
    FieldPathError,
    lookup,
    parse_path,
    scalar_text,
)
from controller.spec import LabelSelector, WatchedResource, field_selector_error

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace; namespace selectors commonly rely on it."""


class SelectorError(ValueError):
    """A selector that the API server would reject; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    path: FieldPath
    op: Literal["=", "!="]
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        found = lookup(obj, self.path)
        text = "" if found is MISSING or found is None else (scalar_text(found) or "")
        return (text == self.value) == (self.op == "=")


@lru_cache(maxsize=256)
def parse_field_selector(text: str) -> tuple[FieldRequirement, ...]:
    """``metadata.name=a,metadata.namespace!=b`` (also ``==``; ``\\`` escapes ``\\ , =``).

    The syntax is the spec's (:func:`controller.spec.names.field_selector_error`, also the
    CRD's pattern); this adds what only the store knows: each key must be a field path.
    """
    problem = field_selector_error(text)
    if problem is not None:
        raise SelectorError(problem)
    out: list[FieldRequirement] = []
    for term in _split_unescaped(text, ","):
        if not term.strip():
            if text.strip():
                raise SelectorError(f"field selector {text!r} has an empty term")
            continue
        field, op, value = _split_operator(term, text)
        try:
            path = parse_path(field.strip())
        except FieldPathError as exc:
            raise SelectorError(f"field selector {text!r}: {exc}") from None
        out.append(FieldRequirement(path, op, _unescape(value)))
    return tuple(out)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, i = [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            cur.append(text[i : i + 2])
            i += 2
            continue
        if text[i] == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(text[i])
        i += 1
    parts.append("".join(cur))
    return parts


def _split_operator(term: str, whole: str) -> tuple[str, Literal["=", "!="], str]:
    i = 0
    while i < len(term):
        ch = term[i]
        if ch == "\\":
            i += 2
            continue
        if term.startswith("!=", i):
            return term[:i], "!=", term[i + 2 :]
        if term.startswith("==", i):
            return term[:i], "=", term[i + 2 :]
        if ch == "=":
            return term[:i], "=", term[i + 1 :]
        i += 1
    raise SelectorError(f"field selector {whole!r}: term {term!r} has no =, == or != operator")


def _unescape(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        if value[i] == "\\" and i + 1 < len(value):
            i += 1
        out.append(value[i])
        i += 1
    return "".join(out)


def check_label_selector(selector: LabelSelector | Mapping[str, Any]) -> None:
    """Raise SelectorError for requirements the API server rejects (e.g. ``In`` with no values)."""
    for key, op, values in _requirements(selector):
        if op in ("In", "NotIn") and not values:
            raise SelectorError(f"label selector requirement on {key!r}: {op} needs values")
        if op in ("Exists", "DoesNotExist") and values:
            raise SelectorError(f"label selector requirement on {key!r}: {op} takes no values")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise SelectorError(f"label selector requirement on {key!r}: unknown operator {op!r}")


_Requirement = tuple[str, str, tuple[str, ...]]


def _requirements(selector: LabelSelector | Mapping[str, Any]) -> list[_Requirement]:
    reqs: list[_Requirement]
    if isinstance(selector, LabelSelector):
        reqs = [(k, "In", (v,)) for k, v in selector.match_labels.items()]
        reqs += [(e.key, e.operator, tuple(e.values)) for e in selector.match_expressions]
        return reqs
    labels = selector.get("matchLabels") or {}
    exprs = selector.get("matchExpressions") or []
    reqs = [(str(k), "In", (str(v),)) for k, v in labels.items()]
    for e in exprs:
        reqs.append(
            (
                str(e.get("key")),
                str(e.get("operator")),
                tuple(str(v) for v in e.get("values") or ()),
            )
        )
    return reqs


def selector_matches(
    selector: LabelSelector | Mapping[str, Any] | None, labels: Mapping[str, Any] | None
) -> bool:
    """Kubernetes label selector semantics; None and an empty selector match everything.

    Accepts the spec model or its wire form (``matchLabels``/``matchExpressions``).
    """
    if selector is None:
        return True
    have = {str(k): scalar_text(v) for k, v in (labels or {}).items()}
    for key, op, values in _requirements(selector):
        present = key in have
        if op == "In":
            if not present or have[key] not in values:
                return False
        elif op == "NotIn":
            if present and have[key] in values:
                return False
        elif op == "Exists":
            if not present:
                return False
        elif op == "DoesNotExist":
            if present:
                return False
        else:
            return False  # an unknown operator never matches (check_watched reports it)
    return True


def namespace_labels_of(namespace: str, known: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """A namespace's labels, with the name label the API server always adds."""
    labels = dict(known.get(namespace) or {})
    labels.setdefault(NAMESPACE_NAME_LABEL, namespace)
    return labels


def collections_for(
    obj: Mapping[str, Any],
    watched: Mapping[str, WatchedResource],
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> list[str]:
    """Names (sorted) of the collections that would receive ``obj``.

    ``namespace_labels`` maps namespace name → labels. When it is None, namespace selectors
    are not applied (nothing is known to judge them by); when it is given, a namespace that
    is not in it has only its ``kubernetes.io/metadata.name`` label. Collections whose field
    selector does not parse match nothing (``check_watched`` reports them).
    """
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else ""
    out: list[str] = []
    for name, w in watched.items():
        if w.api_version != api_version or w.kind != kind:
            continue
        if w.label_selector is not None and not selector_matches(w.label_selector, labels):
            continue
        if w.field_selector:
            try:
                reqs = parse_field_selector(w.field_selector)
            except SelectorError:
                continue
            if not all(r.matches(obj) for r in reqs):
                continue
        if (
            w.namespace_selector is not None
            and namespace_labels is not None
            and namespace
            and not selector_matches(
                w.namespace_selector, namespace_labels_of(namespace, namespace_labels)
            )
        ):
            continue
        out.append(name)
    return sorted(out)
