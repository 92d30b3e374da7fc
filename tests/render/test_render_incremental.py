"""Incremental render: after any sequence of creates, updates and deletes, a long-lived
renderer (reusing outputs and shared modules whose reads are unchanged) produces exactly what
a fresh renderer produces from scratch — bytes, source map, diagnostics, output states.

Two libraries: the quickstart (examples/quickstart/config.yaml) and FEATURES below, which
uses every template feature the renderer offers: shared and unshared snippets, a shared
module exporting a macro that reads the store, macros with ``caller``, includes, ``when``,
outputs reading outputs, ``path_for``, namespaces grown in loops and assigned from an output,
``loop`` variables, ``get_single``/``fetch``/``list``/``length``, an ambiguous lookup, a render
error that depends on an object, and extraContext.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.render import Renderer, listmemo
from controller.render import renderer as renderer_module
from controller.render.snippets import SnippetTemplate
from controller.resources import Store, collections_for
from controller.spec.loader import load_config
from controller.spec.models import HAProxyTemplateConfigSpec, RenderSettings
from tests.render.render_kit import QUICKSTART, ingress, signature, spec

FEATURES: dict[str, Any] = {
    "watchedResources": {
        "ingresses": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"},
        "services": {"apiVersion": "v1", "kind": "Service"},
        "endpointslices": {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "indexBy": ["metadata.namespace", "metadata.labels['kubernetes.io/service-name']"],
        },
    },
    "extraContext": {"port": 80, "flag": True},
    "templateSnippets": {
        # shared: reads only render-wide names; exports a macro that reads the store
        "table": {
            "template": (
                "{% macro svc_port(ns, name) %}"
                "{% set s = resources.services.get_single(ns, name) %}"
                "{{ s.spec.ports[0].port if s else 'none' }}{% endmacro %}"
                "{% set acc = namespace(hosts=[], n=0) %}"
                "{% for ing in resources.ingresses.list() %}"
                "{% for r in ing.spec.rules | default([]) %}"
                "{% set acc.hosts = acc.hosts + [r.host | default('')] %}"
                "{% endfor %}{% set acc.n = acc.n + 1 %}{% endfor %}"
                "{% set hosts = acc.hosts | unique | sort %}"
            )
        },
        # not shared: reads `b`, a name of the importing template
        "backend": {
            "template": (
                "backend {{ b }}\n"
                "{% for ep in resources.endpointslices.fetch('default', b) %}"
                "{% for e in ep.endpoints | default([]) %}"
                "    server s{{ loop.index }} {{ e.addresses[0] }}:{{ extraContext.port }}\n"
                "{% endfor %}{% endfor %}"
            )
        },
        # shared; evaluated again whenever the number of Ingresses changes, to values that
        # Python finds equal but a template can tell apart (1 and true, one list twice or
        # two equal lists, the same text from another template line): never kept for them
        "quirks": {
            "template": (
                "{% set label = none %}"
                "{% set one = 1 if resources.ingresses | length is odd else true %}"
                "{% set x = [1] %}"
                "{% set pair = [x, x] if resources.ingresses | length is odd else [x, [1]] %}"
                "{% if resources.ingresses | length is odd %}{% set label %}a{% endset %}"
                "{% else %}\n{% set label %}a{% endset %}{% endif %}"
            )
        },
        # fragments(): one evaluation per Ingress, kept while the Ingress, the arguments, its
        # reads and the shared modules it imports (none that an output changes) are the same. It exports a namespace (an
        # output assigns to it), a list, and text; it fails for the Ingress named "broken".
        "per-ing": {
            "template": (
                "{% import 'wrap' as w with context %}{% import 'quirks' as q with context %}"
                "{% set hosts = ing.spec.rules | default([]) | map(attribute='host') | list %}"
                "{% set acc = namespace(n=hosts | length) %}"
                "{% call w.box(ing.metadata.name) %}{{ hosts | length }}\n{% endcall %}"
                "{% set svc = ing.spec.rules[0].http.paths[0].backend.service.name %}"
                "ing {{ ing.metadata.name if ing.metadata.name != 'broken' else ing.nothere.x }}"
                " {{ hosts | join(',') }} {{ tag }} {{ q.one }}\n"
                "{% for f in fragments('per-svc', resources.services.fetch('default', svc), "
                "'s', port=port) %}{{ f }}{% endfor %}"
            )
        },
        # nested in per-ing; reads the store through its own recorder
        "per-svc": {
            "template": (
                "{% set eps = resources.endpointslices.fetch('default', s.metadata.name) %}"
                "{% set n = eps | map(attribute='endpoints') | map('length') | sum %}"
                "    svc {{ s.metadata.name }} {{ s.spec.ports[0].port }}/{{ port }} {{ n }}\n"
            )
        },
        # one dict per Ingress for lists.map: kept fragments keep their dicts, the very same
        # objects, as the list filters' memo expects; `one` is 1 or true (equal in Python,
        # printed apart) and `odd` a namespace (assignable: never memoized through)
        "row": {
            "template": (
                "{% set name = ing.metadata.name %}"
                "{% set host = (ing.spec.rules | default([{}]))[0].host | default('') %}"
                "{% set row = {'name': name, 'host': host, 'tls': ing.spec.tls is defined,"
                " 'one': 1 if name[-1] in '024' else true,"
                " 'rank': (ing.metadata.annotations | default({})) | length} %}"
            )
        },
        # table arguments (controller.render.keyed): `seen` and `counts` are only looked up
        # in (kept across their changes for items that asked about no changed key), `order`
        # is iterated (any change evaluates every item again)
        "per-host": {
            "template": (
                "{% set host = (ing.spec.rules | default([{}]))[0].host | default('') %}"
                "{% set n = counts.get(host, 0) %}"
                "host {{ ing.metadata.name }} {{ host }} {{ 'known' if host in seen else 'new' }}"
                " {{ n }} {{ 'any' if counts else 'none' }}{% if not seen %} empty{% endif %}"
                "{% if host ~ '-alt' not in seen %} noalt{% endif %} {{ order | length }}\n"
            )
        },
        "wrap": {
            "template": (
                "{% macro box(title) %}# {{ title }}\n{{ caller() }}# end {{ title }}\n"
                "{% endmacro %}"
            )
        },
    },
    "haproxyConfig": {
        "template": (
            "{% import 'table' as table with context %}{% from 'wrap' import box %}"
            "global\n    maxconn {{ table.acc.n + 100 }}\n"
            "{% call box('hosts') %}{% for h in table.hosts %}# host {{ h }}"
            " {{ loop.index }}/{{ loop.length }}\n{% endfor %}{% endcall %}"
            "# map {{ path_for('map', 'hosts.map') }} lines"
            " {{ outputs['hosts.map'].content.count('\\n') }}\n"
            "{% for s in resources.services %}{% set b = s.metadata.name %}"
            "{% include 'backend' %}"
            "    # port {{ table.svc_port(s.metadata.namespace, b) }}\n{% endfor %}"
            "# services {{ resources.services | length }}\n"
            "{% if extraContext.flag %}# flag\n{% endif %}"
        )
    },
    "maps": {
        "hosts.map": {
            "template": (
                "{% import 'table' as table with context %}"
                "{% for h in table.hosts %}{{ h }} x\n{% endfor %}"
            )
        },
        "single.map": {
            # an ambiguous lookup when two services share a name: a render error
            "template": (
                "{% set s = resources.services.get_single('default', 'svc-0') %}"
                "svc-0 {{ s.metadata.name if s else 'missing' }}\n"
            )
        },
        "bad.map": {
            # fails while any Ingress is named "broken"
            "template": (
                "{% for i in resources.ingresses %}"
                "{{ i.metadata.name if i.metadata.name != 'broken' else i.nothere.x }} y\n"
                "{% endfor %}"
            )
        },
        "grab.map": {
            # assigns to a shared module's namespace: the module must not be reused after
            "template": (
                "{% import 'table' as table with context %}{% set t = table.acc %}"
                "{% set t.n = t.n + 1000 %}n {{ t.n }}\n"
            )
        },
        "quirks.map": {
            "template": (
                "{% import 'quirks' as q with context %}"
                "{{ q.label }} {{ q.one }} {{ q.pair[0] is sameas q.pair[1] }}\n"
            )
        },
        "frag.map": {
            "template": (
                "{% set fs = fragments('per-ing', resources.ingresses.list(), 'ing', "
                "tag='t' ~ (extraContext.port | default(0)), port=extraContext.port | default(0)) %}"
                "{% for f in fs %}{{ f }}{{ f.hosts | length }} {{ f.acc.n }}\n{% endfor %}"
                "{% if fs %}{% set grab = fs[0].acc %}{% set grab.n = grab.n + 1 %}"
                "grabbed {{ grab.n }}\n{% endif %}"
                "{% for f in fragments('per-svc', resources.services.list(), 's', port=1) %}"
                "{{ f.n }} {{ f }}{% endfor %}"
            )
        },
        # every memoized list filter (controller.render.listmemo), over dicts from fragments
        # and stored objects, with keys that tie, repeat, go missing or are unsafe
        "lists.map": {
            "template": (
                "{% set rows = fragments('row', resources.ingresses.list(), 'ing')"
                " | map(attribute='row') | list %}"
                "{% for r in rows | sort_by('rank') | sort_by('host', 'tls') %}"
                "a {{ r.name }} {{ r.host }}\n{% endfor %}"
                "{% for r in rows | selectattr('tls') | sort(attribute='host,name') %}"
                "b {{ r.name }}\n{% endfor %}"
                "{% for r in rows | rejectattr('host', 'eq', 'h1.local')"
                " | unique(attribute='host') %}c {{ r.name }}\n{% endfor %}"
                "{% for r in rows | unique(attribute='one', case_sensitive=true) %}"
                "d {{ r.one }}\n{% endfor %}"
                "{% for g in rows | group_by('one') %}e {{ g.key }} {{ g.items | length }}"
                "\n{% endfor %}"
                "{% for g in rows | group_by('host') %}f {{ g.key }}"
                " {{ g.items | map(attribute='name') | join(',') }}\n{% endfor %}"
                "{{ rows | selectattr('host') | map_entries('host', 'name') }}"
                "{% for i in resources.ingresses.list() | sort_by('spec.tls[0].secretName',"
                " 'metadata.name') %}g {{ i.metadata.name }}\n{% endfor %}"
                "{% set odd = namespace(n=rows | length) %}"
                "{% for r in (rows + [{'name': 'ns', 'host': 'zz', 'n': odd}])"
                " | selectattr('n', 'defined') %}h {{ r.n.n }}\n{% endfor %}"
            )
        },
        "keyed.map": {
            "template": (
                "{% import 'table' as table with context %}"
                "{% set c = namespace(pairs=[]) %}"
                "{% for g in resources.ingresses.list() | group_by('spec.rules[0].host') %}"
                "{% set c.pairs = c.pairs + [(g.key, g.items | length)] %}{% endfor %}"
                "{% set seen = dict.fromkeys(table.hosts[1:]) %}"
                "{% for f in fragments('per-host', resources.ingresses.list(), 'ing', seen=seen,"
                " counts=dict(c.pairs), order=dict.fromkeys(table.hosts[:2])) %}{{ f }}"
                "{% endfor %}"
            )
        },
        "late.map": {
            "template": "{% import 'table' as table with context %}n {{ table.acc.n }}\n",
        },
    },
    "files": {
        "opt": {
            "when": "resources.ingresses | length > 2",
            "template": "{{ resources.ingresses | length }} ingresses\n",
        },
        "after-opt": {
            "template": "{{ 'opt' in outputs }}\n",
        },
        # `when`s are remembered with what they read: another output's text (and whether
        # an output was skipped), extraContext, a collection
        "text-opt": {
            "when": "'h1.local' in outputs['keyed.map'].content and 'opt' not in outputs",
            "template": "keyed\n",
        },
        "extra-opt": {
            "when": "extraContext.flag | default(false)"
            " and resources.services.get_single('default', 'svc-1')",
            "template": "flag\n",
        },
    },
}


def _features() -> HAProxyTemplateConfigSpec:
    return HAProxyTemplateConfigSpec.model_validate(FEATURES)


def _quickstart() -> HAProxyTemplateConfigSpec:
    config, problems = load_config(QUICKSTART / "config.yaml")
    assert config is not None, problems
    return config.spec


CERT = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
KEY = base64.b64encode(b"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n").decode()


def _ingress(i: int, variant: int) -> dict[str, Any]:
    svc = {"name": f"svc-{variant % 3}", "port": {"number": 80}}
    if variant % 4 == 3:
        svc = {"name": f"svc-{variant % 3}", "port": {"name": "http"}}
    annotations: dict[str, str] = {}
    if variant % 5 == 1:
        annotations["nginx.ingress.kubernetes.io/rewrite-target"] = "/x"
    if variant % 5 == 2:
        annotations["nginx.ingress.kubernetes.io/proxy-connect-timeout"] = "3"
    spec: dict[str, Any] = {
        "ingressClassName": "haproxy" if variant % 7 else "other",
        "rules": [
            {
                "host": f"h{variant % 4}.local",
                "http": {
                    "paths": [
                        {
                            "path": f"/p{variant % 3}",
                            "pathType": ["Prefix", "Exact"][variant % 2],
                            "backend": {"service": svc},
                        }
                    ]
                },
            }
        ],
    }
    if variant % 6 == 4:
        spec["tls"] = [{"hosts": [f"h{variant % 4}.local"], "secretName": f"tls-{variant % 2}"}]
    if variant % 9 == 5:
        spec["defaultBackend"] = {"service": svc}
    name = "broken" if variant == 13 else f"ing-{i}"
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": spec,
    }


def _service(i: int, variant: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"svc-{i}", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80 + variant % 2, "targetPort": 8080}]},
    }


def _slice(i: int, variant: int) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"svc-{i}-{variant % 2}",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": f"svc-{i}"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [
            {"addresses": [f"10.0.{i}.{e + 1}"], "conditions": {"ready": e != variant % 3}}
            for e in range(1 + variant % 3)
        ],
    }


def _secret(i: int, variant: int) -> dict[str, Any]:
    data = {"tls.crt": CERT, "tls.key": KEY} if variant % 3 else {"tls.crt": "!!"}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": f"tls-{i}", "namespace": "default"},
        "data": data,
    }


def _ingress_class(_i: int, variant: int) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {
            "name": "haproxy",
            "annotations": {
                "ingressclass.kubernetes.io/is-default-class": str(variant % 2 == 0).lower()
            },
        },
        "spec": {"controller": "haproxy-template.dev/ingress-controller"},
    }


MAKERS = {
    "ingresses": _ingress,
    "services": _service,
    "endpointslices": _slice,
    "secrets": _secret,
    "ingressclasses": _ingress_class,
}

steps = st.lists(
    st.tuples(
        st.sampled_from(["apply", "apply", "apply", "delete", "extra"]),
        st.sampled_from(sorted(MAKERS)),
        st.integers(0, 4),
        st.integers(0, 20),
    ),
    min_size=1,
    max_size=14,
)


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


def _run(spec: HAProxyTemplateConfigSpec, ops: list[tuple[str, str, int, int]]) -> None:
    store = Store.from_spec(spec)
    names = set(store.watched())
    incremental = Renderer(spec)
    extra: dict[str, Any] = {}
    current: dict[tuple[str, int], tuple[str, str]] = {}
    for op, collection, i, variant in ops:
        if op == "extra":
            extra = {"port": 80 + variant % 2, "flag": variant % 3 != 0} if variant % 2 else {}
        elif collection in names:
            if op == "apply":
                obj = MAKERS[collection](i, variant)
                old = current.get((collection, i))
                if old is not None and old != _key(obj):
                    store.delete(collection, old)
                for name in collections_for(obj, store.watched()):
                    store.apply(name, obj)
                current[(collection, i)] = _key(obj)
            elif (collection, i) in current:
                store.delete(collection, current.pop((collection, i)))
        view = store.snapshot()
        got = incremental.render(view, extra_context=extra)
        want = Renderer(spec).render(view, extra_context=extra)
        assert signature(got) == signature(want), (op, collection, i, variant)


@pytest.fixture(autouse=True, scope="module")
def _memo_every_list() -> Any:
    """The list filters' memo takes lists of MIN_ITEMS items or more; these libraries' are
    shorter, so here it takes every list: the property then covers its results too."""
    saved = listmemo.MIN_ITEMS
    listmemo.MIN_ITEMS = 1
    yield
    listmemo.MIN_ITEMS = saved


FAST = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
THOROUGH = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Every step of the quickstart's check builds a fresh full Renderer (about 1.3 s: 256
# certificate slots compile a template each), so 300 examples took over half an hour of CI.
THOROUGH_QUICKSTART = settings(THOROUGH, max_examples=40)


@FAST
@given(steps)
def test_quickstart_incremental_equals_full(ops: list[tuple[str, str, int, int]]) -> None:
    _run(_quickstart(), ops)


@FAST
@given(steps)
def test_feature_library_incremental_equals_full(ops: list[tuple[str, str, int, int]]) -> None:
    _run(_features(), ops)


@pytest.mark.slow
@THOROUGH_QUICKSTART
@given(steps)
def test_quickstart_incremental_equals_full_thoroughly(
    ops: list[tuple[str, str, int, int]],
) -> None:
    _run(_quickstart(), ops)


@pytest.mark.slow
@THOROUGH
@given(steps)
def test_feature_library_incremental_equals_full_thoroughly(
    ops: list[tuple[str, str, int, int]],
) -> None:
    _run(_features(), ops)


def _quickstart_store(spec: HAProxyTemplateConfigSpec) -> Store:
    store = Store.from_spec(spec)
    for k in range(4):
        for collection in ("ingresses", "services", "endpointslices"):
            obj = MAKERS[collection](k, k + 1)
            for name in collections_for(obj, store.watched()):
                store.apply(name, obj)
    return store


def test_outputs_and_modules_whose_reads_did_not_change_are_kept() -> None:
    """The mechanism is used: an EndpointSlice is read by haproxy.cfg alone, so the maps and
    the routing module are kept (the very same bytes) and haproxy.cfg renders again."""
    spec = _quickstart()
    store = _quickstart_store(spec)
    r = Renderer(spec)
    first = {e.path: e.content for e in r.render(store.snapshot()).files}
    store.apply("endpointslices", _slice(1, 7))
    view = store.snapshot()
    result = r.render(view)
    now = {e.path: e.content for e in result.files}
    assert now["maps/hosts.map"] is first["maps/hosts.map"]
    assert now["maps/paths.map"] is first["maps/paths.map"]
    assert now["haproxy.cfg"] is not first["haproxy.cfg"]
    assert signature(result) == signature(Renderer(spec).render(view))


def test_an_ignored_object_keeps_every_output() -> None:
    """An Ingress of another class is read (the routing module lists every Ingress), so the
    module is evaluated again — to the very same exports: the old module stays, and every
    output that imported it is kept (see controller.render.sameness)."""
    spec = _quickstart()
    store = _quickstart_store(spec)
    r = Renderer(spec)
    first = {e.path: e.content for e in r.render(store.snapshot()).files}
    store.apply("ingresses", _ingress(9, 7))  # variant 7: ingressClassName "other"
    view = store.snapshot()
    result = r.render(view)
    assert all(e.content is first[e.path] for e in result.files)
    assert signature(result) == signature(Renderer(spec).render(view))


def test_an_ignored_object_does_not_evaluate_the_routing_module_again() -> None:
    """routing imports our-ingresses (the Ingresses of our class) and depends on the module
    it got, not on what that module read: an Ingress of another class evaluates
    our-ingresses again (same exports, so the old module stays) and keeps routing as it
    was, unevaluated. An Ingress of our class changes our-ingresses, so routing is
    evaluated again; both renders equal full ones."""
    spec = _quickstart()
    store = _quickstart_store(spec)
    r = Renderer(spec)
    r.render(store.snapshot())
    routing, ours = (r._loader.templates[n] for n in ("routing", "our-ingresses"))
    assert isinstance(routing, SnippetTemplate) and isinstance(ours, SnippetTemplate)
    routing_memo, ours_memo = routing._memo, ours._memo
    assert routing_memo is not None and ours_memo is not None
    store.apply("ingresses", _ingress(9, 7))  # variant 7: ingressClassName "other"
    view = store.snapshot()
    result = r.render(view)
    assert routing._memo is routing_memo  # reused without evaluating it
    assert ours._memo is not None and ours._memo is not ours_memo
    assert ours._memo.module is ours_memo.module
    assert signature(result) == signature(Renderer(spec).render(view))
    store.apply("ingresses", _ingress(10, 8))  # ours
    view = store.snapshot()
    result = r.render(view)
    assert routing._memo is not None and routing._memo is not routing_memo
    assert routing._memo.module is not routing_memo.module
    assert signature(result) == signature(Renderer(spec).render(view))


def test_a_when_is_evaluated_again_only_when_what_it_read_changed() -> None:
    """The quickstart's certificate slots each have a `when` reading crt-list's text: an
    EndpointSlice leaves that text as it was, so no `when` is evaluated again; a new TLS
    Ingress changes it, and the `when`s are evaluated again (the render equals a full one)."""
    spec = _quickstart()
    store = _quickstart_store(spec)
    r = Renderer(spec)
    r.render(store.snapshot())
    judged = dict(r._judged)
    assert "tls-00.pem" in judged
    store.apply("endpointslices", _slice(1, 7))
    view = store.snapshot()
    result = r.render(view)
    assert all(r._judged[name] is j for name, j in judged.items())
    assert signature(result) == signature(Renderer(spec).render(view))
    store.apply("secrets", _secret(0, 1))
    store.apply("ingresses", _ingress(3, 4))  # variant 4: TLS with Secret tls-0
    view = store.snapshot()
    result = r.render(view)
    assert r._judged["tls-00.pem"] is not judged["tls-00.pem"]
    assert signature(result) == signature(Renderer(spec).render(view))


def test_a_kept_when_builds_no_template_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checking that a `when` still holds compares what it read; the dict a template would
    run with is made only for what runs. After one EndpointSlice change, the quickstart's
    320 certificate slots are kept without one: contexts are made for the few outputs whose
    reads changed, not for every output."""
    spec = _quickstart()
    store = _quickstart_store(spec)
    r = Renderer(spec)
    r.render(store.snapshot())
    built: list[str] = []
    full = renderer_module._Context.full

    def counted(ctx: renderer_module._Context) -> dict[str, Any]:
        built.append(",".join(sorted(ctx.deps)))
        return full(ctx)

    monkeypatch.setattr(renderer_module._Context, "full", counted)
    store.apply("endpointslices", _slice(1, 7))
    view = store.snapshot()
    result = r.render(view)
    slots = [n for n, st in result.outputs.items() if n.startswith("tls-")]
    assert len(slots) == 256 and all(result.outputs[n].state == "skipped" for n in slots)
    assert 0 < len(built) < 20, built
    assert signature(result) == signature(Renderer(spec).render(view))


