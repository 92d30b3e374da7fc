"""Turn a HAProxyTemplateConfig document into a model, or into diagnostics that point at the field.

Two doors lead here: ``load_config`` for files (``htc render``, ``htc local``) and
``parse_config`` for documents that arrive already parsed (operator events, admission reviews).
Both validate the wire form the way the API server does: camelCase names only, no coercion of
strings into booleans or numbers, durations only as strings. A file that ``htc`` accepts is thus
one that ``kubectl apply`` accepts, and the reverse.

Errors never escape as exceptions. Each pydantic error becomes one ``E8001`` diagnostic whose
message starts with the wire path (``spec.watchedResources.ingresses.indexBy: ...``) and whose
location is the YAML line of that field, found through PyYAML's composed node graph.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from controller.diagnostics import Diagnostic, Location, ObjectRef, Phase, make
from controller.spec.crd import prune_nulls
from controller.spec.errors import describe_error, format_path
from controller.spec.models import FULL_API_VERSION, KIND, HAProxyTemplateConfig

PathKey = tuple[str | int, ...]
"""A path into a document: mapping keys and sequence indices."""

__all__ = [
    "Locate",
    "PathKey",
    "load_config",
    "load_config_located",
    "no_config_kind",
    "not_exactly_one",
    "parse_config",
    "read_documents",
    "yaml_error",
]


_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # type: ignore[misc]
    """SafeLoader without implicit timestamps, on libyaml when PyYAML was built with it.

    Kubernetes converts YAML to JSON, where an unquoted ``2024-05-01T12:00:00Z`` stays a string;
    PyYAML would turn it into a datetime and a string field would then reject it. libyaml
    (``CSafeLoader``) composes the node graph in C, with the same marks, so line tracking,
    duplicate keys and alias limits work unchanged at seven times the speed (6,000 manifests:
    7.1 s in pure Python, 1.0 s).
    """


class _PyLoader(yaml.SafeLoader):
    """The pure-Python reader, used again on a file libyaml refused: its error messages are
    the more helpful ones (``found character '\\t' that cannot start any token``)."""


_Loader.yaml_implicit_resolvers = _PyLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


MAX_NODES = 500_000
"""Node visits per document, aliases counted each time: real configs stay far below; an alias
bomb (a few lines expanding to billions of nodes) is stopped here instead of exhausting memory."""


class _BadDocument(Exception):
    """A document YAML accepts but Kubernetes would not: duplicate keys, alias bombs, cycles."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message, self.line = message, line


