"""The compile cache (controller.render.codecache): a reused result is exactly what compiling
would produce, a changed source compiles again, and the disk store loads only what this user
wrote, unchanged."""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from jinja2 import meta

from controller.render import CodeCache, Renderer, disk_cache
from controller.render.codecache import (
    Compiled,
    DiskStore,
    default_folder,
    disk_description,
    encode,
    memory_key,
)
from controller.render.environment import TemplateEnvironment
from controller.render.filters import FILTERS
from controller.render.graph import TemplateRefs
from controller.render.snippets import SnippetTemplate
from controller.spec import HAProxyTemplateConfigSpec
from tests.render.render_kit import (
    endpoint_slice,
    ingress,
    quickstart_spec,
    service,
    signature,
    snapshot,
    spec,
    text,
)

CERT = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
KEY = base64.b64encode(b"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n").decode()


def _templates(r: Renderer) -> dict[str, Any]:
    """Every compiled template of ``r`` by name (outputs, ``when``s, snippets)."""
    out: dict[str, Any] = dict(r._loader.templates)
    for name, c in r._compiled.items():
        out[name] = c.template
        out[name + "#when"] = c.when
    return out


def _codes(r: Renderer) -> dict[str, Any]:
    return {
        n: (t.root_render_func.__code__, t.root_render_func.__code__.co_filename)
        for n, t in _templates(r).items()
        if t is not None
    }


def _lookups(r: Renderer) -> dict[str, Any]:
    """Each snippet's names used only for key lookups, as the compile cache handed them over
    (None: not handed over, the snippet would parse its source again on first use)."""
    return {
        n: t._lookup_names for n, t in r._loader.templates.items() if isinstance(t, SnippetTemplate)
    }


def _parsed_lookups(r: Renderer) -> dict[str, Any]:
    """The same names from each snippet's source parsed now."""
    out: dict[str, Any] = {}
    for n, t in r._loader.templates.items():
        if isinstance(t, SnippetTemplate):
            fresh: Any = SimpleNamespace(
                _lookup_names=None, environment=t.environment, source=t.source
            )
            out[n] = SnippetTemplate.lookup_names(fresh)
    return out


def _uncached() -> CodeCache:
    """A cache that keeps nothing: every source compiles, as without any cache."""
    return CodeCache(max_entries=0)


def _quickstart_objects() -> list[tuple[str, dict[str, Any]]]:
    tls: list[Any] = [{"hosts": ["b.test"], "secretName": "tls-b"}]
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": "tls-b", "namespace": "default"},
        "data": {"tls.crt": CERT, "tls.key": KEY},
    }
    return [
        ("ingresses", ingress("a", "a.test", ("/", "Prefix", "svc-a", 80))),
        ("ingresses", ingress("b", "b.test", ("/api", "Exact", "svc-b", 81), tls=tls)),
        ("ingresses", ingress("broken", "c.test", ("/", "Prefix", "svc-a", 80), cls="other")),
        ("services", service("svc-a", 80)),
        ("services", service("svc-b", 81)),
        ("endpointslices", endpoint_slice("svc-a", 80, ("10.0.0.1", True), ("10.0.0.2", False))),
        ("endpointslices", endpoint_slice("svc-b", 81, ("10.0.0.3", None))),
        ("secrets", secret),
    ]


@pytest.fixture(scope="module")
def quickstart() -> HAProxyTemplateConfigSpec:
    return quickstart_spec()


def test_the_quickstart_renders_the_same_bytes_from_every_cache(
    quickstart: HAProxyTemplateConfigSpec, tmp_path: Path
) -> None:
    """Uncached, from memory and from disk: the same code, the same render, byte for byte."""
    view = snapshot(quickstart, _quickstart_objects())
    plain = Renderer(quickstart, code_cache=_uncached())
    want = signature(plain.render(view))
    assert any(e.path.startswith("certs/") for e in plain.render(view).files)

    memory = CodeCache()
    first = Renderer(quickstart, code_cache=memory)
    assert memory.misses > 500 and memory.hits == 0
    again = Renderer(quickstart, code_cache=memory)
    assert memory.hits == memory.misses  # the second build compiled nothing

    written, loaded = CodeCache(), CodeCache()
    with disk_cache(tmp_path / "t", cache=written):
        Renderer(quickstart, code_cache=written)
    with disk_cache(tmp_path / "t", cache=loaded):
        from_disk = Renderer(quickstart, code_cache=loaded)
    assert loaded.misses == 0 and loaded.disk_hits == written.misses

    for r in (first, again, from_disk):
        assert _codes(r) == _codes(plain)  # code objects equal, same file names
        assert _lookups(r) == _lookups(plain) == _parsed_lookups(plain)
        assert _lookups(r)["ingress-routes"]  # tls_hosts, auth_of, ... (controller.render.keyed)
        assert r.diagnostics == plain.diagnostics
        assert r.shared_snippets == plain.shared_snippets
        assert r.graph == plain.graph
        assert signature(r.render(view)) == want
    # Reused code, never a reused template: each renderer has its own environment.
    assert _templates(again)["haproxy.cfg"] is not _templates(first)["haproxy.cfg"]
    assert _templates(again)["haproxy.cfg"].environment is again.environment


