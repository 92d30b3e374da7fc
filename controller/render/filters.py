"""The filters templates get on top of Jinja2's built-ins; ``docs/templates.md`` documents them.

The quoting filters exist because resource fields are attacker-influenced: whoever may create
an Ingress must not be able to end a directive and start another. They are written from
HAProxy's own tokenizer rules (configuration manual, section 2.2, and the config reader):

* a line ends at LF, CR or NUL — even inside quotes, so no quoting can carry them;
* outside quotes, spaces and tabs (any C ``isspace`` character) separate arguments and ``#``
  starts a comment;
* inside double quotes, backslash escapes and ``$VAR``/``${VAR}`` environment expansion
  still apply;
* inside single quotes nothing is interpreted: every byte up to the closing quote is literal;
* a backslash outside single quotes escapes the next ``\\``, space, ``#``, ``'`` or ``"``;
* adjacent quoted and unquoted parts join into one argument (``'a'\\''b'`` is ``a'b``);
* an empty argument ends the argument list (HAProxy warns or refuses), so it cannot be passed.

Values that cannot be made safe raise :class:`FilterError`; the renderer reports it as E1004
with the template line, so a hostile object stops the render instead of reaching HAProxy.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from jinja2.runtime import Undefined

from controller.render.select import rejectattr, selectattr
from controller.resources import MISSING, FieldPath, FieldPathError, FrozenDict, lookup, parse_path


class FilterError(ValueError):
    """A value a filter refuses; the message says which value and why."""


def _show(value: str, limit: int = 60) -> str:
    shown = value if len(value) <= limit else value[:limit] + "…"
    return repr(shown)


def _text(value: Any, filter_name: str) -> str:
    if type(value) is str and value.isascii():
        return value  # the common case, and nothing to check
    if isinstance(value, Undefined):
        str(value)  # StrictUndefined raises with its own message
    if isinstance(value, bool) or value is None:
        raise FilterError(f"{filter_name}: expected a string or number, got {value!r}")
    if isinstance(value, str | int | float):
        text = str(value)
        if not text.isascii():
            try:
                text.encode()
            except UnicodeEncodeError as exc:
                raise FilterError(
                    f"{filter_name}: value {_show(text)} is not valid Unicode text ({exc.reason} "
                    f"at position {exc.start}); it cannot be written to a file"
                ) from None
        return text
    raise FilterError(f"{filter_name}: expected a string or number, got {type(value).__name__}")


# -- HAProxy configuration arguments ---------------------------------------------------------

_LINE_ENDERS = re.compile(r"[\n\r\x00]")
BARE = re.compile(r"[A-Za-z0-9._:/@+=,~-]+")
"""Characters HAProxy's tokenizer passes through unchanged outside quotes; anything else is
quoted (even where quoting is not strictly needed) so that unusual values stand out."""


def _check_arg(text: str, filter_name: str) -> None:
    bad = _LINE_ENDERS.search(text)
    if bad:
        raise FilterError(
            f"{filter_name}: value {_show(text)} contains {bad.group()!r} at position "
            f"{bad.start()}; HAProxy ends a line there even inside quotes, so it cannot be "
            "part of one argument"
        )
    if not text:
        raise FilterError(
            f"{filter_name}: value is empty; an empty argument ends HAProxy's argument list"
        )


def _single_quoted(text: str) -> str:
    """``'…'`` around every run without a single quote; each ``'`` itself as ``\\'``."""
    parts = text.split("'")
    return "\\'".join(f"'{p}'" if p else "" for p in parts)


def haproxy_quote(value: Any, logformat: bool = False) -> str:
    """The value as exactly one HAProxy argument, always in single quotes.

    ``logformat=True`` also doubles ``%`` for arguments HAProxy reads as log-format strings
    (``http-request set-header`` values, ``lf-string``, ``log-format``), where ``%[...]``
    would otherwise run a sample fetch.
    """
    text = _text(value, "haproxy_quote")
    _check_arg(text, "haproxy_quote")
    if logformat:
        text = text.replace("%", "%%")
    return _single_quoted(text)


def haproxy_arg(value: Any, logformat: bool = False) -> str:
    """Like :func:`haproxy_quote`, but values made only of plain characters stay unquoted.

    Plain characters: ASCII letters, digits and ``. _ : / @ + = , ~ -`` — enough for names,
    addresses, ports, paths and host names to read naturally in the rendered configuration.
    """
    if type(value) is str and not logformat and BARE.fullmatch(value):
        return value  # plain characters only: nothing to check, quote or escape
    text = _text(value, "haproxy_arg")
    _check_arg(text, "haproxy_arg")
    if logformat:
        text = text.replace("%", "%%")
    if BARE.fullmatch(text):
        return text
    return _single_quoted(text)


# -- map files -------------------------------------------------------------------------------

MAX_MAP_KEY = 4096
MAX_MAP_VALUE = 8192
"""Bytes (UTF-8). HAProxy reads map files line by line into a buffer of ``tune.bufsize``
(16 kB by default) and a longer line would be split into two entries, so keys and values are
capped well below that."""

_KEY_BAD = re.compile(r"[ \t\n\r\x00]")
_VALUE_BAD = re.compile(r"[\n\r\x00]")
_KEY_GOOD = re.compile(r"[^ \t\n\r\x00#][^ \t\n\r\x00]*")
_VALUE_GOOD = re.compile(r"(?:[^ \t\n\r\x00](?:[^\n\r\x00]*[^ \t\n\r\x00])?)?")
"""What every check of :func:`map_key` / :func:`map_value` accepts, as one match: a fresh
ASCII string (where characters are bytes, so the length bound is the byte bound) passes in
one call in C instead of four checks (at 10,000 Ingresses, 70,000 fresh keys and values per
full render). Anything else takes the checks, which say what is wrong."""

_PASSED_KEYS: dict[str, None] = {}
_PASSED_VALUES: dict[str, None] = {}
"""Strings that passed :func:`map_key` / :func:`map_value`: the same routes go through them
again in every render (in routing and in each map), and a lookup costs a twentieth of the
checks. Bounded (:data:`_PASSED_MAX`); only plain ``str``, whose value cannot change."""
_PASSED_MAX = 200_000


def _passed(cache: dict[str, None], text: str) -> str:
    if type(text) is str:
        if len(cache) >= _PASSED_MAX:
            cache.clear()
        cache[text] = None
    return text


def map_key(value: Any) -> str:
    """The value as the key column of a map file line, unchanged, or an error.

    HAProxy takes the key as the first run of characters up to a space or tab and ignores a
    line starting with ``#``; map files know no quoting or escaping. So a key must be
    non-empty, free of space, tab, CR, LF and NUL, and must not start with ``#``.
    """
    if type(value) is str:
        if value in _PASSED_KEYS:
            return value
        if len(value) <= MAX_MAP_KEY and value.isascii() and _KEY_GOOD.fullmatch(value):
            return _passed(_PASSED_KEYS, value)
    text = _text(value, "map_key")
    if not text:
        raise FilterError("map_key: a map key must not be empty")
    bad = _KEY_BAD.search(text)
    if bad:
        raise FilterError(
            f"map_key: key {_show(text)} contains {bad.group()!r} at position {bad.start()}; "
            "map files cannot quote or escape it"
        )
    if text.startswith("#"):
        raise FilterError(f"map_key: key {_show(text)} starts with '#', which makes a comment")
    if len(text.encode()) > MAX_MAP_KEY:
        raise FilterError(f"map_key: key is longer than {MAX_MAP_KEY} bytes")
    return _passed(_PASSED_KEYS, text)


def map_value(value: Any) -> str:
    """The value as the value column of a map file line, unchanged, or an error.

    The value runs to the end of the line, with leading and trailing spaces and tabs
    stripped; so it must not contain CR, LF or NUL, nor begin or end with a space or tab
    (HAProxy would silently drop them).
    """
    if type(value) is str:
        if value in _PASSED_VALUES:
            return value
        if len(value) <= MAX_MAP_VALUE and value.isascii() and _VALUE_GOOD.fullmatch(value):
            return _passed(_PASSED_VALUES, value)
    text = _text(value, "map_value")
    bad = _VALUE_BAD.search(text)
    if bad:
        raise FilterError(
            f"map_value: value {_show(text)} contains {bad.group()!r} at position "
            f"{bad.start()}; it would start a new map entry"
        )
    if text != text.strip(" \t"):
        raise FilterError(
            f"map_value: value {_show(text)} begins or ends with a space or tab, "
            "which HAProxy strips"
        )
    if len(text.encode()) > MAX_MAP_VALUE:
        raise FilterError(f"map_value: value is longer than {MAX_MAP_VALUE} bytes")
    return _passed(_PASSED_VALUES, text)


# -- data helpers ----------------------------------------------------------------------------


def b64decode(value: Any, encoding: str = "utf-8") -> str:
    """Decode standard base64 (as in a Secret's ``data``) to text; invalid input is an error."""
    text = _text(value, "b64decode")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise FilterError(f"b64decode: not valid base64 ({exc})") from None
    try:
        return raw.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise FilterError(f"b64decode: decoded bytes are not {encoding} text ({exc})") from None


@lru_cache(maxsize=1024)
def _parsed(path: str) -> FieldPath:
    """Templates pass the same few literal paths on every call (once per object in a loop)."""
    return parse_path(path)


def compile_paths(paths: Sequence[str], filter_name: str) -> list[FieldPath]:
    if not paths:
        raise FilterError(f"{filter_name}: give at least one attribute path")
    compiled: list[FieldPath] = []
    for p in paths:
        if type(p) is not str:
            raise FilterError(f"{filter_name}: attribute path must be a string, got {p!r}")
        try:
            compiled.append(_parsed(p))
        except FieldPathError as exc:
            raise FilterError(f"{filter_name}: {exc}") from None
    return compiled


def none_first(value: Any) -> tuple[int, Any]:
    """The order ``sort_by`` and ``group_by`` give values: missing values and nulls first
    (equal to each other), present values by their own order."""
    return (0, "") if value is MISSING or value is None else (1, value)


def _sort_key(item: Any, paths: list[FieldPath]) -> tuple[tuple[int, Any], ...]:
    return tuple(none_first(lookup(item, path)) for path in paths)


def _sort_key_of(paths: list[FieldPath]) -> Callable[[Any], tuple[tuple[int, Any], ...]]:
    """:func:`_sort_key` for these paths, faster for the commonest case: one field of a
    plain dict (a route of the quickstart's routing table; its maps sort 20,000 of them in
    every render that changes one)."""
    if len(paths) == 1 and len(paths[0]) == 1 and type(paths[0][0]) is str:
        path = paths[0]
        seg = path[0]

        def one(item: Any) -> tuple[tuple[int, Any], ...]:
            v = item.get(seg, MISSING) if type(item) is dict else lookup(item, path)
            return (none_first(v),)

        return one
    return lambda item: _sort_key(item, paths)


def _getter(path: FieldPath) -> Callable[[Any], Any]:
    """``lookup(item, path)``, without the walk for one field of a plain dict."""
    if len(path) == 1 and type(path[0]) is str:
        seg = path[0]
        return lambda item: item.get(seg, MISSING) if type(item) is dict else lookup(item, path)
    return lambda item: lookup(item, path)


def _items(value: Any, filter_name: str) -> list[Any]:
    if type(value) is list or type(value) is tuple:
        return list(value)
    if isinstance(value, Undefined):
        str(value)
    if isinstance(value, str | bytes | Mapping):
        raise FilterError(f"{filter_name}: expected a list, got {type(value).__name__}")
    if not isinstance(value, Iterable):
        raise FilterError(f"{filter_name}: expected a list, got {type(value).__name__}")
    return list(value)


def sort_by(value: Any, *paths: str, reverse: bool = False) -> list[Any]:
    """Sort by one or more field paths (``'metadata.name'``, ``"metadata.labels['app']"``).

    Stable; objects lacking a field sort before those that have it.
    """
    compiled = compile_paths(paths, "sort_by")
    items = _items(value, "sort_by")
    if len(items) < 2:
        return items  # the paths were checked; there is nothing to compare
    try:
        return sorted(items, key=_sort_key_of(compiled), reverse=reverse)
    except TypeError as exc:
        raise FilterError(
            f"sort_by: values of {', '.join(paths)} cannot be compared ({exc})"
        ) from None


def flatten(value: Any) -> list[Any]:
    """The items of a list of lists, in order: one level, so ``fragments | map(attribute=
    'routes') | flatten`` joins per-object lists in one pass (``sum(start=[])`` copies the
    growing list once per item)."""
    out: list[Any] = []
    for item in _items(value, "flatten"):
        if type(item) is not list and type(item) is not tuple and not isinstance(item, list):
            raise FilterError(f"flatten: expected a list of lists, got a {type(item).__name__}")
        out.extend(item)
    return out


class Group(NamedTuple):
    """One group of :func:`group_by`: the shared value and the items that have it."""

    key: Any
    items: list[Any]


def group_by(value: Any, path: str) -> list[Group]:
    """Group by a field path; groups sorted by key (missing/null first, as ``None``).

    Items keep their order inside a group. ``dict(x | group_by(...))`` gives a lookup table.
    """
    (compiled,) = compile_paths([path], "group_by")
    groups: dict[Any, list[Any]] = {}
    for item in _items(value, "group_by"):
        v = lookup(item, compiled)
        k = None if v is MISSING else v
        try:
            groups.setdefault(k, []).append(item)
        except TypeError:
            raise FilterError(
                f"group_by: value of {path} is a {type(k).__name__}, which cannot be a group key"
            ) from None
    try:
        keys = sorted(groups, key=none_first)
    except TypeError as exc:
        raise FilterError(f"group_by: values of {path} cannot be compared ({exc})") from None
    return [Group(k, groups[k]) for k in keys]


def _all_passed(cache: dict[str, None], values: list[Any]) -> bool:
    """Has every one of ``values``, each a plain ``str``, passed the check already? Two
    passes in C, where a long map's column would be one Python call per value."""
    return set(map(type, values)) == {str} and all(map(cache.__contains__, values))


def map_keys(values: list[Any]) -> Iterable[str]:
    """:func:`map_key` of each of ``values`` in turn, lazily as ``map`` calls it (an error
    comes when its value is reached); ``values`` itself when every one passed already."""
    return values if _all_passed(_PASSED_KEYS, values) else map(map_key, values)


def map_values(values: list[Any]) -> Iterable[str]:
    """:func:`map_value` of each of ``values``, as :func:`map_keys`."""
    return values if _all_passed(_PASSED_VALUES, values) else map(map_value, values)


def map_entries(value: Any, key: str, val: str) -> str:
    """A map file's lines, one per item: its field ``key`` through :func:`map_key`, a space,
    its field ``val`` through :func:`map_value`.

    What ``{% for r in items %}{{ r.key | map_key }} {{ r.val | map_value }}\n{% endfor %}``
    renders, in one call: a map of 20,000 routes is a loop the template would otherwise run
    20,000 times in every render that changes one route.
    """
    key_path, val_path = compile_paths([key, val], "map_entries")
    get_key, get_val = _getter(key_path), _getter(val_path)
    lines: list[str] = []
    for item in _items(value, "map_entries"):
        k, v = get_key(item), get_val(item)
        if k is MISSING or v is MISSING:
            raise FilterError(f"map_entries: an item has no {key if k is MISSING else val}")
        lines.append(f"{map_key(k)} {map_value(v)}\n")
    return "".join(lines)


# -- Kubernetes EndpointSlices ---------------------------------------------------------------

_IP_FAMILIES = ("IPv4", "IPv6")


def ready_endpoints(slices: Any, port_name: Any = "") -> list[dict[str, Any]]:
    """The ready endpoints of one Service port, from its EndpointSlices: what a backend's
    server lines are made of.

    Kubernetes rules, in one call instead of four nested template loops (a fifth of the
    quickstart's render time): slices in ``metadata.name`` order, ``FQDN`` slices skipped;
    in each, the port named ``port_name`` (``''`` for the unnamed port); every address of
    every endpoint whose ``conditions.ready`` is not ``false`` (unset means ready). An
    address:port that two slices list (as while endpoints move between slices) or one slice
    lists twice is returned once, where it first appears: HAProxy refuses two servers of
    one name. Each item is ``{address, port, endpoint}``, ``endpoint`` being the endpoint
    object (for its ``zone``, ``nodeName``, ``hostname``, …).
    """
    if type(port_name) is not str:
        raise FilterError(f"ready_endpoints: the port name must be a string, got {port_name!r}")
    # Once per call, not per object: a Service has one slice of a few endpoints, so what is
    # looked up per call (globals, bound methods) is a good part of the work.
    frozen, plain, families = FrozenDict, dict, _IP_FAMILIES
    seen: set[tuple[str, int]] = set()
    found: list[dict[str, Any]] = []
    mark, keep = seen.add, found.append
    # One slice (most Services): nothing to sort, and sort_by would return it as it is.
    one = (type(slices) is list or type(slices) is tuple) and len(slices) == 1
    for s in slices if one else sort_by(slices, "metadata.name"):
        # Mappings: the two stored types by identity before the abstract isinstance (a slice
        # has a dozen mappings to check).
        if (tp := type(s)) is not frozen and tp is not plain and not isinstance(s, Mapping):
            raise _malformed(s, "the slice", s)
        if s.get("addressType", "IPv4") not in families:
            continue
        for sport in _sequence(s, "ports", s.get("ports")):
            if (
                (tp := type(sport)) is not frozen
                and tp is not plain
                and not isinstance(sport, Mapping)
            ):
                raise _malformed(s, "a port", sport)
            if sport.get("name", "") != port_name:
                continue
            port = sport.get("port")
            if type(port) is not int:
                raise FilterError(
                    f"ready_endpoints: {_slice_name(s)}: port {port_name!r} has no port "
                    f"number (got {port!r})"
                )
            for ep in _sequence(s, "endpoints", s.get("endpoints")):
                if (
                    (tp := type(ep)) is not frozen
                    and tp is not plain
                    and not isinstance(ep, Mapping)
                ):
                    raise _malformed(s, "an endpoint", ep)
                conditions = ep.get("conditions")
                if conditions is not None:
                    if (
                        (tp := type(conditions)) is not frozen
                        and tp is not plain
                        and not isinstance(conditions, Mapping)
                    ):
                        raise _malformed(s, "conditions", conditions)
                    if conditions.get("ready") is False:
                        continue
                addresses = ep.get("addresses")
                if type(addresses) is not tuple and type(addresses) is not list:
                    raise _malformed(s, "addresses", addresses, "a list")
                for address in addresses:
                    if type(address) is not str:
                        raise _malformed(s, "an address", address, "a string")
                    if (key := (address, port)) not in seen:
                        mark(key)
                        keep({"address": address, "port": port, "endpoint": ep})
    return found


_MAX_INDENT = 64


def server_lines(endpoints: Any, options: Any = "", indent: Any = 4) -> str:
    """The ``server`` lines of a backend, one per item of ``endpoints`` (as
    :func:`ready_endpoints` gives them): ``server <name> <address><options>``, ``indent``
    spaces in front, each line ending in a newline.

    ``<name>`` is the item's ``address:port`` and ``<address>`` the same, with ``ipv6@`` in
    front of an address with a ``:``, both as :func:`haproxy_arg` writes them. ``options``
    is the rest of the line as written (``' check'``): empty or starting with a space, and
    no line break. What a template loop over the endpoints with two ``haproxy_arg`` each
    renders, in one call: at 10,000 backends the loop, the concatenations and a marked
    output per server were two fifths of each backend's evaluation.
    """
    if type(options) is not str or (
        options and (options[0] != " " or "\n" in options or "\r" in options or "\x00" in options)
    ):
        raise _bad_options(options)
    if indent == 4 and type(indent) is int:
        head = "    server "
    elif type(indent) is int and 0 <= indent <= _MAX_INDENT:
        head = " " * indent + "server "
    else:
        raise FilterError(
            f"server_lines: the indent must be a number of spaces from 0 to {_MAX_INDENT}, "
            f"got {indent!r}"
        )
    tail = options + "\n"
    parts: list[str] = []
    frozen, plain, last, suffix = FrozenDict, dict, None, ""
    try:
        for item in endpoints if type(endpoints) is list else _items(endpoints, "server_lines"):
            if (
                (tp := type(item)) is not plain
                and tp is not frozen
                and not isinstance(item, Mapping)
            ):
                raise FilterError(f"server_lines: an item is a {tp.__name__}, not a mapping")
            address, port = item["address"], item["port"]
            if type(address) is not str or type(port) is not int:
                raise _bad_item(address, port)
            if port is not last:  # the items of one slice share their port
                last, suffix = port, f":{port}"
            endpoint = address + suffix
            parts += (head, endpoint, " ", endpoint, tail)
    except KeyError as exc:
        raise FilterError(f"server_lines: an item has no {exc.args[0]}") from None
    if not parts:
        return ""
    names = parts[1::5]
    joined = ",".join(names)
    if joined.count(":") == len(names) and BARE.fullmatch(joined):
        # One match for all: every address:port is of plain characters, and none has a
        # second ":" (an IPv6 address), so each is its own name and address as written.
        return "".join(parts)
    lines = []
    for endpoint in names:
        name = haproxy_arg(endpoint)
        at = haproxy_arg("ipv6@" + endpoint) if ":" in endpoint.rpartition(":")[0] else name
        lines.append(f"{head}{name} {at}{tail}")
    return "".join(lines)


def _bad_options(options: Any) -> FilterError:
    if type(options) is not str:
        return FilterError(f"server_lines: the options must be a string, got {options!r}")
    if _LINE_ENDERS.search(options):
        return FilterError(f"server_lines: options {_show(options)} contain a line break")
    return FilterError(
        f"server_lines: options {_show(options)} must start with a space (they follow the "
        "address on the line)"
    )


def _bad_item(address: Any, port: Any) -> FilterError:
    if type(address) is not str:
        return FilterError(
            f"server_lines: an item's address is a {type(address).__name__}, not a string"
        )
    return FilterError(f"server_lines: an item's port is a {type(port).__name__}, not a number")


def _sequence(s: Mapping[str, Any], what: str, value: Any) -> Sequence[Any]:
    """A list field of a slice; unset or null is empty (Kubernetes omits empty lists)."""
    if type(value) is tuple or type(value) is list:
        return value
    if value is None:
        return ()
    raise _malformed(s, what, value, "a list")


def _malformed(s: Any, what: str, value: Any, expected: str = "a mapping") -> FilterError:
    return FilterError(
        f"ready_endpoints: {_slice_name(s)}: {what} is a {type(value).__name__}, not {expected}"
    )


def _slice_name(s: Any) -> str:
    meta = s.get("metadata") if isinstance(s, Mapping) else None
    if not isinstance(meta, Mapping):
        return "an EndpointSlice"
    return f"EndpointSlice {meta.get('namespace', '')}/{meta.get('name', '?')}"


FILTERS: Mapping[str, Callable[..., Any]] = {
    "haproxy_quote": haproxy_quote,
    "haproxy_arg": haproxy_arg,
    "map_key": map_key,
    "map_value": map_value,
    "b64decode": b64decode,
    "sort_by": sort_by,
    "flatten": flatten,
    "map_entries": map_entries,
    "group_by": group_by,
    "ready_endpoints": ready_endpoints,
    "server_lines": server_lines,
    "selectattr": selectattr,
    "rejectattr": rejectattr,
}
