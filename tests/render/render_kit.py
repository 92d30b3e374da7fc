"""Small builders for render tests: specs from template strings, snapshots of a real Store."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from controller.render import Renderer, RenderResult
from controller.resources import Snapshot, Store
from controller.spec.loader import load_config
from controller.spec.models import HAProxyTemplateConfigSpec

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart"

WATCHED: dict[str, Any] = {
    "ingresses": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"},
    "services": {"apiVersion": "v1", "kind": "Service"},
}


def spec(
    config: str = "",
    *,
    when: str | None = None,
    maps: Mapping[str, str | Mapping[str, Any]] | None = None,
    files: Mapping[str, str | Mapping[str, Any]] | None = None,
    certificates: Mapping[str, str | Mapping[str, Any]] | None = None,
    snippets: Mapping[str, str] | None = None,
    watched: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> HAProxyTemplateConfigSpec:
    """A spec whose outputs are given as template strings (or full output dicts)."""

    def outputs(given: Mapping[str, str | Mapping[str, Any]] | None) -> dict[str, Any]:
        return {
            k: ({"template": v} if isinstance(v, str) else dict(v))
            for k, v in (given or {}).items()
        }

    main: dict[str, Any] = {"template": config}
    if when is not None:
        main["when"] = when
    return HAProxyTemplateConfigSpec.model_validate(
        {
            "watchedResources": dict(WATCHED if watched is None else watched),
            "templateSnippets": {k: {"template": v} for k, v in (snippets or {}).items()},
            "haproxyConfig": main,
            "maps": outputs(maps),
            "files": outputs(files),
            "certificates": outputs(certificates),
            "extraContext": dict(extra or {}),
        }
    )


def snapshot(
    s: HAProxyTemplateConfigSpec, objects: Iterable[tuple[str, Mapping[str, Any]]] = ()
) -> Snapshot:
    store = Store.from_spec(s)
    for collection, obj in objects:
        store.apply(collection, obj)
    return store.snapshot()


def render(
    s: HAProxyTemplateConfigSpec, objects: Iterable[tuple[str, Mapping[str, Any]]] = (), **kw: Any
) -> RenderResult:
    return Renderer(s).render(snapshot(s, objects), **kw)


def text(result: RenderResult, path: str = "haproxy.cfg") -> str:
    entry = result.files.get(path)
    assert entry is not None, f"{path} not rendered: {result.outputs} {result.diagnostics}"
    return entry.content.decode()


def ingress(
    name: str,
    host: str,
    *paths: tuple[str, str, str, int],
    cls: str = "haproxy",
    ns: str = "default",
    **spec_extra: Any,
) -> dict[str, Any]:
    """An Ingress with one rule; paths are (path, pathType, service, port number)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "ingressClassName": cls,
            "rules": [
                {
                    "host": host,
                    "http": {
                        "paths": [
                            {
                                "path": p,
                                "pathType": t,
                                "backend": {"service": {"name": svc, "port": {"number": port}}},
                            }
                            for p, t, svc, port in paths
                        ]
                    },
                }
            ],
            **spec_extra,
        },
    }


def service(
    name: str, port: int, *, port_name: str | None = "http", ns: str = "default"
) -> dict[str, Any]:
    p: dict[str, Any] = {"port": port, "targetPort": port}
    if port_name is not None:
        p["name"] = port_name
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"ports": [p]},
    }


def endpoint_slice(
    service_name: str,
    port: int,
    *addresses: tuple[str, bool | None],
    port_name: str = "http",
    ns: str = "default",
) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service_name}-x1",
            "namespace": ns,
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": [a], **({"conditions": {"ready": r}} if r is not None else {})}
            for a, r in addresses
        ],
    }


def quickstart_spec() -> HAProxyTemplateConfigSpec:
    config, problems = load_config(QUICKSTART / "config.yaml")
    assert config is not None, problems
    return config.spec
