"""Fixtures of the schema tests; the helpers themselves live in schema_helpers.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controller.validation.syntax import ParsedConfig
from tests.validation.schema.schema_helpers import parse_cfg


@pytest.fixture
def cfg() -> Callable[[str], ParsedConfig]:
    """The real syntax-stage parser: the schema tests need its spans and section hashes."""
    return parse_cfg
