"""The list filters templates get, computed from their previous call where they can be.

Each filter here is the one of the same name — Jinja2's ``map``, ``unique``, ``sort``,
``selectattr``, ``rejectattr``, our ``sort_by``, ``group_by``, ``map_entries`` — with the same
results and errors. Over a list of at least :data:`~controller.render.listmemo.MIN_ITEMS`
items, with arguments the memo can vouch for, it goes through :mod:`controller.render.listmemo`;
whenever the memo cannot vouch for a result (:class:`~controller.render.listmemo.Unsafe`) or
anything raises, the call is made again the plain way over the same items, so a template
sees what it always saw, errors at the moment they always came.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain, compress, repeat
from operator import not_
from typing import Any

import jinja2.filters
from jinja2 import pass_context, pass_environment
from jinja2.runtime import Context
from jinja2.utils import _PassArg

from controller.render import filters, select
from controller.render.grown import GrownList
from controller.render.listmemo import (
    Listed,
    Tagged,
    Unsafe,
    as_list,
    grouped_by,
    jinja_column,
    jinja_walk,
    memos_of,
    one_family,
    path_column,
    path_walk,
    per_item,
    scalar,
    scalars,
    sorted_by,
    unique_by,
)
from controller.resources import MISSING

__all__ = ["LIST_FILTERS"]


def _parts(attribute: Any) -> list[Any]:
    """Jinja2's attribute path (dots split, digit parts are indexes); Unsafe for other types."""
    if type(attribute) is str:
        return [int(x) if x.isdigit() else x for x in attribute.split(".")]
    if type(attribute) is int:
        return [attribute]
    raise Unsafe


def _lower(value: Any) -> Any:
    """A kept key that is already lower case is the value itself, not a copy of it."""
    if type(value) is not str:
        return value
    low = value.lower()
    return value if low == value else low


def _same(value: Any) -> Any:
    return value


def _keys(items: list[Any], parts: list[Any], post: Callable[[Any], Any]) -> list[Any] | None:
    """``[post(scalar(jinja_walk(x, parts))) for x in items]`` in C where it can be (see
    :func:`~controller.render.listmemo.jinja_column`), else None."""
    values = jinja_column(items, parts)
    if values is None or not scalars(values):
        return None
    if post is _same:
        return values
    if (
        post is _lower
        and set(map(type, values)) == {str}
        and list(map(str.lower, values)) == values
    ):
        return values  # all lower case already (Kubernetes names): _lower keeps each as it is
    return list(map(post, values))


def _tagged(items: list[Any], paths: list[Any]) -> Tagged | None:
    """The keys :func:`sort_by` gives, as columns (see :class:`~.listmemo.Tagged`), when
    every item has a value at every path and each path's values are of one family."""
    columns = [path_column(items, p) for p in paths]
    for c in columns:
        if c is None or not one_family(c):
            return None
    return Tagged(columns)  # type: ignore[arg-type]


# -- Jinja2's ------------------------------------------------------------------------------


@pass_context
def map_(context: Context, value: Any, *args: Any, **kwargs: Any) -> Any:
    """Jinja2's ``map``; ``map(attribute=...)`` over a long list through the memo."""
    if not args and len(kwargs) == 1 and "attribute" in kwargs:
        items = as_list(value)
        if items is not None:
            try:
                parts = _parts(kwargs["attribute"])
                memos = memos_of(context.environment)
                key = ("map", tuple(parts))
                return Listed(
                    per_item(
                        memos,
                        key,
                        None,
                        items,
                        lambda x: jinja_walk(x, parts),
                        lambda xs: jinja_column(xs, parts),
                    )
                )
            except Exception:
                value = items
    return jinja2.filters.sync_do_map(context, value, *args, **kwargs)


@pass_environment
def unique(
    environment: Any, value: Any, case_sensitive: bool = False, attribute: Any = None
) -> Any:
    """Jinja2's ``unique``, through the memo over a long list."""
    items = as_list(value)
    if items is not None:
        try:
            parts = [] if attribute is None else _parts(attribute)
            post: Callable[[Any], Any] = _same if case_sensitive else _lower

            def key_of(x: Any) -> Any:
                return post(scalar(jinja_walk(x, parts)))

            key = ("unique", tuple(parts), bool(case_sensitive))
            return Listed(
                unique_by(
                    memos_of(environment),
                    key,
                    None,
                    items,
                    key_of,
                    lambda xs: _keys(xs, parts, post),
                )
            )
        except Exception:
            value = items
    return jinja2.filters.sync_do_unique(environment, value, case_sensitive, attribute)


