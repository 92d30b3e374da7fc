"""Diagnostics for the parts of ``watchedResources`` that the store and matcher interpret.

The pydantic models check types; the meaning of a field path or a field selector is defined
here, so it is checked here too. Callers that build a store from a user's config run
:func:`check_watched` first and report its findings instead of catching exceptions; adapters
that receive raw documents run :func:`check_raw_watched` before anyone adopts the config, so a
config the store cannot index is refused before the runtime sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from controller.diagnostics import Diagnostic, Location, Phase, RuleId, make
from controller.resources.matching import SelectorError, check_label_selector, parse_field_selector
from controller.resources.paths import (
    FieldPath,
    FieldPathError,
    format_path,
    parse_path,
    strip_tree,
)
from controller.spec import WatchedResource
from controller.spec import format_path as spec_path_text

SpecPath = tuple[str | int, ...]
"""Where in the HAProxyTemplateConfig a finding is: ``("spec", "watchedResources", "x", ...)``."""

Locate = Callable[[SpecPath], Location | None]
"""Turns a spec path into a file location (the loader's line table); None when unknown."""

IDENTITY_PATHS: tuple[FieldPath, ...] = (("metadata", "name"), ("metadata", "namespace"))
"""The fields every stored object is keyed by, whatever ``indexBy`` says."""

DEFAULT_INDEX_BY: tuple[str, ...] = tuple(
    WatchedResource.model_fields["index_by"].get_default(call_default_factory=True)
)


def _e(rule: RuleId, path: SpecPath, message: str, locate: Locate | None) -> Diagnostic:
    where = locate(path) if locate is not None else None
    return make(rule, Phase.SPEC, f"{spec_path_text(path)}: {message}", location=where)


def _parsed(
    base: SpecPath, field: str, paths: Sequence[Any], locate: Locate | None
) -> tuple[list[tuple[int, FieldPath]], list[Diagnostic]]:
    out: list[Diagnostic] = []
    parsed: list[tuple[int, FieldPath]] = []
    for i, text in enumerate(paths):
        if not isinstance(text, str):
            continue  # a type error; the spec loader reports it
        try:
            parsed.append((i, parse_path(text)))
        except FieldPathError as exc:
            out.append(_e("E8010", (*base, field, i), str(exc), locate))
    return parsed, out


def _collection_paths(
    name: str, index_by: Sequence[Any], ignore_fields: Sequence[Any], locate: Locate | None
) -> list[Diagnostic]:
    """E8010 for paths that do not parse, and for ignore paths that would strip a key field.

    Ignoring ``metadata`` (or ``metadata.labels`` when indexing by a label) would remove the
    very fields objects are stored and looked up by: every object would land under an empty
    key and ``fetch()`` would find nothing, silently.
    """
    base: SpecPath = ("spec", "watchedResources", name)
    index, out = _parsed(base, "indexBy", index_by, locate)
    ignored, problems = _parsed(base, "ignoreFields", ignore_fields, locate)
    out += problems
    try:
        strip_tree([p for _, p in ignored])
    except FieldPathError as exc:
        out.append(_e("E8010", (*base, "ignoreFields"), str(exc), locate))
    needed = [*IDENTITY_PATHS, *(p for _, p in index)]
    for i, path in ignored:
        hit = next((n for n in needed if n[: len(path)] == path), None)
        if hit is not None:
            why = "the store keys objects by" if hit in IDENTITY_PATHS else "indexBy names"
            out.append(
                _e(
                    "E8010",
                    (*base, "ignoreFields", i),
                    f"ignoring {format_path(path)!r} would remove {format_path(hit)}, which "
                    f"{why}; ignore narrower fields",
                    locate,
                )
            )
    return out


def _field_selector(name: str, selector: Any, locate: Locate | None) -> list[Diagnostic]:
    if not isinstance(selector, str) or not selector:
        return []
    try:
        parse_field_selector(selector)
    except SelectorError as exc:
        path = ("spec", "watchedResources", name, "fieldSelector")
        return [_e("E8012", path, str(exc), locate)]
    return []


def check_paths(
    collections: Mapping[str, WatchedResource], locate: Locate | None = None
) -> list[Diagnostic]:
    """E8010 for every indexBy / ignoreFields path that does not parse or strips a key."""
    out: list[Diagnostic] = []
    for name, w in collections.items():
        out += _collection_paths(name, w.index_by, w.ignore_fields, locate)
    return out


def check_watched(
    collections: Mapping[str, WatchedResource], locate: Locate | None = None
) -> list[Diagnostic]:
    """Everything :func:`check_paths` finds, plus E8012 for selectors that cannot work.

    ``locate`` puts each finding on its line (``htc render`` passes the loader's line table).
    """
    out = check_paths(collections, locate)
    for name, w in collections.items():
        out += _field_selector(name, w.field_selector, locate)
        for field, sel in (
            ("labelSelector", w.label_selector),
            ("namespaceSelector", w.namespace_selector),
        ):
            if sel is None:
                continue
            try:
                check_label_selector(sel)
            except SelectorError as exc:
                path = ("spec", "watchedResources", name, field)
                out.append(_e("E8012", path, str(exc), locate))
    return out


def check_raw_watched(doc: Mapping[str, Any]) -> list[Diagnostic]:
    """E8010 / E8012 for the paths and field selectors of a raw HAProxyTemplateConfig document.

    Looks only at what it understands and skips anything malformed: the spec loader reports
    shapes and types.
    """
    spec = doc.get("spec")
    watched = spec.get("watchedResources") if isinstance(spec, Mapping) else None
    if not isinstance(watched, Mapping):
        return []
    out: list[Diagnostic] = []
    for name, entry in watched.items():
        if not isinstance(entry, Mapping):
            continue
        index_by = entry.get("indexBy", list(DEFAULT_INDEX_BY))
        ignore_fields = entry.get("ignoreFields", [])
        out += _collection_paths(
            str(name),
            list(index_by) if isinstance(index_by, list | tuple) else [],
            list(ignore_fields) if isinstance(ignore_fields, list | tuple) else [],
            None,
        )
        out += _field_selector(str(name), entry.get("fieldSelector"), None)
    return out
