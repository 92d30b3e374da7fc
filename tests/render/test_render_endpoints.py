"""``ready_endpoints``: EndpointSlices → the ready address:port pairs of one Service port."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.render.filters import FilterError, ready_endpoints
from tests.render.render_kit import render, spec, text


def eps(
    name: str,
    endpoints: list[Any],
    *,
    ports: Any = None,
    address_type: str | None = "IPv4",
) -> dict[str, Any]:
    s: dict[str, Any] = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "default"},
        "ports": [{"name": "http", "port": 8080}] if ports is None else ports,
        "endpoints": endpoints,
    }
    if address_type is not None:
        s["addressType"] = address_type
    return s


def ep(*addresses: str | None, ready: object = True) -> dict[str, Any]:
    e: dict[str, Any] = {"addresses": list(addresses)}
    if ready is not None:
        e["conditions"] = {"ready": ready}
    return e


def pairs(slices: list[dict[str, Any]], port: str = "http") -> list[str]:
    return [f"{e['address']}:{e['port']}" for e in ready_endpoints(slices, port)]


def test_slices_by_name_each_endpoint_once_where_it_first_appears() -> None:
    later = eps("svc-b", [ep("10.0.0.3"), ep("10.0.0.1")])
    first = eps("svc-a", [ep("10.0.0.1"), ep("10.0.0.2", "10.0.0.2")])
    assert pairs([later, first]) == ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"]


def test_readiness_unset_means_ready_false_means_not() -> None:
    s = eps("s", [ep("10.0.0.1", ready=False), ep("10.0.0.2", ready=None), ep("10.0.0.3")])
    s["endpoints"].append({"addresses": ["10.0.0.4"], "conditions": {}})
    assert pairs([s]) == ["10.0.0.2:8080", "10.0.0.3:8080", "10.0.0.4:8080"]


def test_only_ip_slices_and_the_named_port() -> None:
    ports = [{"name": "metrics", "port": 9090}, {"port": 80}]
    slices = [
        eps("a", [ep("10.0.0.1")], ports=ports, address_type=None),  # unset: IPv4
        eps("b", [ep("fd00::1")], ports=ports, address_type="IPv6"),
        eps("c", [ep("db.example.test")], ports=ports, address_type="FQDN"),
    ]
    assert pairs(slices, "") == ["10.0.0.1:80", "fd00::1:80"]
    assert pairs(slices, "metrics") == ["10.0.0.1:9090", "fd00::1:9090"]
    assert pairs(slices, "none") == []


def test_items_carry_the_endpoint_object() -> None:
    e = ep("10.0.0.1") | {"zone": "z1", "nodeName": "n1"}
    (item,) = ready_endpoints([eps("s", [e])], "http")
    assert item == {"address": "10.0.0.1", "port": 8080, "endpoint": e}


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ("a slice", "is a str, not a mapping"),
        (eps("s", [ep("10.0.0.1")], ports=[{"name": "http"}]), "has no port number"),
        (eps("s", [ep("10.0.0.1")], ports=[{"name": "http", "port": "80"}]), "no port number"),
        (eps("s", [{"conditions": {"ready": True}}]), "addresses is a NoneType"),
        (eps("s", [ep(None)]), "an address is a NoneType, not a string"),
        (eps("s", ["10.0.0.1"]), "an endpoint is a str"),
        (eps("s", [ep("10.0.0.1")], ports="http"), "ports is a str"),
        (eps("s", [{"addresses": ["10.0.0.1"], "conditions": "yes"}]), "conditions is a str"),
    ],
)
def test_malformed_slices_are_refused_naming_what(broken: object, message: str) -> None:
    with pytest.raises(FilterError, match=message):
        ready_endpoints([broken], "http")


def test_the_port_name_must_be_a_string() -> None:
    with pytest.raises(FilterError, match="port name must be a string"):
        ready_endpoints([], 80)


WATCHED = {
    "endpointslices": {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice"},
}


def test_in_a_template_and_a_bad_slice_is_a_render_error() -> None:
    template = (
        "{% for e in resources.endpointslices.list() | ready_endpoints('http') %}"
        "server {{ e.address }}:{{ e.port }} zone={{ e.endpoint.zone | default('-') }}\n"
        "{% endfor %}"
    )
    good = eps("s", [ep("10.0.0.1") | {"zone": "z1"}, ep("10.0.0.2")])
    r = render(spec(template, watched=WATCHED), [("endpointslices", good)])
    assert text(r) == "server 10.0.0.1:8080 zone=z1\nserver 10.0.0.2:8080 zone=-\n"
    bad = eps("t", [ep("10.0.0.3")], ports=[{"name": "http"}])
    r = render(spec(template, watched=WATCHED), [("endpointslices", good), ("endpointslices", bad)])
    (d,) = r.diagnostics
    assert d.rule_id == "E1004" and "EndpointSlice default/t" in d.message
    assert "haproxy.cfg" not in r.files


# The loops the filter replaced in the quickstart, as the reference for any slices.
LOOPS = """\
{% set seen = namespace(endpoints=[]) %}
{% for slice in resources.endpointslices.list() | sort_by('metadata.name') if slice.addressType | default('IPv4') in ['IPv4', 'IPv6'] %}
{% for sport in slice.ports | default([]) if (sport.name | default('')) == port %}
{% for ep in slice.endpoints | default([]) if (ep.conditions | default({})).ready | default(none) is not false %}
{% for address in ep.addresses %}
{% set endpoint = address ~ ':' ~ sport.port %}
{% if endpoint not in seen.endpoints %}
{% set seen.endpoints = seen.endpoints + [endpoint] %}
{{ endpoint }}
{% endif %}
{% endfor %}
{% endfor %}
{% endfor %}
{% endfor %}
"""
FILTER = """\
{% for e in resources.endpointslices.list() | ready_endpoints(port) %}
{{ e.address }}:{{ e.port }}
{% endfor %}
"""

ADDRESS = st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.3", "fd00::1"])
ENDPOINT = st.builds(
    lambda addresses, ready: ep(*addresses, ready=ready),
    st.lists(ADDRESS, min_size=1, max_size=2),
    st.sampled_from([True, False, None]),
)
PORT = st.builds(
    lambda name, number: ({"name": name} if name is not None else {}) | {"port": number},
    st.sampled_from([None, "", "http", "admin"]),
    st.sampled_from([80, 8080]),
)
SLICE = st.builds(
    lambda name, endpoints, ports, family: eps(name, endpoints, ports=ports, address_type=family),
    st.sampled_from(["a", "b", "c"]),
    st.lists(ENDPOINT, max_size=4),
    st.lists(PORT, max_size=3),
    st.sampled_from([None, "IPv4", "IPv6", "FQDN"]),
)


@given(
    st.lists(SLICE, max_size=4, unique_by=lambda s: s["metadata"]["name"]),
    st.sampled_from(["", "http"]),
)
@settings(max_examples=150, deadline=None)
def test_the_filter_renders_what_the_template_loops_render(slices: list[Any], port: str) -> None:
    objects = [("endpointslices", s) for s in slices]
    extra = {"port": port}
    loops = render(
        spec("{% set port = extraContext.port %}" + LOOPS, watched=WATCHED, extra=extra), objects
    )
    native = render(
        spec("{% set port = extraContext.port %}" + FILTER, watched=WATCHED, extra=extra), objects
    )
    assert text(native) == text(loops)