def test_a_module_evaluated_to_distinguishable_values_is_not_kept() -> None:
    """1 and true, [x, x] and [x, [1]], "a" from line 1 and "a" from line 2 are equal to
    Python; quirks.map prints the difference, and renders again each time."""
    spec = _features()
    store = _quickstart_store(spec)
    r = Renderer(spec)
    for k in range(4, 7):
        store.apply("ingresses", _ingress(k, k + 1))
        view = store.snapshot()
        got = r.render(view)
        assert signature(got) == signature(Renderer(spec).render(view))
        line = got.files.get("maps/quirks.map")
        assert line is not None
        assert line.content == (b"a 1 True\n" if k % 2 == 0 else b"a True False\n")


def test_a_shared_module_an_output_changed_is_not_kept() -> None:
    """grab.map assigns to the shared module's namespace: whatever uses that module renders
    again every time (and reads what full renders read); the rest is kept."""
    spec = _features()
    store = _quickstart_store(spec)
    r = Renderer(spec)
    first = {e.path: e.content for e in r.render(store.snapshot()).files}
    again = r.render(store.snapshot())
    now = {e.path: e.content for e in again.files}
    assert now["maps/single.map"] is first["maps/single.map"]
    assert now["maps/late.map"] is not first["maps/late.map"]
    assert now["maps/late.map"] == b"n 1004\n"  # after grab.map's assignment, as in full
    assert signature(again) == signature(Renderer(spec).render(store.snapshot()))


