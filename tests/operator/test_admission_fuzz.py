"""Hypothesis-generated AdmissionReviews, posted over HTTPS to the real webhook server.

Whatever arrives, the server answers and lives on: a body that is not an AdmissionReview with a
``request.uid`` gets a 400 whose ``error`` says what is wrong; a well-formed review gets an
AdmissionReview response for its uid, allowed or denied with a message. No review may reach the
server's last-resort handler ("could not be judged"), which exists for bugs, not for input.

The stack is the one ``htc run`` serves: ``WebhookServer`` → ``AdmissionJudge`` → the engine built
from the quickstart spec (real haproxy) over a store of the quickstart's resources, with
Ingresses and Services judged (``admission: true``). The server runs in a thread of its own
with its own loop, as beside kopf; no API server is needed to post reviews.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from controller.cli.inputs import load_inputs
from controller.observability import Metrics
from controller.operator.watchset import CONFIG_GROUP, CONFIG_VERSION
from controller.operator.webhook import WebhookServer, WebhookSettings
from controller.testbed.tls import serving_certs
from controller.triggers import AdmissionDecision, AdmissionJudge, default_engine
from tests.operator.hostile_kit import SPEC, json_like, names, objects

pytestmark = pytest.mark.haproxy

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart"
JUDGED = ("ingresses", "services")
WATCHED = {
    name: w.model_copy(update={"admission": name in JUDGED})
    for name, w in SPEC.watched_resources.items()
}


@dataclass
class Served:
    url: str
    tls: ssl.SSLContext
    metrics: Metrics
    decisions: list[tuple[dict[str, Any], AdmissionDecision]] = field(default_factory=list)

    def post(self, body: bytes) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, context=self.tls, timeout=30) as resp:
                return int(resp.status), json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return int(exc.code), json.loads(exc.read())


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    ca, cert, key = serving_certs(tmp_path_factory.mktemp("tls"))
    inputs = load_inputs(QUICKSTART / "config.yaml", [QUICKSTART / "resources"])
    factory = default_engine("/usr/sbin/haproxy")
    engine = factory(SPEC)
    store = inputs.store
    judge = AdmissionJudge(
        engine=lambda: engine,
        view=store.snapshot,
        baseline_valid=lambda: True,
        engine_factory=factory,
    )
    decisions: list[tuple[dict[str, Any], AdmissionDecision]] = []
    metrics = Metrics()
    loop = asyncio.new_event_loop()
    server = WebhookServer(
        WebhookSettings("127.0.0.1:0", cert, key),
        judge,
        watched=lambda: WATCHED,
        config_ref=("default", "quickstart"),
        spec_override=lambda spec: spec,
        on_decision=lambda req, decision: decisions.append((req, decision)),
        metrics=metrics,
    )
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
    try:
        yield Served(
            f"https://127.0.0.1:{server.port}/validate?timeout=20s",
            ssl.create_default_context(cafile=str(ca)),
            metrics,
            decisions,
        )
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


KINDS = [(w.api_version, w.kind) for w in WATCHED.values()] + [
    (f"{CONFIG_GROUP}/{CONFIG_VERSION}", "HAProxyTemplateConfig")
]


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """A review's ``request``: mostly the shape the API server sends, every field hostile."""
    if draw(st.integers(0, 9)) < 8:  # a spec builds a new engine: the dearest case, drawn less
        judged_only = draw(st.integers(0, 9)) < 8  # the other collections are not judged
        collection, obj = draw(objects(JUDGED if judged_only else None))
        w = WATCHED[collection]
        api_version, kind = w.api_version, w.kind
        if draw(st.integers(0, 9)) < 7:  # mostly an object the store can hold: it is rendered
            meta = obj.get("metadata")
            obj["metadata"] = {
                **(meta if isinstance(meta, dict) else {}),
                "name": draw(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)),
                "namespace": "default",
            }
    else:
        api_version, kind = draw(st.sampled_from(KINDS))
        obj = draw(json_like) if draw(st.booleans()) else _config(draw)  # type: ignore[arg-type]
    group, _, version = api_version.rpartition("/")
    req: dict[str, Any] = {
        "uid": draw(st.text(min_size=1, max_size=36)),
        "kind": (
            {"group": group, "version": version, "kind": kind}
            if draw(st.integers(0, 9)) < 8
            else draw(json_like)
        ),
        "operation": draw(
            st.sampled_from(["CREATE", "UPDATE", "DELETE"] * 4 + ["CONNECT", "", "x"])
        ),
        "namespace": draw(st.one_of(names, st.just("default"))),
        "name": draw(st.one_of(names, st.just("quickstart"))),
        "dryRun": draw(st.one_of(st.booleans(), json_like)),
    }
    for key in ("object", "oldObject"):
        choice = draw(st.sampled_from(["same", "same", "same", "none", "junk", "absent"]))
        if choice == "same":
            req[key] = obj
        elif choice == "none":
            req[key] = None
        elif choice == "junk":
            req[key] = draw(json_like)
    return req


