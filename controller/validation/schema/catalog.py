"""The HAProxy keyword catalog: base description plus per-family deltas, as typed specs.

``data/base.json`` describes the oldest supported family; ``data/deltas.json`` lists what each
later family adds, deprecates, removes or changes. Applying the deltas in order yields one
:class:`Family` per supported version family — the single source the JSON Schemas, the
argument normaliser and the ``haproxy -dKall`` cross-check are all derived from, so a fact is
written down exactly once.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from controller.validation.schema.grammar import (
    ArgSpec,
    OptionSpec,
    parse_args,
    parse_option_type,
)

PROXY_SECTIONS = ("defaults", "frontend", "listen", "backend")
_MASK_POS = {"defaults": 0, "frontend": 1, "listen": 2, "backend": 3}
_MASK_CHAR = {"defaults": "d", "frontend": "f", "listen": "l", "backend": "b"}


class CatalogError(ValueError):
    """The bundled data is inconsistent (a bug caught by the tests, never by users)."""


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """When something was deprecated or removed, and what to use instead."""

    since: str | None = None
    before: str | None = None
    """Set instead of ``since`` when only "gone before <version>" is known."""
    use: str | None = None

    @classmethod
    def of(cls, raw: Mapping[str, Any] | None) -> Lifecycle | None:
        if raw is None:
            return None
        return cls(raw.get("since"), raw.get("before"), raw.get("use"))

    def when(self) -> str:
        if self.since:
            return f"since HAProxy {self.since}"
        return f"before HAProxy {self.before}" if self.before else "in an earlier version"

    def as_json(self) -> dict[str, str]:
        out = {"since": self.since, "before": self.before, "use": self.use}
        return {k: v for k, v in out.items() if v}


@dataclass(frozen=True, slots=True)
class KeywordSpec:
    """One keyword (or compound keyword such as ``timeout server``) of one section group."""

    key: str
    group: str
    kind: str = "keyword"
    """``keyword``, ``option`` (``option <name>``) or ``action`` (``http-request <action>``)."""
    args: tuple[ArgSpec, ...] = ()
    options: str | None = None
    cond: bool = False
    parser: str | None = None
    sections: str | None = None
    """Proxy capability mask ``dflb``: ``n`` = named defaults only, ``w`` = ignored (with a
    warning) in defaults, ``-`` = not allowed."""
    wrong_section: str = "warn"
    core: bool = False
    feature: str | None = None
    prefixes: tuple[str, ...] = ()
    """Accepted ``no``/``default`` prefixes (HAProxy supports them for few keywords)."""
    experimental: bool = False
    examples: tuple[str, ...] = ()
    since: str = ""
    deprecated: Lifecycle | None = None
    removed: Lifecycle | None = None

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(self.key.split(" "))

    def placement(self, section: str, *, named: bool) -> str:
        """``ok``, ``warn`` (HAProxy ignores it there) or ``error`` for a proxy section."""
        if self.sections is None or section not in _MASK_POS:
            return "ok"
        c = self.sections[_MASK_POS[section]]
        if section == "defaults":
            if c == "d" or (c == "n" and named):
                return "ok"
            return "warn" if c == "w" else "error"
        if c == _MASK_CHAR[section]:
            return "ok"
        return "error" if self.wrong_section == "error" or section == "listen" else "warn"


@dataclass(frozen=True, slots=True)
class OptionEntry:
    """An option of a ``bind``/``server``/``cookie`` line, with its lifecycle."""

    spec: OptionSpec
    core: bool = False
    feature: str | None = None
    since: str = ""
    deprecated: Lifecycle | None = None
    removed: Lifecycle | None = None


@dataclass(frozen=True, slots=True)
class SectionSpec:
    keyword: str
    group: str
    name: str
    """``none``, ``optional`` or ``required``."""
    open: bool = False
    """The schema does not describe this section's keywords; they are not checked."""
    since: str = ""
    deprecated: Lifecycle | None = None


@dataclass(frozen=True)
class Family:
    """Everything known about one version family (``2.6``, ``2.8``, ``3.0``, ``3.2``)."""

    name: str
    sections: Mapping[str, SectionSpec]
    keywords: Mapping[str, Mapping[str, KeywordSpec]]
    """group → key → spec (compound keys such as ``http-request set-header`` included)."""
    heads: Mapping[str, Mapping[str, KeywordSpec]]
    """group → rule-set head (``http-request``, ``tcp-request content``) → its placement."""
    option_tables: Mapping[str, Mapping[str, OptionEntry]]
    source: str = ""
    data_hash: str = field(default="", compare=False)
    timer_trailing_error: bool = False
    """Characters after a timer's unit (``inter 1s[``) are an error, not HAProxy's warning
    (setting ``timerTrailingCharacters``: ``warn`` or ``error``)."""


