"""Fixtures of the schema tests; the helpers themselves live in schema_helpers.py."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from schema_helpers import parse_cfg

from controller.validation.syntax import ParsedConfig

# The differential test reuses the syntax tests' corpus loader and sandbox-like haproxy run
# (syntax_kit) rather than keeping a second copy of them.
_SYNTAX_TESTS = str(Path(__file__).resolve().parent.parent / "syntax")
if _SYNTAX_TESTS not in sys.path:
    sys.path.append(_SYNTAX_TESTS)


@pytest.fixture
def cfg() -> Callable[[str], ParsedConfig]:
    """The real syntax-stage parser: the schema tests need its spans and section hashes."""
    return parse_cfg
