"""Kubernetes manifests from YAML/JSON files and directories, with file:line for each object.

The local adapters feed the store from files, so every problem must point at a file and line
and never raise: a bad file yields E8002 (and none of its objects), an object without
identity E8003, and every other file still loads. YAML is read by the config loader's reader,
the way the API server sees it: timestamps stay strings, duplicate keys and alias bombs are
refused.

Directories are read recursively in sorted order; hidden entries (``.git``, editor swap
files, and the ``..data`` links of a mounted ConfigMap, whose targets are visible anyway)
are skipped. A file named explicitly is always read, whatever its suffix.

Large inputs (``htc validate`` over thousands of objects) take a fast path: libyaml composes
the nodes, and one walk builds each document's value, already frozen for the store when the
caller asks (see :func:`load_manifests`). Anything that path is not sure about (anchors, tags,
merge keys, duplicate keys, a YAML error) makes it read the file again the careful way, so
values and diagnostics are the careful reader's (frozen afterwards when the caller asked).
"""

from __future__ import annotations

import difflib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller.diagnostics import Diagnostic, Location, Phase, RuleId, make
from controller.resources.collection import object_ref
from controller.resources.frozen import SHARE_TEXT_MAX, FrozenDict, freeze, share, share_text
from controller.spec import MAX_NODES, PathKey, WatchedResource, read_documents
from controller.spec.loader import _Loader as _ConfigLoader

SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True, slots=True)
class Manifest:
    """One object and where it was defined (1-based line of the document or List item)."""

    obj: dict[str, Any]
    file: Path
    line: int


def _diag(rule: RuleId, file: Path, line: int | None, message: str) -> Diagnostic:
    return make(rule, Phase.SPEC, message, location=Location(file=str(file), line=line))


def iter_manifest_files(root: Path) -> Iterator[Path]:
    """Manifest files under ``root`` in sorted order; hidden names are skipped.

    Symlinked directories are followed once (loops are cut by real path).
    """
    seen: set[str] = set()

    def walk(d: Path) -> Iterator[Path]:
        real = os.path.realpath(d)
        if real in seen:
            return
        seen.add(real)
        try:
            names = sorted(os.listdir(d))
        except OSError:
            return
        for name in names:
            if name.startswith("."):
                continue
            p = d / name
            if p.is_dir():
                yield from walk(p)
            elif p.suffix.lower() in SUFFIXES and p.is_file():
                yield p

    yield from walk(root)


def load_manifests(
    paths: Sequence[Path], *, frozen: bool = False
) -> tuple[list[Manifest], list[Diagnostic]]:
    """Every object in ``paths`` (files or directories), and every problem found. Never raises.

    ``frozen``: objects come as the store keeps them (read-only mappings, tuples, interned
    keys and short strings), so that storing them does not copy them again and a caller
    that keeps what it read (``htc local``'s directory adapter) shares it with the store
    instead of holding a second copy; for callers that only store or read them.
    """
    manifests: list[Manifest] = []
    diagnostics: list[Diagnostic] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            files: list[Path] = list(iter_manifest_files(path))
        else:
            files = [path]
        for f in files:
            found, problems = load_file(f, frozen=frozen)
            manifests += found
            diagnostics += problems
    return manifests, diagnostics