def _read(name: str) -> dict[str, Any]:
    text = (
        resources.files("controller.validation.schema").joinpath("data").joinpath(name).read_text()
    )
    data = json.loads(text)
    if not isinstance(data, dict):
        raise CatalogError(f"{name} must hold a JSON object")
    return data


@cache
def data_hash() -> str:
    """sha256 over the bundled data files: part of every schema fingerprint."""
    h = hashlib.sha256()
    for name in ("base.json", "deltas.json"):
        h.update(
            resources.files("controller.validation.schema")
            .joinpath("data")
            .joinpath(name)
            .read_bytes()
        )
    return h.hexdigest()


def _table(raw: dict[str, Any], table: str) -> dict[str, Any]:
    """Resolve a delta table name to the dict it edits, creating keyword groups on demand."""
    if table == "sections":
        return raw["sections"]  # type: ignore[no-any-return]
    if table == "proxyOptions":
        return raw["proxyOptions"]  # type: ignore[no-any-return]
    if table.startswith("optionTables."):
        return raw["optionTables"].setdefault(table.split(".", 1)[1], {})  # type: ignore[no-any-return]
    if table.startswith("actions."):
        return raw["actions"].setdefault(table.split(".", 1)[1], {})  # type: ignore[no-any-return]
    return raw["keywords"].setdefault(table, {})  # type: ignore[no-any-return]


def _entry(raw: dict[str, Any], address: str) -> dict[str, Any]:
    table, sep, name = address.partition("/")
    if not sep:
        raise CatalogError(f"delta address {address!r} must be '<table>/<name>'")
    entries = _table(raw, table)
    if name not in entries:
        raise CatalogError(f"delta address {address!r} names nothing")
    entry = entries[name]
    if isinstance(entry, str):
        entry = entries[name] = {"type": entry}
    return entry  # type: ignore[no-any-return]


def _apply(raw: dict[str, Any], family: str, delta: Mapping[str, Any]) -> None:
    for table, entries in delta.get("add", {}).items():
        target = _table(raw, table)
        for name, spec in entries.items():
            if name in target:
                raise CatalogError(f"{family}: {table}/{name} is added but already exists")
            spec = {"type": spec} if isinstance(spec, str) else dict(spec)
            spec.setdefault("_since", family)
            target[name] = spec
    for address, lifecycle in delta.get("deprecate", {}).items():
        _entry(raw, address)["deprecated"] = lifecycle
    for address, lifecycle in delta.get("remove", {}).items():
        _entry(raw, address)["removed"] = lifecycle
    for address, changes in delta.get("change", {}).items():
        _entry(raw, address).update(changes)
    raw["settings"].update(delta.get("settings", {}))


def _examples(spec: Mapping[str, Any]) -> tuple[str, ...]:
    ex = spec.get("example")
    if ex is None:
        return ()
    return (ex,) if isinstance(ex, str) else tuple(ex)


def _keyword(key: str, group: str, spec: Mapping[str, Any], base: str, **over: Any) -> KeywordSpec:
    fields: dict[str, Any] = {
        "key": key,
        "group": group,
        "args": parse_args(spec.get("args", "")),
        "options": spec.get("options"),
        "cond": bool(spec.get("cond", False)),
        "parser": spec.get("parser"),
        "sections": spec.get("sections"),
        "wrong_section": spec.get("wrongSection", "warn"),
        "core": bool(spec.get("core", False)),
        "feature": spec.get("feature"),
        "prefixes": _prefixes(spec.get("negatable", False)),
        "experimental": bool(spec.get("experimental", False)),
        "examples": _examples(spec),
        "since": spec.get("_since", base),
        "deprecated": Lifecycle.of(spec.get("deprecated")),
        "removed": Lifecycle.of(spec.get("removed")),
    }
    fields.update(over)
    if fields["sections"] is not None and len(fields["sections"]) != 4:
        raise CatalogError(f"{group}/{key}: sections mask must have 4 characters")
    return KeywordSpec(**fields)


def _later(a: str, b: str) -> str:
    return a if version_key(a) >= version_key(b) else b


