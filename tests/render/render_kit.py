"""Small builders for render tests: specs from template strings, snapshots of a real Store.
Objects are built by the public kit (:mod:`controller.testing`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from controller.render import Renderer, RenderResult
from controller.resources import Snapshot
from controller.spec.loader import load_config
from controller.spec.models import HAProxyTemplateConfigSpec
from controller.testing import endpoint_slice, ingress, service, store_of

__all__ = [
    "QUICKSTART",
    "REPO",
    "WATCHED",
    "endpoint_slice",
    "ingress",
    "quickstart_spec",
    "render",
    "service",
    "signature",
    "snapshot",
    "spec",
    "text",
]

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
    return store_of(s, objects).snapshot()


def render(
    s: HAProxyTemplateConfigSpec, objects: Iterable[tuple[str, Mapping[str, Any]]] = (), **kw: Any
) -> RenderResult:
    return Renderer(s).render(snapshot(s, objects), **kw)


def signature(r: RenderResult) -> Any:
    """Everything a render reports, to compare two renders: the bytes, the source map, the
    diagnostics and each output's state."""
    files = [(e.path, e.kind, e.content) for e in r.files]
    maps = {e.path: tuple(r.source_map.lines.get(e.path, ())) for e in r.files}
    return (
        files,
        maps,
        [d.model_dump_json() for d in r.diagnostics],
        {n: (s.state, s.reason) for n, s in r.outputs.items()},
    )


def text(result: RenderResult, path: str = "haproxy.cfg") -> str:
    entry = result.files.get(path)
    assert entry is not None, f"{path} not rendered: {result.outputs} {result.diagnostics}"
    return entry.content.decode()


def quickstart_spec() -> HAProxyTemplateConfigSpec:
    config, problems = load_config(QUICKSTART / "config.yaml")
    assert config is not None, problems
    return config.spec