def load_file(path: Path, *, frozen: bool = False) -> tuple[list[Manifest], list[Diagnostic]]:
    """The objects of one file and its problems. Never raises (``frozen``: see
    :func:`load_manifests`)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return [], [_diag("E8002", path, None, f"cannot read: {exc.strerror or exc}")]
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return [], [_diag("E8002", path, None, f"not UTF-8 text: {exc.reason}")]
    if path.suffix.lower() == ".json":
        return parse_json(text, path)
    return parse_yaml(text, path, frozen=frozen)


def parse_json(text: str, file: Path) -> tuple[list[Manifest], list[Diagnostic]]:
    """One JSON document (an object or a List); duplicate keys are refused as in YAML."""
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        reason = getattr(exc, "msg", None) or str(exc)
        return [], [_diag("E8002", file, line, f"invalid JSON: {reason}")]
    out: list[Manifest] = []
    diags: list[Diagnostic] = []
    _collect(doc, {}, (), file, 1, out, diags)
    return out, diags


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse_yaml(
    text: str, file: Path, *, frozen: bool = False
) -> tuple[list[Manifest], list[Diagnostic]]:
    """All documents of a YAML stream, or none and E8002 when any part is broken.

    Reading is shared with the config loader (same line numbers, duplicate-key and alias
    checks), and is all-or-nothing per file: a half-saved file must not look like a file
    from which objects were removed. Plain streams take the fast path (:func:`_fast_read`).
    """
    fast = _fast_read(text, frozen)
    if fast is not None:
        docs = fast
    else:
        docs, problems = read_documents(text, str(file))
        if problems:
            return [], problems
        if frozen:
            docs = [(freeze(doc), lines) for doc, lines in docs]
    out: list[Manifest] = []
    diags: list[Diagnostic] = []
    for doc, lines in docs:
        _collect(doc, lines, (), file, lines[()], out, diags)
    return out, diags


def _collect(
    doc: Any,
    lines: Mapping[PathKey, int],
    at: PathKey,
    file: Path,
    line: int,
    out: list[Manifest],
    diags: list[Diagnostic],
    defaults: tuple[str, str] | None = None,
) -> None:
    if doc is None:
        return  # an empty document (e.g. a trailing ---)
    if not isinstance(doc, dict):
        diags.append(
            _diag(
                "E8003",
                file,
                line,
                f"a manifest must be a mapping, not a {_kind_of(doc)}",
            )
        )
        return
    if defaults is not None:
        api_version, kind = defaults
        full = {"apiVersion": api_version, "kind": kind, **doc}
        doc = FrozenDict(full) if isinstance(doc, FrozenDict) else full
    kind = doc.get("kind")
    if (
        isinstance(kind, str)
        and kind.endswith("List")
        and isinstance(doc.get("items"), list | tuple)
    ):
        # Items of a typed list (IngressList) may omit apiVersion/kind; a plain List may not.
        item_defaults = None
        if kind != "List" and isinstance(doc.get("apiVersion"), str):
            item_defaults = (doc["apiVersion"], kind[: -len("List")])
        for i, item in enumerate(doc["items"]):
            path = (*at, "items", i)
            item_line = lines.get(path, line)
            _collect(item, lines, path, file, item_line, out, diags, item_defaults)
        return
    problem = _identity_problem(doc)
    if problem:
        diags.append(_diag("E8003", file, line, problem))
        return
    out.append(Manifest(doc, file, line))


def _identity_problem(doc: Mapping[str, Any]) -> str | None:
    missing = [f for f in ("apiVersion", "kind") if not isinstance(doc.get(f), str) or not doc[f]]
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping):
        missing.append("metadata.name")
    else:
        name = meta.get("name")
        if name is not None and not isinstance(name, str):
            # YAML reads `name: 123` as a number; the API server refuses it the same way.
            return f"metadata.name must be a string, not the {_kind_of(name)} {name!r}"
        if not name:
            missing.append("metadata.name")
        ns = meta.get("namespace")
        if ns is not None and not isinstance(ns, str):
            return "metadata.namespace must be a string"
    if missing:
        what = doc.get("kind") if isinstance(doc.get("kind"), str) else "object"
        return f"{what} lacks {', '.join(missing)}"
    return None


def _kind_of(value: Any) -> str:
    return {
        list: "list",
        tuple: "list",
        str: "string",
        int: "number",
        float: "number",
        bool: "boolean",
    }.get(type(value), type(value).__name__)


def unwatched_note(m: Manifest, watched: Mapping[str, WatchedResource]) -> Diagnostic:
    """I8014 for an object no collection watches, worded the same by every command: its kind,
    ``namespace/name`` and apiVersion, and the watched kind it likely misspells."""
    obj = m.obj
    raw = obj.get("metadata")
    meta: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    name = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
    kind = str(obj.get("kind"))
    kinds = sorted({w.kind for w in watched.values()})
    hint = ""
    if kind not in kinds:
        close = difflib.get_close_matches(kind, kinds, n=1, cutoff=0.75)
        if close:
            hint = f"; is kind: {kind} a misspelling of {close[0]}?"
    return make(
        "I8014",
        Phase.SPEC,
        f"{kind} {name or '(no name)'} ({obj.get('apiVersion')}) matches no watched "
        f"collection{hint}",
        location=Location(file=str(m.file), line=m.line),
        object=object_ref(obj),
    )


# --- the fast path ---------------------------------------------------------------------------

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_NULL = "tag:yaml.org,2002:null"
_SCALARS = frozenset({"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})
_intern = sys.intern


class _Unsure(Exception):
    """The fast path does not build this document; the careful reader does."""


class _FastLoader(_ConfigLoader):
    """The config loader (libyaml, no implicit timestamps) with a resolver cut to what the
    composer asks of it: safe YAML has no path resolvers, so descending and ascending are
    no-ops, and a plain scalar whose first character starts no implicit type is a string
    without trying any pattern (most of a manifest: names, keys, addresses)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode:
            if implicit[0]:
                resolvers = self.yaml_implicit_resolvers.get(value[:1])
                if resolvers:
                    for tag, regexp in resolvers:
                        if regexp.match(value):
                            return str(tag)
            return _STR
        return _SEQ if kind is yaml.SequenceNode else _MAP

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None


