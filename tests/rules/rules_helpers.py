"""Small builders shared by the rule tests: specs from plain dicts, stores from fixtures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.render import Renderer, RenderResult
from controller.resources import Store
from controller.spec.models import HAProxyTemplateConfigSpec
from controller.testing import store_of
from controller.validation.rules import Isolation, RuledRenderer, RuleSet

MINIMAL_CFG = """\
global
    maxconn 100

defaults
    mode http
    timeout connect 5s
    timeout client 5s
    timeout server 5s

frontend fe
    bind 127.0.0.1:18080
    default_backend be

backend be
    server s1 127.0.0.1:18081
"""

INGRESSES = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"}


def rule(name: str, expression: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "expression": expression, **extra}


def make_spec(
    *,
    cfg: str = MINIMAL_CFG,
    cfg_rules: list[dict[str, Any]] | None = None,
    cfg_when: str | None = None,
    maps: Mapping[str, Mapping[str, Any]] | None = None,
    watched: Mapping[str, Mapping[str, Any]] | None = None,
    **rest: Any,
) -> HAProxyTemplateConfigSpec:
    haproxy: dict[str, Any] = {"template": cfg}
    if cfg_rules is not None or cfg_when is not None:
        block: dict[str, Any] = {"rules": cfg_rules or []}
        if cfg_when is not None:
            block["when"] = cfg_when
        haproxy["validate"] = block
    doc: dict[str, Any] = {"haproxyConfig": haproxy, **rest}
    if maps is not None:
        doc["maps"] = dict(maps)
    if watched is not None:
        doc["watchedResources"] = dict(watched)
    return HAProxyTemplateConfigSpec.model_validate(doc)


def ingress_rules(*rules: dict[str, Any]) -> dict[str, Any]:
    """``watchedResources`` with one collection, Ingresses, validated by ``rules``."""
    return {"ingresses": {**INGRESSES, "validate": {"rules": list(rules)}}}


def filled_store(
    spec: HAProxyTemplateConfigSpec, fixtures: Mapping[str, list[dict[str, Any]]] | None = None
) -> Store:
    return store_of(spec, fixtures or {})


def ingress(name: str, *hosts: str, namespace: str = "default") -> dict[str, Any]:
    return {
        **INGRESSES,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"rules": [{"host": h} for h in hosts]},
    }


def ruled_render(
    spec: HAProxyTemplateConfigSpec,
    fixtures: Mapping[str, list[dict[str, Any]]] | None = None,
    *,
    isolation: Isolation = Isolation.AUTO,
    time_budget: float = 2.0,
) -> RenderResult:
    r = RuledRenderer(
        Renderer(spec), RuleSet.from_spec(spec), isolation=isolation, time_budget=time_budget
    )
    return r.render(filled_store(spec, fixtures).snapshot())
