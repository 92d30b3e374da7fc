"""``selectattr`` and ``rejectattr`` with Jinja2's results at a fraction of the cost per call.

Jinja2's versions wrap every item in three nested calls and look the test up again for each
item (through the environment's generic test dispatcher). The quickstart calls them once
per backend (a Service's ports) and over every route (the maps): at 10,000 Ingresses that
dispatch was about 6 % of a render. These are the same generators with the test looked up
once: the same items, in the same order, the same errors at the same moment (nothing is
evaluated before the first item is asked for), and attributes still read through the
sandbox's ``getitem``. A test that wants the context, environment or eval context, or that
does not exist, goes through the dispatcher as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from types import BuiltinFunctionType
from typing import Any

from jinja2 import pass_context
from jinja2.exceptions import FilterArgumentError
from jinja2.runtime import Context
from jinja2.utils import _PassArg

from controller.resources import FrozenDict

_PARTS: dict[str, tuple[Any, ...]] = {}
"""Attribute strings already split (a template passes the same few, once per call)."""
_PARTS_MAX = 256


def _parts(attribute: Any) -> tuple[Any, ...]:
    """A dotted attribute path as Jinja2 splits it: digit parts are list indexes."""
    if attribute is None:
        return ()
    if isinstance(attribute, str):
        if type(attribute) is str:
            parts = _PARTS.get(attribute)
            if parts is None:
                if len(_PARTS) >= _PARTS_MAX:
                    _PARTS.clear()
                parts = _PARTS[attribute] = _split(attribute)
            return parts
        return _split(attribute)
    return (attribute,)


def _split(attribute: str) -> tuple[Any, ...]:
    return tuple(int(x) if x.isdigit() else x for x in attribute.split("."))


def _test(
    context: Context, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Callable[[Any], Any] | None:
    """The test of ``args[1:]`` as a one-argument function (None: the value's truth)."""
    if len(args) < 2:
        return None
    env = context.environment
    name, rest = args[1], args[2:]
    found: Any = env.tests.get(name) if type(name) is str else None
    fn: Callable[..., Any] | None = found
    # A function written in C (eq, ne...) cannot carry Jinja2's pass_* mark.
    if fn is None or (
        type(found) is not BuiltinFunctionType and _PassArg.from_obj(found) is not None
    ):
        return lambda v: env.call_test(name, v, rest, kwargs, context)
    if not kwargs and len(rest) == 1:
        arg = rest[0]
        return lambda v: fn(v, arg)
    return lambda v: fn(v, *rest, **kwargs)


def _select(
    context: Context,
    value: Iterable[Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    keep: bool,
) -> Iterator[Any]:
    if value:
        try:
            attribute = args[0]
        except LookupError:
            raise FilterArgumentError("Missing parameter for attribute name") from None
        parts = _parts(attribute)
        getitem = context.environment.getitem
        test = _test(context, args, kwargs)
        for item in value:
            v = item
            for part in parts:
                # What getitem answers for a key a stored object or dict holds: the item.
                if ((tp := type(v)) is FrozenDict or tp is dict) and part in v:
                    v = v[part]
                else:
                    v = getitem(v, part)
            if test is not None:
                v = test(v)
            if keep:
                if v:
                    yield item
            elif not v:
                yield item


@pass_context
def selectattr(context: Context, value: Iterable[Any], *args: Any, **kwargs: Any) -> Iterator[Any]:
    """Jinja2's ``selectattr``: the items whose attribute passes the test (or is true)."""
    return _select(context, value, args, kwargs, True)


@pass_context
def rejectattr(context: Context, value: Iterable[Any], *args: Any, **kwargs: Any) -> Iterator[Any]:
    """Jinja2's ``rejectattr``: the items whose attribute fails the test (or is false)."""
    return _select(context, value, args, kwargs, False)