def test_a_changed_source_compiles_again() -> None:
    cache = CodeCache()
    old = Renderer(spec("a {{ 1 + 1 }}\n", snippets={"s": "x"}), code_cache=cache)
    new = Renderer(spec("b {{ 2 + 2 }}\n", snippets={"s": "y"}), code_cache=cache)
    assert cache.hits == 0 and cache.misses == 4
    assert text(new.render(snapshot(new.spec))) == "b 4\n"
    assert text(old.render(snapshot(old.spec))) == "a 2\n"
    assert _codes(old)["haproxy.cfg"] != _codes(new)["haproxy.cfg"]
    back = Renderer(spec("a {{ 1 + 1 }}\n", snippets={"s": "x"}), code_cache=cache)
    assert cache.hits == 2
    assert text(back.render(snapshot(back.spec))) == "a 2\n"


def test_the_same_source_under_another_name_or_kind_is_another_entry() -> None:
    """The name is in the code (locations, errors), and a snippet carries its free names."""
    source = "{{ missing_value }}\n"
    cache = CodeCache()
    r = Renderer(spec(source, maps={"a.map": source}, snippets={"snip": source}), code_cache=cache)
    assert cache.misses == 3 and cache.hits == 0
    result = r.render(snapshot(r.spec))
    where = {d.template_location.template for d in result.diagnostics if d.template_location}
    assert {"haproxy.cfg", "a.map"} <= where
    codes = _codes(r)
    assert codes["haproxy.cfg"][1] == "haproxy.cfg" and codes["a.map"][1] == "a.map"


def test_when_expressions_are_keyed_by_their_own_text() -> None:
    cache = CodeCache()
    outputs = {"a.map": {"template": "a\n", "when": "true"}, "b.map": {"template": "a\n"}}
    r = Renderer(spec("x\n", maps=outputs), code_cache=cache)
    flipped = {"a.map": {"template": "a\n", "when": "false"}, "b.map": {"template": "a\n"}}
    s = Renderer(spec("x\n", maps=flipped), code_cache=cache)
    assert {e.path for e in r.render(snapshot(r.spec)).files} == {
        "haproxy.cfg",
        "maps/a.map",
        "maps/b.map",
    }
    assert {e.path for e in s.render(snapshot(s.spec)).files} == {"haproxy.cfg", "maps/b.map"}


def test_a_syntax_error_is_never_cached_and_reports_the_same() -> None:
    cache = CodeCache()
    broken = spec("line\n{% if %}\n", snippets={"s": "{{ }}"})
    first = Renderer(broken, code_cache=cache)
    second = Renderer(broken, code_cache=cache)
    assert cache.hits == 0 and len(cache._entries) == 0
    assert (
        first.diagnostics
        == second.diagnostics
        == Renderer(broken, code_cache=_uncached()).diagnostics
    )
    assert {d.rule_id for d in first.diagnostics} == {"E1001"}


def test_environments_that_compile_differently_do_not_share_code() -> None:
    """The optimizer calls a filter on constants at compile time, so a filter of another
    behaviour under the same name must compile again."""
    cache = CodeCache()
    results = []
    for fn in (str.upper, str.lower):
        env = TemplateEnvironment()
        env.filters.update(FILTERS)
        env.filters["shout"] = fn
        binding = cache.bind(env)

        def build(env: TemplateEnvironment = env) -> Compiled:
            code = env.compile("{{ 'Ab' | shout }}", name="t", filename="t")
            return Compiled(code, TemplateRefs())

        found = binding.compiled("template", "t", "{{ 'Ab' | shout }}", build)
        results.append(env.template_class.from_code(env, found.code, env.make_globals(None)))
    assert cache.misses == 2
    assert [t.render() for t in results] == ["AB", "ab"]


def test_the_renderer_environment_is_described_for_the_disk() -> None:
    """Every filter and test of the environment names a module whose source is in the key;
    one from elsewhere keeps that environment off the disk."""
    env = Renderer(spec("x\n"), code_cache=_uncached()).environment
    assert memory_key(env) is not None
    assert disk_description(env) is not None
    env.filters["local"] = lambda v: v
    assert disk_description(env) is None