_NESTED = {
    # A filter whose reads change with any Ingress, and a module that imports it.
    "ours": (
        "{% set o = namespace(items=[]) %}"
        "{% for i in resources.ingresses.list() if i.spec.ingressClassName == 'haproxy' %}"
        "{% set o.items = o.items + [i.metadata.name] %}{% endfor %}"
        "{% set items = o.items %}{% set text %}{{ items | join(',') }}{{ 'i' * 300 }}{% endset %}"
    ),
    "table": (
        "{% import 'ours' as ours with context %}"
        "{% set text %}{% for n in ours.items %}{{ n }}={{ 't' * 100 }}\n{% endfor %}"
        "{{ ours.text }}{% endset %}"
    ),
}


def _nested_spec(max_output_bytes: int | None = None) -> HAProxyTemplateConfigSpec:
    s = spec(
        "{% import 'table' as table with context %}{{ table.text }}",
        maps={"a.map": "{% import 'table' as table with context %}{{ table.text | length }}"},
        snippets=_NESTED,
    )
    if max_output_bytes is None:
        return s
    return s.model_copy(
        update={"render": RenderSettings.model_validate({"max_output_bytes": max_output_bytes})}
    )


def _nested_store(spec_: HAProxyTemplateConfigSpec, n: int) -> Store:
    store = Store.from_spec(spec_)
    for k in range(n):
        store.apply("ingresses", ingress(f"ing-{k}", f"h{k}.local"))
    return store


@pytest.mark.parametrize("step", ["ignored", "ours"])
def test_a_module_kept_for_its_imports_is_charged_as_if_evaluated(step: str) -> None:
    """The size budget of a render that keeps `table` (its import `ours` evaluated again to
    the same exports) or evaluates both again runs out exactly where a full render's does:
    the smallest budget a full render fits in fits the incremental render too, and one
    byte less fails both."""
    store = _nested_store(_nested_spec(), 3)
    before = store.snapshot()
    cls = "another" if step == "ignored" else "haproxy"
    store.apply("ingresses", ingress("ing-9", "h9.local", cls=cls))
    view = store.snapshot()

    def fits(limit: int, incremental: bool) -> bool:
        r = Renderer(_nested_spec())
        if incremental:
            assert r.render(before).ok  # within the default budget
        r.spec = _nested_spec(limit)  # read per render: the next one gets this budget
        return r.render(view).ok

    low, high = 1, 1 << 16
    while low < high:  # the smallest budget a full render fits in (at most 17 steps)
        mid = (low + high) // 2
        if fits(mid, False):
            high = mid
        else:
            low = mid + 1
    assert low > 1000  # both modules' text is counted
    assert fits(low, True)
    assert not fits(low - 1, True)