def _index_lines(
    node: yaml.Node, path: PathKey, out: dict[PathKey, int], stack: set[int], budget: list[int]
) -> None:
    """Record the 1-based line of every mapping key and sequence item below ``node``.

    Runs on the composed graph before construction, so merge keys (``<<``) are still unexpanded
    and an explicit key overriding a merged one is not mistaken for a duplicate.
    """
    budget[0] -= 1
    if budget[0] < 0:
        raise _BadDocument("document too large (alias expansion?)", node.start_mark.line + 1)
    if id(node) in stack:
        raise _BadDocument("recursive alias", node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        stack.add(id(node))
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key, line = str(key_node.value), key_node.start_mark.line + 1
            if key in seen and key != "<<":
                raise _BadDocument(
                    f"duplicate key {key!r} (first defined at line {seen[key]})", line
                )
            seen[key] = line
            out[(*path, key)] = line
            _index_lines(value_node, (*path, key), out, stack, budget)
        stack.discard(id(node))
    elif isinstance(node, yaml.SequenceNode):
        stack.add(id(node))
        for i, item in enumerate(node.value):
            out[(*path, i)] = item.start_mark.line + 1
            _index_lines(item, (*path, i), out, stack, budget)
        stack.discard(id(node))


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_SCALAR_TAGS = frozenset(
    {"tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int"}
    | {"tag:yaml.org,2002:float"}
)


_NOT_PLAIN = object()


class _NotPlain(Exception):
    """The document needs PyYAML's constructor (merge keys, other tags, odd keys)."""


def _plain(loader: Any, node: yaml.Node) -> Any:
    """The value of a document made of maps, lists, strings, numbers, booleans and nulls —
    what manifests are — built straight from the node graph: PyYAML's generic constructor
    spends most of a large file's loading time on bookkeeping such documents do not need.
    Anything else raises :class:`_NotPlain` and takes the generic path (same values)."""
    tag = node.tag
    if isinstance(node, yaml.ScalarNode):
        if tag == _STR:
            return node.value
        if tag in _SCALAR_TAGS:
            try:
                return loader.yaml_constructors[tag](loader, node)
            except Exception:  # an explicit tag on a bad value (!!int abc): the generic path
                raise _NotPlain from None
        raise _NotPlain
    if isinstance(node, yaml.MappingNode):
        if tag != _MAP:
            raise _NotPlain
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _plain(loader, key_node)
            if key == "<<" or (not isinstance(key, (str, int, float, bool)) and key is not None):
                raise _NotPlain
            out[key] = _plain(loader, value_node)
        return out
    if isinstance(node, yaml.SequenceNode) and tag == _SEQ:
        return [_plain(loader, item) for item in node.value]
    raise _NotPlain


def read_documents(
    text: str, file: str
) -> tuple[list[tuple[Any, dict[PathKey, int]]], list[Diagnostic]]:
    """Parse every YAML document of ``text`` with a line index per document.

    Exposed for other file readers (resource manifests) that want the same line-accurate errors.
    Empty documents are dropped. A syntax error or duplicate key stops reading and yields
    ``E8002``; documents before it are not returned, since a half-read file must not be used.
    """
    return _read(text, file, _Loader)


def _read(
    text: str, file: str, loader_class: Any
) -> tuple[list[tuple[Any, dict[PathKey, int]]], list[Diagnostic]]:
    docs: list[tuple[Any, dict[PathKey, int]]] = []
    loader = loader_class(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            lines: dict[PathKey, int] = {(): node.start_mark.line + 1}
            _index_lines(node, (), lines, set(), [MAX_NODES])
            try:
                data = _plain(loader, node)
            except _NotPlain:
                data = _NOT_PLAIN
            if data is not _NOT_PLAIN:
                if data is not None:
                    docs.append((data, lines))
                continue
            try:
                data = loader.construct_document(node)
            except yaml.YAMLError:
                raise
            except Exception as e:  # explicit tags on bad scalars (!!int abc) raise plain errors
                raise _BadDocument(f"cannot read a tagged value: {e}", lines[()]) from e
            if data is not None:
                docs.append((data, lines))
    except yaml.YAMLError as e:
        if loader_class is not _PyLoader:
            return _read(text, file, _PyLoader)  # rare: worth the slower, clearer reading
        if isinstance(e, yaml.MarkedYAMLError):
            return [], [yaml_error(e, file)]
        return [], [make("E8002", Phase.SPEC, str(e), location=Location(file=file))]
    except RecursionError:
        msg = "nesting too deep to read"
        return [], [make("E8002", Phase.SPEC, msg, location=Location(file=file))]
    except _BadDocument as e:
        loc = Location(file=file, line=e.line)
        return [], [make("E8002", Phase.SPEC, e.message, location=loc)]
    finally:
        loader.dispose()
    return docs, []


def yaml_error(e: yaml.MarkedYAMLError, file: str) -> Diagnostic:
    """E8002 at the line and column where the YAML went wrong, naming where the construct it
    was reading started (``while parsing a flow sequence``, line 10, column 9): the start is
    often the real mistake, an unclosed bracket or quote many lines up."""
    mark = e.problem_mark or e.context_mark
    reason = (e.problem or e.context or "invalid YAML").strip()
    start = e.context_mark
    if e.context and e.problem:
        where = ""
        if start is not None and (
            mark is None or start.line != mark.line or start.column != mark.column
        ):
            where = f" that started at line {start.line + 1}, column {start.column + 1}"
        reason += f" ({e.context.strip()}{where})"
    loc = Location(file=file, line=mark.line + 1, column=mark.column + 1) if mark else None
    return make("E8002", Phase.SPEC, reason, location=loc)


Locate = Callable[[PathKey], Location | None]
"""A document path → the file and line it was read from (None when unknown)."""


def load_config(path: Path) -> tuple[HAProxyTemplateConfig | None, list[Diagnostic]]:
    """Read the one HAProxyTemplateConfig in ``path`` (other documents in the file are ignored)."""
    config, diags, _ = load_config_located(path)
    return config, diags


def load_config_located(
    path: Path,
) -> tuple[HAProxyTemplateConfig | None, list[Diagnostic], Locate]:
    """:func:`load_config`, plus a function that finds the line of any field of the document.

    Checks that run after the model accepted the document (field paths the store parses,
    for instance) use it to point at the line, as the loader's own errors do.
    """
    file = str(path)
    lines: Mapping[PathKey, int] = {}

    def locate(at: PathKey) -> Location | None:
        return _loc(file, lines, at)

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        diag = make("E8002", Phase.SPEC, f"cannot read: {reason}", location=Location(file=file))
        return None, [diag], locate
    docs, diags = read_documents(text, file)
    if diags:
        return None, diags, locate
    ours = [(d, lines) for d, lines in docs if isinstance(d, Mapping) and d.get("kind") == KIND]
    if len(ours) != 1:
        return None, [_not_exactly_one(file, docs, ours)], locate
    doc, lines = ours[0]
    config, problems = parse_config(doc, file=file, lines=lines)
    return config, problems, locate


def _not_exactly_one(
    file: str,
    docs: Sequence[tuple[Any, Mapping[PathKey, int]]],
    ours: Sequence[tuple[Any, Mapping[PathKey, int]]],
) -> Diagnostic:
    if ours:
        where = ", ".join(str(lines[()]) for _, lines in ours)
        msg = f"{len(ours)} {KIND} documents (at lines {where}); keep exactly one"
        return make("E8004", Phase.SPEC, msg, location=Location(file=file, line=ours[1][1][()]))
    kinds = [str(d.get("kind")) for d, _ in docs if isinstance(d, Mapping)]
    return make("E8004", Phase.SPEC, no_config_kind(kinds), location=Location(file=file, line=1))


def no_config_kind(kinds: Iterable[str]) -> str:
    """How every command says that no document is a HAProxyTemplateConfig: the kinds it
    found instead, and the likely misspelling among them."""
    found = sorted(set(kinds))
    if not found:
        return f"no document with kind: {KIND} (no YAML mapping found)"
    close = difflib.get_close_matches(KIND, found, n=1, cutoff=0.8)
    hint = f"; is kind: {close[0]} a misspelling of {KIND}?" if close else ""
    return f"no document with kind: {KIND} (found kinds: {', '.join(found)}){hint}"


def not_exactly_one(
    file: str,
    docs: Sequence[tuple[Any, Mapping[PathKey, int]]],
) -> Diagnostic | None:
    """E8004 when the file does not hold exactly one HAProxyTemplateConfig (None when it
    does), worded the same for every command."""
    ours = [(d, lines) for d, lines in docs if isinstance(d, Mapping) and d.get("kind") == KIND]
    return None if len(ours) == 1 else _not_exactly_one(file, docs, ours)


def parse_config(
    doc: Mapping[str, Any],
    *,
    file: str | None = None,
    lines: Mapping[PathKey, int] | None = None,
) -> tuple[HAProxyTemplateConfig | None, list[Diagnostic]]:
    """Validate one already-parsed document as the API server would.

    ``lines`` maps document paths to 1-based lines (as ``read_documents`` builds them); with a
    ``file`` they put every diagnostic on its field's line. Without a file, diagnostics carry
    only the field path in their message (the operator reports them on the object).
    """
    obj = _object_ref(doc)
    if not isinstance(doc, Mapping):
        msg = f"a {KIND} must be a mapping, got {type(doc).__name__}"
        return None, [make("E8001", Phase.SPEC, msg, location=_loc(file, lines, ()), object=obj)]
    wire, bad = _to_json(doc, ())
    if bad:
        return None, [
            make(
                "E8001",
                Phase.SPEC,
                f"{format_path(p)}: {why}",
                location=_loc(file, lines, p),
                object=obj,
            )
            for p, why in bad
        ]
    wire = prune_nulls(wire)
    try:
        config = HAProxyTemplateConfig.model_validate_json(
            json.dumps(wire), strict=True, by_alias=True, by_name=False
        )
    except ValidationError as e:
        errors = sorted(e.errors(include_url=False), key=lambda err: _line_of(lines, err["loc"]))
        return None, [_diagnostic(err, file, lines, obj) for err in errors]
    return config, []


def _diagnostic(
    err: ErrorDetails,
    file: str | None,
    lines: Mapping[PathKey, int] | None,
    obj: ObjectRef | None,
) -> Diagnostic:
    path: PathKey = tuple(err["loc"])
    if len(path) > 1 and path[-1] == "[key]":
        # pydantic marks an invalid mapping key with a "[key]" step after the key itself;
        # the key's own line and path say the same to someone reading the YAML.
        path = path[:-1]
    return make(
        "E8001",
        Phase.SPEC,
        f"{format_path(path)}: {describe_error(err, HAProxyTemplateConfig)}",
        location=_loc(file, lines, path),
        object=obj,
        suggested_fix=api_reference(path),
    )


def api_reference(path: Sequence[str | int]) -> str:
    """Where the field at ``path`` is documented: the section of docs/api.md of the model that
    declares it (the generated reference, readable without a cluster)."""
    owner: type[BaseModel] = HAProxyTemplateConfig
    field_name = ""
    current: Any = owner
    for part in path:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            inner = _model_in(current)
            if inner is None:
                break
            container = _is_container(current)
            current = inner
            if container:
                continue  # this part is a key of the mapping or an index of the list
        if not isinstance(part, str):
            break
        info = next((f for n, f in current.model_fields.items() if part in (n, f.alias)), None)
        if info is None:
            owner, field_name = current, ""  # an unknown field: its model is the reference
            break
        owner, field_name = current, part
        current = info.annotation
    anchor = owner.__name__.lower()
    what = f"`{field_name}` of {owner.__name__}" if field_name else owner.__name__
    return f"See {what} in docs/api.md#{anchor} for its type and allowed values."


def _is_container(tp: Any) -> bool:
    origin = get_origin(tp)
    if origin in (dict, list, tuple, set, frozenset):
        return True
    if origin is not None:  # Optional[...] and other unions: look inside
        return any(_is_container(a) for a in get_args(tp) if a is not type(None))
    return False


def _model_in(tp: Any) -> type[BaseModel] | None:
    """The model a field's type holds (``dict[str, WatchedResource]`` → WatchedResource)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in get_args(tp):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _line_of(lines: Mapping[PathKey, int] | None, path: Sequence[str | int]) -> int:
    """Line of the deepest part of ``path`` present in the document (a missing field's parent)."""
    if not lines:
        return 0
    p = tuple(path)
    while p and p not in lines:
        p = p[:-1]
    return lines.get(p, 0)


def _loc(file: str | None, lines: Mapping[PathKey, int] | None, path: PathKey) -> Location | None:
    if file is None:
        return None
    return Location(file=file, line=_line_of(lines, path) or None)


def _object_ref(doc: Any) -> ObjectRef | None:
    meta = doc.get("metadata") if isinstance(doc, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return None
    ns = meta.get("namespace")
    return ObjectRef(
        api_version=FULL_API_VERSION,
        kind=KIND,
        name=meta["name"],
        namespace=ns if isinstance(ns, str) else None,
    )


def _to_json(value: Any, path: PathKey) -> tuple[Any, list[tuple[PathKey, str]]]:
    """Bring a YAML-constructed value to the JSON data model, as Kubernetes does on admission.

    Scalar keys become strings and dates become ISO strings; values JSON cannot hold (binary,
    sets, complex keys) are reported with their path instead of failing in ``json.dumps``.
    """
    bad: list[tuple[PathKey, str]] = []
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = _json_key(k)
            if key is None:
                bad.append((path, f"mapping key {k!r} is not a string"))
                continue
            out[key], sub = _to_json(v, (*path, key))
            bad.extend(sub)
        return out, bad
    if isinstance(value, list | tuple):
        items: list[Any] = []
        for i, v in enumerate(value):
            item, sub = _to_json(v, (*path, i))
            items.append(item)
            bad.extend(sub)
        return items, bad
    if value is None or isinstance(value, str | bool | int | float):
        return value, bad
    if isinstance(value, datetime | date):
        return value.isoformat(), bad
    return None, [(path, f"a YAML {type(value).__name__} value cannot appear in a manifest")]


def _json_key(key: Any) -> str | None:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int | float):
        return str(key)
    if key is None:
        return "null"
    return None
