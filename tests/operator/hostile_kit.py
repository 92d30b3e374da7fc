"""Hostile values for the operator's property tests: what a watch or an AdmissionReview may hand
over (wrong types, control characters, huge strings, NaN), shaped like the quickstart's watched
objects often enough to reach the templates."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from controller.spec.loader import parse_config

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = yaml.safe_load((REPO / "examples" / "quickstart" / "config.yaml").read_text())
SPEC = parse_config(QUICKSTART)[0].spec  # type: ignore[union-attr]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(["\n", "a\nb", "${HOME}", "#x", "\u2028", "x" * 5000, "*.example.com", "\0"]),
)
json_like = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
names = st.one_of(st.text(max_size=20), st.integers(), st.none(), st.just("ok-name"))


@st.composite
def objects(
    draw: st.DrawFn, collections: Sequence[str] | None = None
) -> tuple[str, dict[str, Any]]:
    """(collection, object): an object of one of ``collections`` (default: every watched one)."""
    collection = draw(st.sampled_from(sorted(collections or SPEC.watched_resources)))
    watched = SPEC.watched_resources[collection]
    meta: dict[str, Any] = {"name": draw(names), "namespace": draw(names)}
    if draw(st.booleans()):
        meta["labels"] = draw(json_like)
    if draw(st.booleans()):
        meta["annotations"] = draw(json_like)
    obj: dict[str, Any] = {"apiVersion": watched.api_version, "kind": watched.kind}
    if draw(st.booleans()):
        obj["metadata"] = meta
    for key in draw(st.sets(st.sampled_from(["spec", "status", "data", "endpoints", "ports"]))):
        obj[key] = draw(json_like)
    if collection == "ingresses" and draw(st.booleans()):
        obj["spec"] = {
            "ingressClassName": "haproxy",
            "rules": [{"host": draw(st.text(max_size=40)), "http": draw(json_like)}],
        }
    return collection, obj