_FAST = issubclass(_ConfigLoader, getattr(yaml, "CSafeLoader", ()))


def _fast_read(text: str, frozen: bool) -> list[tuple[Any, dict[PathKey, int]]] | None:
    """The documents of ``text`` with the lines manifests need (each document's, and each
    ``items`` entry's), or None when the careful reader must read it.

    Without ``&`` there are no anchors, hence no aliases: every node is visited once, so no
    alias bomb or cycle can occur, and a document spanning fewer than two characters per
    node of ``MAX_NODES`` cannot exceed that bound either.
    """
    if not _FAST or "&" in text:
        return None
    scalars = _ConfigLoader.yaml_constructors
    build_map: Any = (lambda d: share(FrozenDict(d))) if frozen else dict
    build_seq: Any = (lambda items: share(tuple(items))) if frozen else list

    def value(node: Any) -> Any:
        cls = node.__class__
        if cls is yaml.ScalarNode:
            tag = node.tag
            if tag == _STR:
                v = node.value
                # Shared as ``freeze`` shares, not interned: the interpreter's table never
                # shrinks, and most short values are names and addresses no other object
                # repeats (at 10,000 objects per kind its table grew by 3.8 MB for them).
                return share_text(v) if frozen and len(v) <= SHARE_TEXT_MAX else v
            if tag == _NULL:
                return None
            if tag not in _SCALARS:
                raise _Unsure
            try:
                return scalars[tag](loader, node)
            except Exception:
                raise _Unsure from None
        if cls is yaml.MappingNode:
            if node.tag != _MAP:
                raise _Unsure
            pairs = node.value
            out: dict[str, Any] = {}
            for key_node, value_node in pairs:
                if key_node.__class__ is not yaml.ScalarNode or key_node.tag != _STR:
                    raise _Unsure
                key = key_node.value
                out[_intern(key) if frozen else key] = value(value_node)
            if len(out) != len(pairs):
                raise _Unsure  # a duplicate key: the careful reader says where
            return build_map(out)
        if cls is yaml.SequenceNode and node.tag == _SEQ:
            return build_seq([value(item) for item in node.value])
        raise _Unsure

    docs: list[tuple[Any, dict[PathKey, int]]] = []
    loader = _FastLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            if node.end_mark.index - node.start_mark.index >= 2 * MAX_NODES:
                return None
            data = value(node)
            if data is not None:
                lines: dict[PathKey, int] = {(): node.start_mark.line + 1}
                _item_lines(node, (), lines)
                docs.append((data, lines))
    except (_Unsure, yaml.YAMLError, RecursionError):
        return None
    finally:
        loader.dispose()
    return docs


def _item_lines(node: Any, at: PathKey, out: dict[PathKey, int]) -> None:
    """The line of each ``items`` entry of a List (and of Lists inside it)."""
    if node.__class__ is not yaml.MappingNode:
        return
    for key_node, value_node in node.value:
        if key_node.value == "items" and value_node.__class__ is yaml.SequenceNode:
            for i, item in enumerate(value_node.value):
                out[(*at, "items", i)] = item.start_mark.line + 1
                _item_lines(item, (*at, "items", i), out)