@pass_environment
def sort(
    environment: Any,
    value: Any,
    reverse: bool = False,
    case_sensitive: bool = False,
    attribute: Any = None,
) -> Any:
    """Jinja2's ``sort``, through the memo over a long list (ascending only)."""
    items = as_list(value)
    if items is not None and not reverse:
        try:
            split = attribute.split(",") if type(attribute) is str else [attribute]
            paths = [[] if a is None else _parts(a) for a in split]
            post: Callable[[Any], Any] = _same if case_sensitive else _lower

            # One attribute: the value itself orders as the one-item list Jinja2 builds.
            def key_of(x: Any) -> Any:
                if len(paths) == 1:
                    return post(scalar(jinja_walk(x, paths[0])))
                return [post(scalar(jinja_walk(x, p))) for p in paths]

            def batch(xs: list[Any]) -> list[Any] | None:
                columns = [_keys(xs, p, post) for p in paths]
                if any(c is None for c in columns):
                    return None
                return (
                    columns[0] if len(columns) == 1 else list(map(list, zip(*columns, strict=True)))
                )

            key = ("sort", tuple(tuple(p) for p in paths), bool(case_sensitive))
            return sorted_by(memos_of(environment), key, None, items, key_of, batch)
        except Exception:
            value = items
    return jinja2.filters.do_sort(environment, value, reverse, case_sensitive, attribute)


def _plain_test(
    context: Context, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Callable[..., Any], tuple[Any, ...]] | None:
    """The test of ``selectattr(attr, test, *rest)`` and its positional arguments, when it
    depends on nothing but its arguments (None: the value's truth); Unsafe for one that
    reads the context."""
    if len(args) < 2:
        return None
    name, rest = args[1], args[2:]
    fn: Any = context.environment.tests.get(name) if type(name) is str else None
    if fn is None or _PassArg.from_obj(fn) is not None:
        raise Unsafe
    for a in (*rest, *kwargs.values()):
        if type(a) in (list, tuple):
            for x in a:
                scalar(x)
        else:
            scalar(a)
    return fn, rest


def _memo_select(keep: bool) -> Callable[..., Any]:
    plain = select.selectattr if keep else select.rejectattr
    name = "selectattr" if keep else "rejectattr"

    @pass_context
    def choose(context: Context, value: Any, *args: Any, **kwargs: Any) -> Any:
        items = as_list(value) if args else None
        if items is not None:
            try:
                parts = _parts(args[0])
                found = _plain_test(context, args, kwargs)
                fn, rest = found if found is not None else (None, ())

                def each(x: Any) -> bool:
                    v = jinja_walk(x, parts)
                    if type(v) not in _TESTABLE:
                        raise Unsafe
                    return bool(v if fn is None else fn(v, *rest, **kwargs))

                def batch(xs: list[Any]) -> list[Any] | None:
                    values = jinja_column(xs, parts)
                    if values is None or not set(map(type, values)) <= _TESTABLE:
                        return None
                    if fn is None:
                        return list(map(bool, values))
                    if kwargs:
                        return [bool(fn(v, *rest, **kwargs)) for v in values]
                    # fn(v, *rest) for each value, called from C (eq, ne... are C themselves).
                    return list(map(bool, map(fn, values, *map(repeat, rest))))

                key = (name, tuple(parts), args[1] if len(args) > 1 else None)
                flags = per_item(
                    memos_of(context.environment),
                    key,
                    (args[2:], kwargs),
                    items,
                    each,
                    batch,
                    bools=True,  # each and batch give bool(...) for every item
                )
                if flags.count(keep) == len(flags):  # every item kept (most such lists)
                    return Listed(items)
                return Listed(list(compress(items, flags if keep else map(not_, flags))))
            except Exception:
                value = items
        return plain(context, value, *args, **kwargs)

    choose.__name__ = choose.__qualname__ = name
    choose.__doc__ = f"Jinja2's ``{name}``, through the memo over a long list."
    return choose


