"""The manifests' fast path reads what the careful reader reads, and hands over when unsure."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from controller.resources import FrozenDict, Store, load_manifests, thaw
from controller.resources import manifests as m
from controller.spec import WatchedResource
from controller.spec.loader import read_documents

PLAIN = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default, labels: {"on": "yes", tier: web}}
spec:
  ports: [{port: 80, targetPort: 8080, name: http}]
  clusterIP: None
  flag: true
  ratio: 0.5
  empty:
  octal: 0o17
  when: 2024-05-01T12:00:00Z
  tilde: ~
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: a}
  data: {k: "1", n: null}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: b}
---
"""


def test_fast_values_equal_the_careful_readers() -> None:
    fast = m._fast_read(PLAIN, frozen=False)
    careful, problems = read_documents(PLAIN, "x.yaml")
    assert fast is not None and not problems
    assert [d for d, _ in fast] == [d for d, _ in careful]
    frozen = m._fast_read(PLAIN, frozen=True)
    assert frozen is not None
    assert [thaw(d) for d, _ in frozen] == [d for d, _ in careful]
    service = frozen[0][0]
    assert isinstance(service, FrozenDict) and isinstance(service["spec"]["ports"], tuple)
    assert service["spec"]["when"] == "2024-05-01T12:00:00Z"  # no implicit timestamps


def test_list_items_keep_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "all.yaml"
    path.write_text(PLAIN)
    for frozen in (False, True):
        found, problems = load_manifests([path], frozen=frozen)
        assert not problems
        assert [(x.obj["metadata"]["name"], x.line) for x in found] == [
            ("web", 1),
            ("a", 17),
            ("b", 21),
        ]


@pytest.mark.parametrize(
    "text",
    [
        "a: &x {b: 1}\nc: *x\n",  # anchors: aliases could be bombs or cycles
        "a: 1\na: 2\n",  # a duplicate key: the careful reader names its line
        "a: !!binary aGk=\n",  # a tag the fast path does not build
        "base: {x: 1}\nmore: {<<: {y: 2}, z: 3}\n",  # a merge key
        "1: one\n",  # a key that is not a string
        "on: 1\n",  # YAML 1.1 reads this key as a boolean
        "a: [unclosed\n",  # a YAML error: the careful reader's message
    ],
)
def test_unsure_documents_go_to_the_careful_reader(text: str) -> None:
    assert m._fast_read(text, frozen=True) is None


def test_the_careful_reader_freezes_when_asked(tmp_path: Path) -> None:
    # An anchor sends the file to the careful reader; frozen, its objects come as the store
    # keeps them all the same (the directory adapter keeps what it read next to the store).
    path = tmp_path / "anchored.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: a, labels: &l {app: a}}\n"
        "spec: {selector: *l, ports: [{port: 80}]}\n"
    )
    [plain], _ = load_manifests([path])
    [frozen], problems = load_manifests([path], frozen=True)
    assert not problems and thaw(frozen.obj) == plain.obj and frozen.line == 1
    assert isinstance(frozen.obj, FrozenDict) and isinstance(frozen.obj["spec"]["ports"], tuple)
    assert isinstance(frozen.obj["spec"]["selector"], FrozenDict)
    store = Store({"services": WatchedResource(api_version="v1", kind="Service")})
    store.apply("services", frozen.obj)
    assert store["services"].get_single("", "a") is frozen.obj  # stored as read, not copied


def test_typed_list_items_stay_frozen(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("apiVersion: v1\nkind: ServiceList\nitems:\n- metadata: {name: a}\n")
    [item], problems = load_manifests([path], frozen=True)
    assert not problems and isinstance(item.obj, FrozenDict)
    assert item.obj["kind"] == "Service" and item.obj["apiVersion"] == "v1"


def test_a_duplicate_key_is_still_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: a}\nkind: Pod\n")
    found, [problem] = load_manifests([path], frozen=True)
    assert not found
    assert problem.rule_id == "E8002" and problem.location is not None
    assert problem.location.line == 4 and "duplicate key 'kind'" in problem.message


def test_frozen_manifests_store_as_the_plain_ones(tmp_path: Path, quickstart_dir: Path) -> None:
    from controller.spec.loader import load_config

    config, _ = load_config(quickstart_dir / "config.yaml")
    assert config is not None
    stores = []
    for frozen in (False, True):
        found, problems = load_manifests([quickstart_dir / "resources"], frozen=frozen)
        assert not problems and found
        store = Store.from_spec(config)
        for x in found:
            for name in store.watched():
                if store.watched()[name].kind == x.obj["kind"]:
                    store.apply(name, x.obj)
        stores.append({n: store.collection(n).list() for n in store.names()})
    assert stores[0] == stores[1]


def test_the_fast_loader_resolves_as_pyyaml() -> None:
    values = ["yes", "No", "on", "1", "-1.5", ".inf", "0x1F", "null", "~", "", "Tcp", "10.0.0.1"]
    # decimals and booleans as manifests write them (taken directly), and their neighbours
    values += ["true", "false", "True", "FALSE", "0", "80", "010", "0_1", "1_000", "+5", "-3"]
    values += ["12345678901234567890123", "1:30", "0b11", "!!int '7'", "!!bool 'true'", "[0, 08]"]
    text = "\n".join(f"k{i}: {v}" for i, v in enumerate(values)) + "\n"
    fast = m._fast_read(text, frozen=False)
    assert fast is not None
    [(careful, _)], _ = read_documents(text, "x.yaml")
    assert fast[0][0] == careful and careful["k0"] is True and careful["k10"] == "Tcp"
    assert [type(v) for v in fast[0][0].values()] == [type(v) for v in careful.values()]
    assert (
        careful["k18"] == 8 and careful["k12"] is True and careful["k23"] == 12345678901234567890123
    )


def test_short_values_read_frozen_are_shared_not_interned() -> None:
    """The interpreter's intern table never shrinks: the names and addresses that only one
    object holds must not enter it (3.8 MB at 10,000 objects per kind). Values that recur are
    still one object, as the store's ``freeze`` shares them."""
    marker = f"only-here-{uuid.uuid4().hex[:12]}"
    text = "".join(
        f"---\napiVersion: v1\nkind: Service\nmetadata: {{name: {marker}-{i}, namespace: x}}\n"
        "spec: {type: ClusterIP}\n"
        for i in range(2)
    )
    found = m._fast_read(text, frozen=True)
    assert found is not None and m._fast_read(text, frozen=False) is not None
    first, second = (doc for doc, _ in found)
    name = first["metadata"]["name"]
    assert name == f"{marker}-0"
    assert sys.intern("".join([marker, "-0"])) is not name  # not in the intern table
    assert first["spec"]["type"] is second["spec"]["type"]  # a recurring value: one object
    assert first["metadata"]["namespace"] is second["metadata"]["namespace"]