def test_default_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTC_TEMPLATE_CACHE", "/here")
    assert default_folder() == Path("/here")
    monkeypatch.delenv("HTC_TEMPLATE_CACHE")
    monkeypatch.setenv("HTC_CACHE_DIR", "/somewhere/htc")
    assert default_folder() == Path("/somewhere/htc/templates")
    monkeypatch.delenv("HTC_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert default_folder() == Path("/xdg/htc/templates")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", "/home/u")
    assert default_folder() == Path("/home/u/.cache/htc/templates")
    monkeypatch.setenv("HTC_TEMPLATE_CACHE", "off")
    assert default_folder() is None


# -- the disk store ---------------------------------------------------------------------------


SOURCE = "global\n{% for i in range(3) %}  n{{ i }}\n{% endfor %}"


def _build(cache: CodeCache, folder: Path) -> Renderer:
    with disk_cache(folder, cache=cache):
        return Renderer(spec(SOURCE), code_cache=cache)


@pytest.fixture
def written(tmp_path: Path) -> Iterator[Path]:
    """A folder holding the entry of SOURCE, written by a build."""
    folder = tmp_path / "cache"
    _build(CodeCache(), folder)
    (entry,) = os.listdir(folder)
    yield folder / entry


def _loads(folder: Path) -> CodeCache:
    cache = CodeCache()
    r = _build(cache, folder)
    assert text(r.render(snapshot(r.spec))) == "global\n  n0\n  n1\n  n2\n"
    return cache


def test_the_folder_and_entries_are_private(written: Path) -> None:
    assert stat.S_IMODE(written.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert _loads(written.parent).disk_hits == 1


def test_a_folder_others_may_write_is_not_used(written: Path) -> None:
    written.parent.chmod(0o770)
    cache = _loads(written.parent)
    assert cache.disk_hits == 0 and cache.misses == 1
    assert os.listdir(written.parent) == [written.name]  # nothing written there either


def test_a_symlinked_folder_is_not_used(written: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(written.parent)
    assert _loads(link).disk_hits == 0


@pytest.mark.parametrize("mode", [0o620, 0o602], ids=["group-writable", "world-writable"])
def test_an_entry_others_may_write_is_not_loaded(written: Path, mode: int) -> None:
    written.chmod(mode)
    assert _loads(written.parent).disk_hits == 0


def test_a_linked_entry_is_not_loaded(written: Path, tmp_path: Path) -> None:
    os.link(written, tmp_path / "elsewhere")
    assert _loads(written.parent).disk_hits == 0


def test_a_damaged_entry_is_compiled_again_and_replaced(written: Path) -> None:
    data = bytearray(written.read_bytes())
    data[-5] ^= 0xFF
    written.write_bytes(bytes(data))
    assert _loads(written.parent).disk_hits == 0
    assert _loads(written.parent).disk_hits == 1  # the rebuild wrote it again


def test_an_entry_under_another_name_is_not_loaded(written: Path) -> None:
    """An entry names its key; copied to another key's file it is a miss there."""
    other = CodeCache()
    with disk_cache(written.parent, cache=other):
        Renderer(spec("other\n"), code_cache=other)
    (other_name,) = set(os.listdir(written.parent)) - {written.name}
    (written.parent / other_name).write_bytes(written.read_bytes())
    with disk_cache(written.parent, cache=(cache := CodeCache())):
        r = Renderer(spec("other\n"), code_cache=cache)
    assert cache.disk_hits == 0
    assert text(r.render(snapshot(r.spec))) == "other\n"


def test_the_store_keeps_the_most_recently_used(tmp_path: Path) -> None:
    store = DiskStore(tmp_path / "c")
    code = compile("x = 1", "t", "exec")
    for k in range(10):
        name = f"{k:064x}"
        store.store(name, Compiled(code, TemplateRefs()))
        os.utime(tmp_path / "c" / name, (1000 + k, 1000 + k))
    store.prune(keep=8)
    assert sorted(os.listdir(tmp_path / "c")) == [f"{k:064x}" for k in range(4, 10)]
    assert store.load(f"{9:064x}") == Compiled(code, TemplateRefs())
    assert encode("k", Compiled(code, TemplateRefs(), frozenset({"a"}))).startswith(b"HTCJ")


def test_a_snippets_free_names_follow_the_globals() -> None:
    """Free names are the names neither set in the snippet nor global: another set of
    globals is another entry."""
    cache = CodeCache()
    seen = []
    for extra in ((), ("tables",)):
        env = TemplateEnvironment()
        for name in extra:
            env.globals[name] = {}
        binding = cache.bind(env)

        def build(env: TemplateEnvironment = env) -> Compiled:
            tree = env.parse("{{ tables }}{{ resources }}")
            free = frozenset(meta.find_undeclared_variables(tree))
            return Compiled(env.compile(tree), TemplateRefs(), free)

        seen.append(binding.compiled("snippet", "s", "{{ tables }}{{ resources }}", build).free)
    assert seen == [frozenset({"tables", "resources"}), frozenset({"resources"})]
