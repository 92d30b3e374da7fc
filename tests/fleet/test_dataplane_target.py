"""DataplaneTarget against a real dataplaneapi v3.2.5 managing real HAProxy 2.6 and 2.8."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

from controller.deploy.dataplane import DataplaneDetail, DataplaneTarget
from controller.deploy.dataplane_client import DataplaneClient
from controller.deploy.target import DeployOutcome
from controller.observability.metrics import Metrics
from controller.render import FileEntry, FileKind, FileSet
from tests.fleet.dataplane_kit import (
    PASSWORD,
    USER,
    HAProxyPod,
    PodFactory,
    free_port,
    second_writer,
    self_signed,
    site_pem,
)
from tests.fleet.fleet_helpers import config_set, eventually, validated


async def test_push_reloads_once_and_serves(one: tuple[HAProxyPod, DataplaneTarget]) -> None:
    pod, target = one
    v1 = await validated(config_set(pod.addr, pod.port, "one"))
    result = await target.deploy(v1)
    assert result.outcome is DeployOutcome.DEPLOYED, result.diagnostics
    assert result.reloaded and result.active_checksum == v1.checksum
    assert isinstance(result.detail, DataplaneDetail) and result.detail.reload_id
    # 2.8 reports its startup log; 2.6 what hack/dataplaneapi/haproxy-reload.sh printed.
    assert ("Loading success" in result.haproxy_log) or ("new worker" in result.haproxy_log)
    assert pod.get() == "one"
    again = await target.deploy(v1)
    assert again.outcome is DeployOutcome.UNCHANGED and not again.reloaded
    v2 = await validated(config_set(pod.addr, pod.port, "two"))
    assert (await target.deploy(v2)).outcome is DeployOutcome.DEPLOYED
    assert pod.get() == "two"


async def test_a_refused_reload_rolls_back(one: tuple[HAProxyPod, DataplaneTarget]) -> None:
    """A second bind on a port someone holds passes ``haproxy -c`` and fails the reload."""
    pod, target = one
    good = await validated(config_set(pod.addr, pod.port, "good"))
    assert (await target.deploy(good)).ok
    with socket.socket() as holder:
        holder.bind((pod.addr, 0))
        holder.listen()
        busy = holder.getsockname()[1]
        bad = await validated(
            config_set(pod.addr, pod.port, "bad", extra=f"    bind {pod.addr}:{busy}\n")
        )
        result = await target.deploy(bad)
    assert result.outcome is DeployOutcome.ROLLED_BACK, result.diagnostics
    assert result.active_checksum == good.checksum and result.reloaded
    assert result.diagnostics[0].rule_id == "E7001"
    assert pod.get() == "good"
    # The API put its last good file back: the pod is where it was, nothing drifted.
    assert await target.check_drift() is None
    assert (await target.deploy(good)).outcome is DeployOutcome.UNCHANGED


async def test_a_version_conflict_is_read_again_and_retried(
    one: tuple[HAProxyPod, DataplaneTarget],
) -> None:
    pod, target = one
    assert (await target.deploy(await validated(config_set(pod.addr, pod.port, "a")))).ok
    await second_writer(pod, reload=False)
    v2 = await validated(config_set(pod.addr, pod.port, "b"))
    result = await target.deploy(v2)
    assert result.outcome is DeployOutcome.DEPLOYED, result.diagnostics
    assert isinstance(result.detail, DataplaneDetail) and result.detail.conflicts == 1
    assert pod.get() == "b"


MAPPED = (
    "    http-request return status 200 content-type text/plain lf-string "
    '"%[req.hdr(host),field(1,:),map(maps/hosts.map,unknown)]"\n'
)


async def test_maps_certificates_and_files_follow_the_set(
    one: tuple[HAProxyPod, DataplaneTarget], tmp_path: Path
) -> None:
    pod, target = one
    tls_port = free_port()
    pem = site_pem(tmp_path, pod.addr)
    extra = (
        f"    bind {pod.addr}:{tls_port} ssl crt certs/site.pem\n"
        "    http-request return status 200 content-type text/plain file files/hello.txt "
        "if { path /hello }\n" + MAPPED
    )
    first = config_set(
        pod.addr,
        pod.port,
        "unused",
        extra=extra,
        aux={
            "maps/hosts.map": (FileKind.MAP, b"127.0.0.1 from-map-1\n10.244.0.0 x\n"),
            "certs/site.pem": (FileKind.CERT, pem),
            "files/hello.txt": (FileKind.FILE, b"hello file\n"),
            "files/old.txt": (FileKind.FILE, b"goes away\n"),
        },
    )
    result = await target.deploy(await validated(first))
    assert result.outcome is DeployOutcome.DEPLOYED, result.diagnostics
    assert pod.get() == "from-map-1"
    assert pod.get("/hello") == "hello file\n"
    ctx = ssl.create_default_context(cadata=None)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with (
        socket.create_connection((pod.addr, tls_port), timeout=3) as raw,
        ctx.wrap_socket(raw) as tls,
    ):
        assert tls.getpeercert(binary_form=True) == ssl.PEM_cert_to_DER_cert(
            pem.decode().split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
        )

    second = config_set(
        pod.addr,
        pod.port,
        "unused",
        extra=extra,
        aux={
            "maps/hosts.map": (FileKind.MAP, b"127.0.0.1 from-map-2\n10.244.0.0 x\n"),
            "certs/site.pem": (FileKind.CERT, pem),
            "files/hello.txt": (FileKind.FILE, b"hello again\n"),
        },
    )
    result = await target.deploy(await validated(second))
    assert result.outcome is DeployOutcome.DEPLOYED, result.diagnostics
    assert pod.get("/hello") == "hello again\n"
    assert (pod.base / "maps" / "hosts.map").read_bytes().startswith(b"127.0.0.1 from-map-2")
    assert sorted(p.name for p in (pod.base / "files").iterdir()) == ["hello.txt"]


async def test_drift_redeploys_the_last_validated_set(
    one: tuple[HAProxyPod, DataplaneTarget],
) -> None:
    pod, target = one
    files = config_set(pod.addr, pod.port, "valid", aux={"maps/a.map": (FileKind.MAP, b"k v\n")})
    good = await validated(files)
    assert (await target.deploy(good)).ok
    assert await target.check_drift() is None
    (pod.base / "maps" / "a.map").write_bytes(b"k edited\n")
    edited = config_set(pod.addr, pod.port, "edited by hand").main
    assert edited is not None
    await second_writer(pod, edited.content, reload=True)
    assert await eventually(pod.get, "edited by hand") == "edited by hand"
    result = await target.check_drift()
    assert result is not None and result.outcome is DeployOutcome.DEPLOYED
    assert set(result.drift) == {"haproxy.cfg", "maps/a.map"}
    assert result.diagnostics[0].rule_id == "W7007"
    assert pod.get() == "valid"
    assert (pod.base / "maps" / "a.map").read_bytes() == b"k v\n"
    assert target.metrics.sample("htc_drift_redeploys_total", {"target": target.name}) == 1


async def test_a_config_the_api_would_alter_is_withdrawn_before_any_reload(
    one: tuple[HAProxyPod, DataplaneTarget],
) -> None:
    """dataplaneapi stores its own serialization; a Latin-1 byte comes back as U+FFFD."""
    pod, target = one
    assert (await target.deploy(await validated(config_set(pod.addr, pod.port, "kept")))).ok
    latin = config_set(
        pod.addr, pod.port, "changed", extra="    http-response set-header X-Cafe caf\xe9\n"
    )
    raw = latin.main
    assert raw is not None
    altered = FileSet.of(
        [FileEntry("haproxy.cfg", FileKind.CONFIG, raw.content.replace("é".encode(), b"\xe9"))]
    )
    result = await target.deploy(await validated(altered))
    assert result.outcome is DeployOutcome.FAILED
    assert result.diagnostics[0].rule_id == "F7014" and "X-Cafe" in result.diagnostics[0].message
    assert not result.reloaded
    assert pod.get() == "kept"
    _, stored = await target.client.raw()
    assert '"kept"' in stored


async def test_https_with_a_ca_bundle_and_wrong_credentials(
    haproxy_pods: PodFactory, tmp_path: Path
) -> None:
    cert, key, ca = self_signed(tmp_path)
    pod = haproxy_pods(tls=(cert, key))
    assert pod.url.startswith("https://")
    target = DataplaneTarget(
        pod.name, DataplaneClient(pod.url, USER, PASSWORD, ca=ca.decode()), metrics=Metrics()
    )
    wrong = DataplaneTarget(
        "wrong", DataplaneClient(pod.url, USER, "nope", ca=ca.decode()), metrics=Metrics()
    )
    untrusted = DataplaneTarget(
        "untrusted", DataplaneClient(pod.url, USER, PASSWORD), metrics=Metrics()
    )
    try:
        v = await validated(config_set(pod.addr, pod.port, "over tls"))
        assert (await target.deploy(v)).outcome is DeployOutcome.DEPLOYED
        assert pod.get() == "over tls"
        for bad, says in ((wrong, "401"), (untrusted, "certificate")):
            result = await bad.deploy(v)
            assert result.outcome is DeployOutcome.FAILED
            assert result.diagnostics[0].rule_id == "E7013"
            assert says in result.diagnostics[0].message
    finally:
        for t in (target, wrong, untrusted):
            await t.close()