_TESTABLE = frozenset({str, int, bool, float, type(None), dict, list, tuple})
"""Values a test may look at from the memo: scalars, and containers a template cannot change
(a namespace, whose attributes can be assigned, is not one)."""


# -- ours --------------------------------------------------------------------------------------


@pass_environment
def sort_by(environment: Any, value: Any, *paths: str, reverse: bool = False) -> Any:
    """:func:`controller.render.filters.sort_by`, through the memo over a long list."""
    items = as_list(value)
    if items is not None and not reverse:
        try:
            compiled = filters.compile_paths(paths, "sort_by")

            # filters.sort_by's pairs, flattened: ((0, ""), (1, v)) orders as (0, "", 1, v),
            # and one tuple per item is kept instead of three.
            def key_of(x: Any) -> tuple[Any, ...]:
                key: list[Any] = []
                for path in compiled:
                    v = path_walk(x, path)
                    key += filters.none_first(v if v is MISSING else scalar(v))
                return tuple(key)

            return sorted_by(
                memos_of(environment),
                ("sort_by", *compiled),
                None,
                items,
                key_of,
                lambda xs: _tagged(xs, compiled),
            )
        except Exception:
            value = items
    return filters.sort_by(value, *paths, reverse=reverse)


@pass_environment
def group_by(environment: Any, value: Any, path: str) -> Any:
    """:func:`controller.render.filters.group_by`, through the memo over a long list."""
    items = as_list(value)
    if items is not None:
        try:
            (compiled,) = filters.compile_paths([path], "group_by")

            def key_of(x: Any) -> Any:
                v = path_walk(x, compiled)
                return None if v is MISSING else scalar(v)

            def batch(xs: list[Any]) -> list[Any] | None:
                values = path_column(xs, compiled)
                if values is None or not scalars(values, missing=True):
                    return None
                return [None if v is MISSING else v for v in values]

            key = ("group_by", compiled)
            return grouped_by(memos_of(environment), key, None, items, key_of, filters.Group, batch)
        except Exception:
            value = items
    return filters.group_by(value, path)


@pass_environment
def map_entries(environment: Any, value: Any, key: str, val: str) -> Any:
    """:func:`controller.render.filters.map_entries`, through the memo over a long list."""
    items = as_list(value)
    if items is not None:
        try:
            key_path, val_path = filters.compile_paths([key, val], "map_entries")

            def line(x: Any) -> str:
                k, v = path_walk(x, key_path), path_walk(x, val_path)
                if k is MISSING or v is MISSING:
                    raise Unsafe
                return f"{filters.map_key(scalar(k))} {filters.map_value(scalar(v))}\n"

            def batch(xs: list[Any]) -> list[Any] | None:
                ks, vs = path_column(xs, key_path), path_column(xs, val_path)
                if ks is None or vs is None or not scalars(ks) or not scalars(vs):
                    return None
                keys, values = filters.map_keys(ks), filters.map_values(vs)
                # line() of each item: both are plain str here, so joined as formatted.
                return list(map("".join, zip(keys, repeat(" "), values, repeat("\n"))))

            site = ("map_entries", key_path, val_path)
            return "".join(per_item(memos_of(environment), site, None, items, line, batch))
        except Exception:
            value = items
    return filters.map_entries(value, key, val)


_LISTS = frozenset({list, tuple, GrownList})


def flatten(value: Any) -> Any:
    """:func:`controller.render.filters.flatten`; a long list of lists joined in C."""
    items = as_list(value)
    if items is not None and set(map(type, items)) <= _LISTS:
        return list(chain.from_iterable(items))
    return filters.flatten(value if items is None else items)


LIST_FILTERS: dict[str, Callable[..., Any]] = {
    "map": map_,
    "unique": unique,
    "sort": sort,
    "selectattr": _memo_select(True),
    "rejectattr": _memo_select(False),
    "sort_by": sort_by,
    "group_by": group_by,
    "map_entries": map_entries,
    "flatten": flatten,
}
