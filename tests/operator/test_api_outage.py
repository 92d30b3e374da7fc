"""The API server stops for 10 s and comes back: HAProxy keeps serving, ``/readyz`` is false
meanwhile, the watches resume, and no change is lost (one made just before the outage, one just
after it)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from controller.testbed.cluster import Namespace
from controller.testbed.podnet import Pod
from tests.operator.operator_kit import (
    backend_manifests,
    config_doc,
    eventually,
    free_port,
    ingress,
    start_echo,
    start_run,
)

pytestmark = pytest.mark.cluster


def test_outage_of_the_api_server(kube: Namespace, pod: Pod, tmp_path: Path) -> None:
    start_echo(pod, "web-1")
    listen = free_port()
    kube.apply(yaml.safe_dump(config_doc(kube.name, listen)))
    kube.apply(backend_manifests(kube.name, "web", pod.ip))
    kube.apply(ingress(kube.name, "web", "web.test", "web"))
    run = start_run(kube, "/usr/sbin/haproxy", tmp_path / "run", listen=listen)
    try:
        run.wait_serving()
        eventually(lambda: run.readyz() == 200, "ready")
        kube.apply(ingress(kube.name, "before", "before.test", "web"))
        kube.plane.stop_apiserver()
        try:
            down = time.monotonic()
            eventually(lambda: run.readyz() == 503, "/readyz to turn false", 10)
            served = 0
            while time.monotonic() - down < 10:  # bounded: 10 s, one request per 0.2 s
                assert run.get("web.test")[0] == 200, "traffic stopped during the outage"
                served += 1
                time.sleep(0.2)
            assert served >= 20
        finally:
            kube.plane.start_apiserver()
        kube.apply(ingress(kube.name, "after", "after.test", "web"))
        eventually(lambda: run.get("before.test")[0] == 200, "the change made before", 60)
        eventually(lambda: run.get("after.test")[0] == 200, "the change made after", 60)
        eventually(lambda: run.readyz() == 200, "/readyz to turn true again", 30)
        assert run.proc.poll() is None
    finally:
        run.stop()
