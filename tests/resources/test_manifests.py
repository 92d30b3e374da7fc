"""Manifest loading: files, directories, multi-document YAML, List kinds, file:line problems."""

from __future__ import annotations

import json
from pathlib import Path

from controller.resources import load_file, load_manifests


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: default
  creationTimestamp: 2024-05-01T12:00:00Z
spec:
  ports: [{{port: 80}}]
"""


def test_multi_document_yaml_with_lines(tmp_path: Path) -> None:
    f = write(
        tmp_path / "a.yaml", SERVICE.format(name="a") + "---\n" + SERVICE.format(name="b") + "---\n"
    )
    found, diags = load_manifests([f])
    assert diags == []
    assert [(m.obj["metadata"]["name"], m.line) for m in found] == [("a", 1), ("b", 10)]
    assert found[0].file == f
    # timestamps stay strings, as the API server returns them
    assert found[0].obj["metadata"]["creationTimestamp"] == "2024-05-01T12:00:00Z"


def test_list_kinds_expand_with_item_lines(tmp_path: Path) -> None:
    f = write(
        tmp_path / "list.yaml",
        """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: a}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: b}
---
apiVersion: networking.k8s.io/v1
kind: IngressList
items:
- metadata: {name: c, namespace: x}
  spec: {}
""",
    )
    found, diags = load_manifests([f])
    assert diags == []
    assert [(m.obj["kind"], m.obj["metadata"]["name"], m.line) for m in found] == [
        ("Service", "a", 4),
        ("ConfigMap", "b", 7),
        ("Ingress", "c", 14),
    ]
    assert found[2].obj["apiVersion"] == "networking.k8s.io/v1"


def test_bad_yaml_is_e8002_with_line_and_nothing_from_that_file(tmp_path: Path) -> None:
    f = write(
        tmp_path / "bad.yaml",
        SERVICE.format(name="ok") + "---\nkind: Service\nmetadata: {name: [unclosed\n",
    )
    good = write(tmp_path / "good.yaml", SERVICE.format(name="fine"))
    found, diags = load_manifests([f, good])
    assert [m.obj["metadata"]["name"] for m in found] == ["fine"]
    assert [d.rule_id for d in diags] == ["E8002"]
    loc = diags[0].location
    assert loc is not None and loc.file == str(f) and loc.line is not None and loc.line >= 11


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    f = write(
        tmp_path / "dup.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nkind: ConfigMap\n",
    )
    found, diags = load_file(f)
    assert found == [] and [d.rule_id for d in diags] == ["E8002"]
    assert diags[0].location is not None and diags[0].location.line == 4


def test_missing_identity_is_e8003_with_line_and_others_still_load(tmp_path: Path) -> None:
    f = write(
        tmp_path / "x.yaml",
        SERVICE.format(name="a")
        + "---\napiVersion: v1\nkind: Service\nmetadata: {namespace: x}\n---\n- just a list\n---\nkind: Service\nmetadata: {name: b}\n",
    )
    found, diags = load_file(f)
    assert [m.obj["metadata"]["name"] for m in found] == ["a"]
    assert [(d.rule_id, d.location.line if d.location else None) for d in diags] == [
        ("E8003", 10),
        ("E8003", 14),
        ("E8003", 16),
    ]
    assert "metadata.name" in diags[0].message and "mapping, not a list" in diags[1].message
    assert "apiVersion" in diags[2].message


def test_json_files(tmp_path: Path) -> None:
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "j"}}
    f = write(tmp_path / "s.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": [obj]}))
    found, diags = load_file(f)
    assert diags == [] and found[0].obj == obj
    bad = write(tmp_path / "bad.json", '{\n  "kind": "Service",\n  oops\n}')
    found, diags = load_file(bad)
    assert (
        found == []
        and diags[0].rule_id == "E8002"
        and diags[0].location
        and diags[0].location.line == 3
    )
    dup = write(tmp_path / "dup.json", '{"kind": "a", "kind": "b"}')
    assert load_file(dup)[1][0].rule_id == "E8002"


def test_directories_recursive_sorted_filtered(tmp_path: Path) -> None:
    write(tmp_path / "b.yaml", SERVICE.format(name="b"))
    write(tmp_path / "a" / "z.yml", SERVICE.format(name="az"))
    write(
        tmp_path / "c.json",
        json.dumps({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "c"}}),
    )
    write(tmp_path / "notes.txt", "not yaml: [")
    write(tmp_path / ".hidden.yaml", SERVICE.format(name="hidden"))
    write(tmp_path / ".git" / "x.yaml", SERVICE.format(name="git"))
    found, diags = load_manifests([tmp_path])
    assert diags == []
    assert [m.obj["metadata"]["name"] for m in found] == ["az", "b", "c"]


def test_unreadable_inputs_never_raise(tmp_path: Path) -> None:
    found, diags = load_manifests([tmp_path / "missing.yaml"])
    assert found == [] and diags[0].rule_id == "E8002" and diags[0].location is not None
    assert diags[0].location.file.endswith("missing.yaml") and "cannot read" in diags[0].message
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert load_file(binary)[1][0].rule_id == "E8002"
    bomb = write(
        tmp_path / "bomb.yaml",
        'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
        + "".join(
            f"{n}: &{n} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
            for p, n in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    )
    assert load_file(bomb)[1][0].rule_id == "E8002"
