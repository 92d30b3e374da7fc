"""What the API server would say about a custom resource, without an API server.

No kube-apiserver runs here, so the tests check CRD acceptance with the parts of its behaviour
that matter for our schema, each done by a real engine rather than re-implemented:

- null pruning of non-nullable fields (``prune_nulls``, the documented API-server rule);
- OpenAPI keywords (type, enum, pattern, lengths, required) by ``jsonschema``, with unknown
  fields refused as kubectl's default strict field validation does;
- ``x-kubernetes-validations`` rules evaluated by the CEL engine (``cel-expr-python``);
- ``x-kubernetes-list-type: map`` key uniqueness.

Not covered: CEL cost estimation (the tests bound it separately) and defaulting.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
from cel_expr_python import cel

from controller.spec.crd import prune_nulls


def to_jsonschema(node: Mapping[str, Any]) -> dict[str, Any]:
    """Translate a structural schema node to JSON Schema for ``jsonschema``."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in ("nullable", "description", "default"):
            continue
        if key == "properties":
            out[key] = {k: to_jsonschema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = to_jsonschema(value)
        else:
            out[key] = value
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in node and not preserve and "additionalProperties" not in node:
        # Only metadata is an object without properties; the API server handles it itself.
        out["additionalProperties"] = False
    return out


@functools.cache
def _env() -> Any:
    return cel.NewEnv(variables={"self": cel.Type.DYN})


@functools.cache
def compile_rule(rule: str) -> Any:
    return _env().compile(rule)


def _cel_errors(value: Any, node: Mapping[str, Any], path: str) -> Iterator[str]:
    if value is None:
        return
    for rule in node.get("x-kubernetes-validations", []):
        try:
            ok = compile_rule(rule["rule"]).eval(data={"self": value}).value()
        except Exception as e:  # an evaluation error fails the rule, as in the API server
            ok = f"error: {e}"
        if ok is not True:
            yield f"{path or '.'}: {rule['message']}"
    keys = node.get("x-kubernetes-list-map-keys")
    if keys and isinstance(value, list):
        seen = [tuple(item.get(k) for k in keys) for item in value if isinstance(item, dict)]
        dupes = {k for k in seen if seen.count(k) > 1}
        if dupes:
            yield f"{path}: duplicate entries for key {sorted(dupes)}"
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k, extra)
            if isinstance(sub, Mapping):
                yield from _cel_errors(v, sub, f"{path}.{k}")
    elif isinstance(value, list) and isinstance(node.get("items"), Mapping):
        for i, v in enumerate(value):
            yield from _cel_errors(v, node["items"], f"{path}[{i}]")


def admit(obj: Any, schema: Mapping[str, Any]) -> list[str]:
    """Reasons the API server would refuse ``obj`` under ``schema``; empty when it is accepted."""
    obj = prune_nulls(obj, schema)
    validator = jsonschema.Draft7Validator(to_jsonschema(schema))
    errors = [
        f"{'.'.join(map(str, e.absolute_path)) or '.'}: {e.message}"
        for e in validator.iter_errors(obj)
    ]
    if errors:  # the API server runs CEL only on schema-valid objects
        return errors
    return list(_cel_errors(obj, schema, ""))
