"""`htc run`: the controller in a cluster (kopf watches, leader election, status, Events).

``--deploy embedded`` (the default) runs a HAProxy beside each replica; ``--deploy dataplane``
deploys to the HAProxy pods that ``--haproxy-selector`` finds, through their Data Plane API
(docs/topologies.md)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import click

from controller.cli.local import CannotStart
from controller.deploy import HAProxyNotFound
from controller.observability import configure
from controller.operator import DataplaneSettings, OperatorApp, OperatorOptions


@click.command(name="run")
@click.option(
    "--kubeconfig", metavar="PATH", help="Kubeconfig (default: in-cluster, then $KUBECONFIG)."
)
@click.option("--namespace", required=True, help="Namespace of the HAProxyTemplateConfig.")
@click.option("--config", "config", required=True, help="Name of the HAProxyTemplateConfig.")
@click.option(
    "--haproxy",
    metavar="BIN",
    help="haproxy binary to validate with (and, with --deploy embedded, to run).",
)
@click.option("--listen", metavar="ADDR", help="Frontend address (sets extraContext.listen).")
@click.option(
    "--status-addr",
    metavar="ADDR",
    default="127.0.0.1:9180",
    show_default=True,
    help="Address of /metrics, /healthz, /readyz and /status; 'off' disables it.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the deployed files and the master socket go (default: a temporary directory).",
)
@click.option(
    "--deploy",
    type=click.Choice(["embedded", "dataplane"]),
    default="embedded",
    show_default=True,
    help="embedded: run and reload a HAProxy here; dataplane: deploy to the HAProxy pods "
    "--haproxy-selector finds, through their Data Plane API (the leader only).",
)
@click.option(
    "--haproxy-selector", metavar="LABELS", help="Label selector of the HAProxy pods (dataplane)."
)
@click.option(
    "--haproxy-namespace",
    metavar="NS",
    help="Namespace of the HAProxy pods (default: --namespace).",
)
@click.option("--dataplane-port", type=int, default=5555, show_default=True)
@click.option(
    "--dataplane-secret",
    metavar="NAME",
    default="dataplane-credentials",
    show_default=True,
    help="Secret in the HAProxy namespace with the keys username and password.",
)
@click.option(
    "--dataplane-ca",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="CA bundle the Data Plane APIs' certificates chain to (then HTTPS).",
)
@click.option(
    "--leader-election/--no-leader-election",
    default=True,
    show_default=True,
    help="Elect one replica (a coordination.k8s.io Lease) to write status and Events.",
)
@click.option("--lease-name", default="haproxy-template-controller", show_default=True)
@click.option("--lease-namespace", help="Namespace of the Lease (default: --namespace).")
@click.option("--lease-duration", type=float, default=15.0, show_default=True)
@click.option("--renew-deadline", type=float, default=10.0, show_default=True)
@click.option("--retry-period", type=float, default=2.0, show_default=True)
@click.option("--identity", help="This replica's name in the Lease (default: host-pid).")
@click.option("--webhook-addr", metavar="ADDR", help="Serve the admission webhook (HTTPS) here.")
@click.option("--webhook-cert", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--webhook-key", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--webhook-allow-on-timeout",
    is_flag=True,
    help="Allow, instead of deny, a request whose check overruns the API server's timeout.",
)
@click.option(
    "--ingress-class",
    "ingress_classes",
    multiple=True,
    default=("haproxy",),
    show_default=True,
    help="IngressClass the templates serve (repeatable): its Ingresses get the published address.",
)
@click.option(
    "--publish-address", metavar="ADDR", help="Address for status.loadBalancer of served Ingresses."
)
@click.option(
    "--publish-service",
    metavar="NS/NAME",
    help="Or: publish the addresses of this Service (load balancer, external IPs, ClusterIP).",
)
@click.option(
    "--log-format",
    type=click.Choice(["auto", "json", "console"]),
    default="json",
    show_default=True,
)
@click.option("--log-level", default="info", show_default=True)
def command(
    kubeconfig: str | None,
    namespace: str,
    config: str,
    haproxy: str | None,
    listen: str | None,
    status_addr: str,
    work_dir: Path | None,
    deploy: str,
    haproxy_selector: str | None,
    haproxy_namespace: str | None,
    dataplane_port: int,
    dataplane_secret: str,
    dataplane_ca: Path | None,
    leader_election: bool,
    lease_name: str,
    lease_namespace: str | None,
    lease_duration: float,
    renew_deadline: float,
    retry_period: float,
    identity: str | None,
    webhook_addr: str | None,
    webhook_cert: Path | None,
    webhook_key: Path | None,
    webhook_allow_on_timeout: bool,
    ingress_classes: tuple[str, ...],
    publish_address: str | None,
    publish_service: str | None,
    log_format: str,
    log_level: str,
) -> None:
    """Watch the HAProxyTemplateConfig NAMESPACE/CONFIG and the resources it names; deploy
    every validated configuration to a supervised HAProxy; publish status and Events."""
    configure(fmt=log_format, level=log_level, stream=sys.stderr)  # type: ignore[arg-type]
    if not renew_deadline < lease_duration:
        raise CannotStart("--renew-deadline must be shorter than --lease-duration")
    dataplane = None
    if deploy == "dataplane":
        if not haproxy_selector:
            raise CannotStart("--deploy dataplane needs --haproxy-selector")
        dataplane = DataplaneSettings(
            namespace=haproxy_namespace or namespace,
            selector=haproxy_selector,
            port=dataplane_port,
            secret=dataplane_secret,
            ca=dataplane_ca.read_text() if dataplane_ca else None,
        )
    elif haproxy_selector or haproxy_namespace or dataplane_ca:
        raise CannotStart(
            "--haproxy-selector, --haproxy-namespace and --dataplane-ca need --deploy dataplane"
        )
    service = None
    if publish_service:
        ns, _, name = publish_service.partition("/")
        if not ns or not name:
            raise CannotStart("--publish-service takes NAMESPACE/NAME")
        service = (ns, name)
    options = OperatorOptions(
        namespace=namespace,
        config=config,
        kubeconfig=kubeconfig,
        haproxy=haproxy,
        listen=listen,
        status_addr=None if status_addr == "off" else status_addr,
        work_dir=work_dir,
        dataplane=dataplane,
        leader_election=leader_election,
        lease_name=lease_name,
        lease_namespace=lease_namespace,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
        identity=identity,
        webhook_addr=webhook_addr,
        webhook_cert=webhook_cert,
        webhook_key=webhook_key,
        webhook_allow_on_timeout=webhook_allow_on_timeout,
        ingress_classes=ingress_classes,
        publish_address=publish_address,
        publish_service=service,
    )
    try:
        app = OperatorApp(options)
    except (HAProxyNotFound, ValueError) as exc:
        raise CannotStart(str(exc)) from None
    except Exception as exc:  # no usable kubeconfig
        raise CannotStart(f"cannot reach a cluster: {exc}") from None
    try:
        asyncio.run(serve(app))
    except OSError as exc:
        raise CannotStart(f"cannot start: {exc}") from None


async def serve(app: OperatorApp) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, app.request_stop)
    try:
        start = asyncio.create_task(app.start())
        stop = asyncio.create_task(app.wait_stopped())
        done, _ = await asyncio.wait({start, stop}, return_when=asyncio.FIRST_COMPLETED)
        if start in done:
            start.result()
            click.echo(f"htc run: serving {app.options.namespace}/{app.options.config}")
            await stop
        else:
            start.cancel()
    finally:
        await app.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    click.echo("stopped")