def _prefixes(value: Any) -> tuple[str, ...]:
    """``negatable`` is ``true`` (``no`` and ``default``), ``false`` or an explicit list."""
    if value is True:
        return ("no", "default")
    if not value:
        return ()
    return tuple(value)


def _build(name: str, raw: Mapping[str, Any], base: str, source: str) -> Family:
    registered_prefixes = raw["settings"].get("registeredOptionPrefixes", ["no", "default"])
    sections = {
        kw: SectionSpec(
            keyword=kw,
            group=s["group"],
            name=s["name"],
            open=bool(s.get("open", False)),
            since=s.get("_since", base),
            deprecated=Lifecycle.of(s.get("deprecated")),
        )
        for kw, s in raw["sections"].items()
    }
    keywords: dict[str, dict[str, KeywordSpec]] = {}
    heads: dict[str, dict[str, KeywordSpec]] = {}
    for group, entries in raw["keywords"].items():
        out = keywords.setdefault(group, {})
        for key, spec in entries.items():
            if "actions" in spec:
                head = _keyword(key, group, spec, base)
                heads.setdefault(group, {})[key] = head
                for action, aspec in raw["actions"].get(spec["actions"], {}).items():
                    akey = f"{key} {action}"
                    out[akey] = _keyword(
                        akey,
                        group,
                        aspec,
                        base,
                        kind="action",
                        cond=True,
                        sections=aspec.get("sections", head.sections),
                        wrong_section=aspec.get("wrongSection", head.wrong_section),
                        since=_later(head.since, aspec.get("_since", base)),
                    )
                continue
            out[key] = _keyword(key, group, spec, base)
    proxy = keywords.setdefault("proxy", {})
    for opt, spec in raw["proxyOptions"].items():
        key = f"option {opt}"
        core = bool(spec.get("core", False))
        proxy[key] = _keyword(
            key,
            "proxy",
            spec,
            base,
            kind="option",
            prefixes=_prefixes(spec.get("negatable", registered_prefixes if not core else False)),
        )
    tables: dict[str, dict[str, OptionEntry]] = {}
    for table, options in raw["optionTables"].items():
        out_t = tables.setdefault(table, {})
        for opt, spec in options.items():
            spec = {"type": spec} if isinstance(spec, str) else spec
            out_t[opt] = OptionEntry(
                spec=parse_option_type(opt, spec["type"]),
                core=bool(spec.get("core", False)),
                feature=spec.get("feature"),
                since=spec.get("_since", base),
                deprecated=Lifecycle.of(spec.get("deprecated")),
                removed=Lifecycle.of(spec.get("removed")),
            )
    trailing = raw["settings"].get("timerTrailingCharacters", "warn")
    if trailing not in ("warn", "error"):
        raise CatalogError(f"{name}: timerTrailingCharacters must be 'warn' or 'error'")
    return Family(
        name,
        sections,
        keywords,
        heads,
        tables,
        source,
        data_hash(),
        timer_trailing_error=trailing == "error",
    )


@cache
def catalog() -> tuple[Family, ...]:
    """All supported families, oldest first."""
    base = _read("base.json")
    deltas = _read("deltas.json")
    base_family = base["family"]
    raw: dict[str, Any] = {
        "sections": copy.deepcopy(base["sections"]),
        "keywords": copy.deepcopy(base["keywords"]),
        "proxyOptions": copy.deepcopy(base["proxyOptions"]),
        "actions": copy.deepcopy(base["actions"]),
        "optionTables": copy.deepcopy(base["optionTables"]),
        "settings": copy.deepcopy(base.get("settings", {})),
    }
    families = [_build(base_family, raw, base_family, "base.json")]
    for name in sorted((k for k in deltas if not k.startswith("$")), key=version_key):
        if version_key(name) <= version_key(families[-1].name):
            raise CatalogError(f"delta {name} is not newer than {families[-1].name}")
        _apply(raw, name, deltas[name])
        families.append(_build(name, raw, base_family, deltas[name].get("source", "")))
    return tuple(families)


def family(name: str) -> Family:
    for fam in catalog():
        if fam.name == name:
            return fam
    raise KeyError(name)


def first_family_with(group: str, key: str) -> str | None:
    """The oldest family that knows ``key`` in ``group`` and has not removed it."""
    for fam in catalog():
        spec = fam.keywords.get(group, {}).get(key)
        if spec is not None and spec.removed is None:
            return fam.name
    return None


def first_family_with_section(keyword: str) -> str | None:
    for fam in catalog():
        if keyword in fam.sections:
            return fam.name
    return None
