"""Fast constructors for the parsed model's hottest objects.

A rendered config has tens of thousands of tokens and thousands of directives, and a frozen
dataclass's ``__init__`` goes through ``object.__setattr__`` once per field. Writing the
slots through their member descriptors builds the very same objects (equal, hashable,
immutable to everyone else) in about half the time. The builders check the field lists at
import, so a field added to the model later falls back to the ordinary constructor instead of
leaving a slot unset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from controller.validation.parsed import Directive, Section, Token

__all__ = ["directive", "directive_parts", "section", "token", "token_parts"]


def _directive_fast() -> Callable[[str, int, tuple[Token, ...], bool], Directive]:
    if tuple(f.name for f in fields(Directive)) != ("file", "line", "tokens", "conditional"):
        return Directive
    new = object.__new__
    set_file, set_line, set_tokens, set_cond = (
        Directive.__dict__[n].__set__ for n in ("file", "line", "tokens", "conditional")
    )

    def build(file: str, line: int, tokens: tuple[Token, ...], conditional: bool) -> Directive:
        obj = new(Directive)
        set_file(obj, file)
        set_line(obj, line)
        set_tokens(obj, tokens)
        set_cond(obj, conditional)
        return obj

    return build


def _token_fast() -> Callable[[str, str, int, int, bool], Token]:
    if tuple(f.name for f in fields(Token)) != ("value", "raw", "column", "end_column", "has_env"):
        return Token
    new = object.__new__
    set_value, set_raw, set_col, set_end, set_env = (
        Token.__dict__[n].__set__ for n in ("value", "raw", "column", "end_column", "has_env")
    )

    def build(value: str, raw: str, column: int, end_column: int, has_env: bool) -> Token:
        obj = new(Token)
        set_value(obj, value)
        set_raw(obj, raw)
        set_col(obj, column)
        set_end(obj, end_column)
        set_env(obj, has_env)
        return obj

    return build


def _section_fast() -> Callable[[Directive, tuple[Directive, ...], int, str], Section]:
    if tuple(f.name for f in fields(Section)) != ("header", "directives", "end_line", "text_hash"):
        return Section
    new = object.__new__
    set_header, set_directives, set_end, set_hash = (
        Section.__dict__[n].__set__ for n in ("header", "directives", "end_line", "text_hash")
    )

    def build(
        header: Directive, directives: tuple[Directive, ...], end_line: int, text_hash: str
    ) -> Section:
        obj = new(Section)
        set_header(obj, header)
        set_directives(obj, directives)
        set_end(obj, end_line)
        set_hash(obj, text_hash)
        return obj

    return build


def token_parts() -> tuple[Callable[..., Any], ...]:
    """``object.__new__`` and the five slot setters of :class:`Token`, for a loop that builds
    tokens inline (a call to :func:`token` per token is a measurable share of a cold parse).
    Raises if the field list changed, like the builders fall back."""
    names = ("value", "raw", "column", "end_column", "has_env")
    if tuple(f.name for f in fields(Token)) != names:
        raise RuntimeError("Token's fields changed: update build.token_parts")
    return (object.__new__, *(Token.__dict__[n].__set__ for n in names))


def directive_parts() -> tuple[Callable[..., Any], ...]:
    """Like :func:`token_parts`, for :class:`Directive`."""
    names = ("file", "line", "tokens", "conditional")
    if tuple(f.name for f in fields(Directive)) != names:
        raise RuntimeError("Directive's fields changed: update build.directive_parts")
    return (object.__new__, *(Directive.__dict__[n].__set__ for n in names))


directive = _directive_fast()
section = _section_fast()
token = _token_fast()
