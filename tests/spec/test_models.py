"""The models: a full spec survives a wire round trip, every field is documented, and the CEL
rules the CRD carries agree with the model validators they mirror."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from controller.spec import HAProxyTemplateConfig, load_config
from controller.spec.crd import prune_nulls, structural_schema
from controller.spec.docs import _reachable
from controller.spec.models import (
    DeployTarget,
    ExternalValidator,
    LabelSelectorRequirement,
    LastValidated,
    ReconcileSettings,
    ValidationRule,
    format_duration,
    parse_duration,
)
from tests.spec.spec_apiserver import admit

DATA = Path(__file__).parent / "data"
MODELS = list(_reachable(HAProxyTemplateConfig))


def full_config() -> HAProxyTemplateConfig:
    config, diags = load_config(DATA / "full.yaml")
    assert not diags, [d.message for d in diags]
    assert config is not None
    return config


def test_models_reachable_from_the_root_are_all_found() -> None:
    names = {m.__name__ for m in MODELS}
    assert {"WatchedResource", "ValidationRule", "DeployTarget", "Condition"} <= names
    assert len(MODELS) >= 25


def _fields_set(obj: Any, out: dict[type[BaseModel], set[str]]) -> None:
    """Per model class, the fields some instance in ``obj`` sets (explicit null counts)."""
    if isinstance(obj, BaseModel):
        out.setdefault(type(obj), set()).update(obj.model_fields_set)
        for name in obj.model_fields_set:
            _fields_set(getattr(obj, name), out)
    elif isinstance(obj, dict):
        for v in obj.values():
            _fields_set(v, out)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _fields_set(v, out)


def test_the_full_sample_sets_every_field_of_every_model() -> None:
    seen: dict[type[BaseModel], set[str]] = {}
    _fields_set(full_config(), seen)
    assert set(seen) == set(MODELS), "tests/spec/data/full.yaml misses whole models"
    unset = {m.__name__: sorted(set(m.model_fields) - s) for m, s in seen.items()}
    assert {m: f for m, f in unset.items() if f} == {}, "extend tests/spec/data/full.yaml"


def test_round_trip_by_alias_is_lossless() -> None:
    config = full_config()
    wire = config.model_dump(mode="json", by_alias=True)
    again = HAProxyTemplateConfig.model_validate_json(
        json.dumps(wire), strict=True, by_alias=True, by_name=False
    )
    assert again == config
    # camelCase on the wire, durations as strings, exactly as a manifest carries them
    assert wire["spec"]["reconcile"] == {
        "debounce": "100ms",
        "minInterval": "2s",
        "resyncInterval": "600s",
    }
    assert wire["spec"]["watchedResources"]["ingresses"]["indexBy"] == [
        "metadata.namespace",
        "metadata.name",
    ]
    assert "validate" in wire["spec"]["haproxyConfig"]


def test_python_callers_may_still_use_attribute_names() -> None:
    rule = ValidationRule(name="a", expression="true", message_expression="'x'")
    assert rule.model_dump(by_alias=True)["messageExpression"] == "'x'"


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_model_and_field_is_documented(model: type[BaseModel]) -> None:
    assert (model.__doc__ or "").strip(), f"{model.__name__} has no docstring"
    undocumented = [n for n, f in model.model_fields.items() if not (f.description or "").strip()]
    assert undocumented == [], f"{model.__name__}: add attribute docstrings for {undocumented}"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("250ms", 0.25), ("5s", 5.0), ("1m30s", 90.0), ("2h", 7200.0), ("1.5s", 1.5)],
)
def test_durations_parse_and_format_back(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("bad", ["5", "fast", "-1s", "1d", "", True, -3])
def test_bad_durations_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_short_checksum_is_derived_and_checked() -> None:
    full = "ab" * 32
    lv = LastValidated(checksum=full, at="2024-05-01T12:00:00Z", haproxy_version="2.8.5")
    assert lv.short_checksum == full[:12]
    assert lv.model_dump(by_alias=True)["shortChecksum"] == full[:12]
    with pytest.raises(ValidationError, match="first 12 hex digits"):
        LastValidated(
            checksum=full,
            short_checksum="0" * 12,
            at="2024-05-01T12:00:00Z",
            haproxy_version="2.8.5",
        )
    with pytest.raises(ValidationError, match="RFC 3339"):
        LastValidated(checksum=full, at="yesterday", haproxy_version="2.8.5")


# --- CEL rules in the CRD against the model validators they mirror ---------------------------

PARITY_CASES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (ValidationRule, {"name": "r", "expression": "true"}),
    (ValidationRule, {"name": "r", "expression": "true", "message": "m"}),
    (ValidationRule, {"name": "r", "expression": "true", "messageExpression": "'m'"}),
    (ValidationRule, {"name": "r", "expression": "true", "message": "m", "messageExpression": "x"}),
    (
        ValidationRule,
        {"name": "r", "expression": "true", "message": None, "messageExpression": "x"},
    ),
    (
        ValidationRule,
        {"name": "r", "expression": "true", "message": None, "messageExpression": None},
    ),
    (ExternalValidator, {"name": "v", "type": "command"}),
    (ExternalValidator, {"name": "v", "type": "command", "command": []}),
    (ExternalValidator, {"name": "v", "type": "command", "command": None}),
    (ExternalValidator, {"name": "v", "type": "command", "command": ["lint"]}),
    (ExternalValidator, {"name": "v", "type": "http"}),
    (ExternalValidator, {"name": "v", "type": "http", "url": ""}),
    (ExternalValidator, {"name": "v", "type": "http", "url": None}),
    (ExternalValidator, {"name": "v", "type": "http", "url": "https://127.0.0.1/v"}),
    (ExternalValidator, {"name": "v", "type": "http", "url": "https://x", "command": ["a"]}),
    (DeployTarget, {"name": "t", "type": "masterSocket"}),
    (DeployTarget, {"name": "t", "type": "masterSocket", "socket": "/s"}),
    (DeployTarget, {"name": "t", "type": "masterSocket", "socket": "/s", "configDir": ""}),
    (DeployTarget, {"name": "t", "type": "masterSocket", "socket": None, "configDir": "/c"}),
    (DeployTarget, {"name": "t", "type": "masterSocket", "socket": "/s", "configDir": "/c"}),
    (DeployTarget, {"name": "t", "type": "dataplaneApi"}),
    (DeployTarget, {"name": "t", "type": "dataplaneApi", "url": None}),
    (DeployTarget, {"name": "t", "type": "dataplaneApi", "url": "http://127.0.0.1:5555"}),
    (LabelSelectorRequirement, {"key": "k", "operator": "In"}),
    (LabelSelectorRequirement, {"key": "k", "operator": "In", "values": []}),
    (LabelSelectorRequirement, {"key": "k", "operator": "NotIn", "values": ["a"]}),
    (LabelSelectorRequirement, {"key": "k", "operator": "Exists"}),
    (LabelSelectorRequirement, {"key": "k", "operator": "Exists", "values": None}),
    (LabelSelectorRequirement, {"key": "k", "operator": "DoesNotExist", "values": ["a"]}),
    (ReconcileSettings, {}),
    (ReconcileSettings, {"minInterval": "10ms", "resyncInterval": "1s", "debounce": "0s"}),
    (ReconcileSettings, {"minInterval": "0s"}),
    (ReconcileSettings, {"minInterval": "9ms"}),
    (ReconcileSettings, {"resyncInterval": "0s"}),
    (ReconcileSettings, {"resyncInterval": "999ms"}),
    (ReconcileSettings, {"resyncInterval": "1m30s", "minInterval": "1.5s"}),
]


@pytest.mark.parametrize(("model", "doc"), PARITY_CASES)
def test_crd_rules_and_model_validators_agree(model: type[BaseModel], doc: dict[str, Any]) -> None:
    schema = structural_schema(model)
    assert schema.get("x-kubernetes-validations"), f"{model.__name__} carries no CEL rule"
    refused_by_crd = admit(doc, schema)
    try:
        model.model_validate_json(
            json.dumps(prune_nulls(doc, schema)), strict=True, by_alias=True, by_name=False
        )
        refused_by_model = None
    except ValidationError as e:
        refused_by_model = str(e)
    assert bool(refused_by_crd) == bool(refused_by_model), (
        f"CRD says {refused_by_crd or 'ok'}, model says {refused_by_model or 'ok'}"
    )


def test_parity_cases_cover_both_verdicts_for_every_rule_model() -> None:
    verdicts: dict[str, set[bool]] = {}
    for model, doc in PARITY_CASES:
        verdicts.setdefault(model.__name__, set()).add(not admit(doc, structural_schema(model)))
    assert all(v == {True, False} for v in verdicts.values()), verdicts
    with_rules = {
        m.__name__ for m in MODELS if structural_schema(m).get("x-kubernetes-validations")
    }
    assert with_rules == set(verdicts), "add parity cases for every model that has CEL rules"


@pytest.mark.parametrize(
    ("path", "doc", "message"),
    [
        (
            ("spec", "validation"),
            {"externalValidators": [{"name": "a", "type": "command", "command": ["x"]}] * 2},
            "externalValidators names must be unique: a",
        ),
        (
            ("spec", "deploy"),
            {"targets": [{"name": "t", "type": "dataplaneApi", "url": "http://127.0.0.1"}] * 2},
            "deploy target names must be unique: t",
        ),
    ],
)
def test_names_that_key_a_list_must_be_unique(
    path: tuple[str, ...], doc: dict[str, Any], message: str
) -> None:
    base: dict[str, Any] = {"metadata": {"name": "x"}, "spec": {"haproxyConfig": {"template": ""}}}
    base[path[0]][path[1]] = doc
    with pytest.raises(ValidationError, match=message):
        HAProxyTemplateConfig.model_validate(base)
