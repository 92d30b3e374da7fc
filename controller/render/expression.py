"""One Jinja2 expression on its own (an output's ``when``, a value a linter inspects).

Jinja2's public API parses whole templates; a lone expression needs its ``Parser``, an
internal the render layer alone may import (see ``[tool.importlinter]`` in pyproject.toml and
``tests/render/test_jinja_internals.py``). Other layers parse expressions through here.
"""

from __future__ import annotations

from jinja2 import Environment, TemplateSyntaxError, nodes
from jinja2.parser import Parser

__all__ = ["parse_expression"]


def parse_expression(
    environment: Environment, source: str, name: str | None = None, *, whole: bool = True
) -> nodes.Expr:
    """The expression ``source`` spells, parsed as the inside of ``{{ }}``.

    ``whole``: text after the expression is a :class:`~jinja2.TemplateSyntaxError` (as in a
    ``when``); otherwise the leading expression is returned and the rest ignored.
    """
    parser = Parser(environment, source, name=name, filename=name, state="variable")
    expr = parser.parse_expression()
    if whole and not parser.stream.eos:
        raise TemplateSyntaxError(
            "unexpected text after the expression", parser.stream.current.lineno, name
        )
    return expr
