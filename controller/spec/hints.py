"""Reading the models' type hints: the one place that decides what a field's type "is".

The reference docs and the loader's error messages both walk the models by annotation; if
they stripped wrappers differently, the docs would name one type and the error another.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

__all__ = ["unwrap"]


def unwrap(tp: Any) -> Any:
    """Strip ``Annotated`` and ``X | None`` down to ``X``; a union of several types stays."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp
