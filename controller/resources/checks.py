"""Diagnostics for the parts of ``watchedResources`` that the store and matcher interpret.

The pydantic models check types; the meaning of a field path or a field selector is defined
here, so it is checked here too. Callers that build a store from a user's config run
:func:`check_watched` first and report its findings instead of catching exceptions; adapters
that receive raw documents run :func:`check_raw_watched` before anyone adopts the config, so a
config the store cannot index is refused before the runtime sees it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.diagnostics import Diagnostic, Phase, make
from controller.resources.matching import SelectorError, check_label_selector, parse_field_selector
from controller.resources.paths import FieldPathError, parse_path, strip_tree
from controller.spec.models import WatchedResource


def _paths(name: str, field: str, paths: Sequence[Any]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    parsed = []
    for i, text in enumerate(paths):
        if not isinstance(text, str):
            continue  # a type error; the spec loader reports it
        try:
            parsed.append(parse_path(text))
        except FieldPathError as exc:
            out.append(
                make("E8010", Phase.SPEC, f"spec.watchedResources.{name}.{field}[{i}]: {exc}")
            )
    if field == "ignoreFields":
        try:
            strip_tree(parsed)
        except FieldPathError as exc:
            out.append(make("E8010", Phase.SPEC, f"spec.watchedResources.{name}.{field}: {exc}"))
    return out


def _field_selector(name: str, selector: Any) -> list[Diagnostic]:
    if not isinstance(selector, str) or not selector:
        return []
    try:
        parse_field_selector(selector)
    except SelectorError as exc:
        return [make("E8012", Phase.SPEC, f"spec.watchedResources.{name}.fieldSelector: {exc}")]
    return []


def check_paths(collections: Mapping[str, WatchedResource]) -> list[Diagnostic]:
    """E8010 for every indexBy / ignoreFields path that does not parse."""
    out: list[Diagnostic] = []
    for name, w in collections.items():
        out += _paths(name, "indexBy", w.index_by)
        out += _paths(name, "ignoreFields", w.ignore_fields)
    return out


def check_watched(collections: Mapping[str, WatchedResource]) -> list[Diagnostic]:
    """Everything :func:`check_paths` finds, plus E8012 for selectors that cannot work."""
    out = check_paths(collections)
    for name, w in collections.items():
        out += _field_selector(name, w.field_selector)
        for field, sel in (
            ("labelSelector", w.label_selector),
            ("namespaceSelector", w.namespace_selector),
        ):
            if sel is None:
                continue
            try:
                check_label_selector(sel)
            except SelectorError as exc:
                out.append(
                    make("E8012", Phase.SPEC, f"spec.watchedResources.{name}.{field}: {exc}")
                )
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
        for field in ("indexBy", "ignoreFields"):
            paths = entry.get(field)
            if isinstance(paths, list):
                out += _paths(str(name), field, paths)
        out += _field_selector(str(name), entry.get("fieldSelector"))
    return out
