"""Claims: the first definition in (file, line) order wins, and removing one falls back."""

from __future__ import annotations

from pathlib import Path

from controller.local.claims import Claims
from controller.resources import Manifest

KEY = ("services", ("default", "a"))


def _claim(file: str, line: int) -> Manifest:
    return Manifest({"metadata": {"name": "a", "namespace": "default"}}, Path(file), line)


def test_first_in_file_and_line_order_wins_and_removal_falls_back() -> None:
    claims = Claims()
    late, early, same_file = _claim("b.yaml", 1), _claim("a.yaml", 9), _claim("a.yaml", 30)
    for c in (late, same_file, early):
        claims.add(KEY, c)
    assert claims.effective(KEY) is early
    [(key, listed)] = claims.duplicates()
    assert key == KEY and listed == [early, same_file, late]
    assert claims.drop_file(Path("a.yaml")) == {KEY}
    assert claims.effective(KEY) is late and list(claims.duplicates()) == []
    assert list(claims.collection("services")) == [late]
    claims.drop_file(Path("b.yaml"))
    assert claims.effective(KEY) is None and list(claims.collection("services")) == []


def test_an_object_defined_once_is_no_duplicate() -> None:
    claims = Claims()
    only = _claim("a.yaml", 1)
    claims.add(KEY, only)
    assert claims.effective(KEY) is only and list(claims.duplicates()) == []
    assert claims.drop_file(Path("other.yaml")) == set() and claims.effective(KEY) is only
