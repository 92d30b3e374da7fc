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


def test_keys_across_collections_and_namespaces_stay_apart() -> None:
    """The tables are nested by collection and namespace: the same name elsewhere is another
    object, and a file defining one object twice is two claims of it."""
    claims = Claims()

    def claim(file: str, line: int, ns: str) -> Manifest:
        return Manifest({"metadata": {"name": "a", "namespace": ns}}, Path(file), line)

    keys = [("services", ("x", "a")), ("services", ("y", "a")), ("endpoints", ("x", "a"))]
    made = {key: claim("a.yaml", i + 1, key[1][0]) for i, key in enumerate(keys)}
    for key, c in made.items():
        claims.add(key, c)
    twice = claim("a.yaml", 40, "x")
    claims.add(keys[0], twice)
    again = claim("b.yaml", 1, "y")
    claims.add(keys[1], again)
    assert [claims.effective(k) for k in keys] == [made[k] for k in keys]
    assert claims.effective(("services", ("z", "a"))) is None
    assert claims.effective(("other", ("x", "a"))) is None
    assert list(claims.duplicates()) == [
        (keys[0], [made[keys[0]], twice]),
        (keys[1], [made[keys[1]], again]),
    ]
    assert sorted(claims.collection("services"), key=lambda c: c.line) == [
        made[keys[0]],
        made[keys[1]],
    ]
    assert claims.drop_file(Path("a.yaml")) == set(keys)
    assert claims.effective(keys[1]) is again
    assert claims.effective(keys[0]) is None and claims.effective(keys[2]) is None
    assert list(claims.collection("services")) == [again]
    assert list(claims.duplicates()) == []
