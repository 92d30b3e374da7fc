"""Mapping HAProxy versions to schema families."""

from __future__ import annotations

import pytest

from controller.validation.schema import UnsupportedVersionError, family_for_version, resolve_family


@pytest.mark.parametrize(
    ("version", "family", "warned"),
    [
        ("2.6.12-1+deb12u4", "2.6", False),
        ("2.8.25", "2.8", False),
        ("2.8", "2.8", False),
        ("3.0.5", "3.0", False),
        ("3.2.0", "3.2", False),
        ("2.7.1", "2.6", True),
        ("2.9.0", "2.8", True),
        ("3.1.3", "3.0", True),
        ("3.3.0", "3.2", True),
        ("10.1", "3.2", True),
    ],
)
def test_versions_map_to_the_nearest_older_family(version: str, family: str, warned: bool) -> None:
    assert family_for_version(version) == family
    chosen, warning = resolve_family(version)
    assert chosen == family
    assert (warning is not None) is warned
    if warning is not None:
        assert warning.rule_id == "W3010" and family in warning.message


@pytest.mark.parametrize("version", ["2.4.22", "1.8.0", "not-a-version", ""])
def test_too_old_or_garbage_versions_are_errors(version: str) -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        family_for_version(version)
    assert info.value.diagnostic.rule_id == "E3011"