def _config(draw: st.DrawFn) -> dict[str, Any]:
    """A config CR whose spec is the quickstart's with one field made hostile."""
    spec = SPEC.model_dump(by_alias=True, exclude_none=True, mode="json")
    field_name = draw(st.sampled_from(["haproxyConfig", "watchedResources", "extraContext", "x"]))
    spec[field_name] = draw(json_like)
    return {
        "apiVersion": f"{CONFIG_GROUP}/{CONFIG_VERSION}",
        "kind": "HAProxyTemplateConfig",
        "metadata": {"name": "quickstart", "namespace": "default"},
        "spec": spec,
    }


#: Every label value the admission metrics may carry, whatever is posted: the kinds this
#: test's spec judges, the config, and ``other`` (a hostile kind must not grow the set).
LABELS = {
    "kind": {"HAProxyTemplateConfig", "other"} | {WATCHED[c].kind for c in JUDGED},
    "operation": {"CREATE", "UPDATE", "DELETE", "other"},
    "result": {"allowed", "denied", "timeout", "malformed"},
}


def counted(metrics: Metrics) -> dict[tuple[str, str, str], float]:
    """The admission reviews counted so far, by (kind, operation, result)."""
    out: dict[tuple[str, str, str], float] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "htc_admission_reviews_total":
                labels = sample.labels
                out[(labels["kind"], labels["operation"], labels["result"])] = sample.value
    return out


def timings(metrics: Metrics) -> dict[str, float]:
    """How many answer times were observed so far, by kind."""
    return {
        kind: metrics.sample("htc_admission_review_duration_seconds_count", {"kind": kind})
        for kind in LABELS["kind"]
    }


def check(served: Served, body: bytes, review: Any) -> None:
    before = len(served.decisions)
    counts = counted(served.metrics)
    timed = sum(timings(served.metrics).values())
    status, answer = served.post(body)
    after = counted(served.metrics)
    assert sum(timings(served.metrics).values()) == timed + 1  # and its time observed once
    grown = {k: v - counts.get(k, 0.0) for k, v in after.items() if v != counts.get(k, 0.0)}
    assert list(grown.values()) == [1.0], grown  # one answer, counted once
    ((kind, operation, result),) = grown
    assert kind in LABELS["kind"] and operation in LABELS["operation"], grown
    assert result == (
        "malformed"
        if status == 400
        else "allowed"
        if answer.get("response", {}).get("allowed")
        else "denied"
    )
    req = review.get("request") if isinstance(review, dict) else None
    well_formed = (
        isinstance(req, dict)
        and isinstance(req.get("uid"), str)
        and isinstance(req.get("kind"), dict)
    )
    if not well_formed:
        assert status == 400, (status, answer)
        assert isinstance(answer.get("error"), str) and answer["error"]
        return
    assert status == 200 and isinstance(req, dict), (status, answer)
    response = answer["response"]
    assert answer["kind"] == "AdmissionReview" and response["uid"] == req["uid"]
    assert isinstance(response["allowed"], bool)
    if not response["allowed"]:
        assert response["status"]["code"] == 403 and response["status"]["message"]
    (got,) = [d for _, d in served.decisions[before:]]
    event("rendered and judged" if got.checksum else "answered before a render")
    event("allowed" if got.allowed else "denied")
    assert not got.message.startswith("the request could not be judged"), got.message
    assert not got.message.startswith("judging failed"), got.message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(requests().map(lambda r: {"apiVersion": "admission.k8s.io/v1",
                                            "kind": "AdmissionReview", "request": r}),
                 json_like))  # fmt: skip
def test_any_review_gets_an_answer_or_a_400(served: Served, review: Any) -> None:
    check(served, json.dumps(review, allow_nan=True).encode(), review)


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=200))
def test_bytes_that_are_not_a_review_get_a_400(served: Served, body: bytes) -> None:
    try:
        review = json.loads(body)
    except ValueError:
        review = None
    check(served, body, review)
