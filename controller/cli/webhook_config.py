"""`htc webhook-config CONFIG --url BASE --ca-file FILE`: the ValidatingWebhookConfiguration."""

from __future__ import annotations

from pathlib import Path

import click
import yaml

from controller.cli.inputs import echo_diagnostics
from controller.cli.lint import load_located
from controller.cli.output import EXIT_USAGE
from controller.spec import webhook_configuration


@click.command(name="webhook-config")
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--url", required=True, help="Base URL of the webhook, e.g. https://127.0.0.1:8443.")
@click.option(
    "--ca-file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="CA certificate (PEM) that signed the webhook's serving certificate.",
)
@click.option("--name", default="haproxy-template-controller", show_default=True)
@click.option(
    "--failure-policy", type=click.Choice(["Fail", "Ignore"]), default="Fail", show_default=True
)
@click.option(
    "--config-failure-policy",
    type=click.Choice(["Fail", "Ignore"]),
    default="Ignore",
    show_default=True,
    help="failurePolicy of the HAProxyTemplateConfig entry (Fail refuses a fresh install's "
    "first config: no replica is ready to answer before it has one).",
)
@click.option("--timeout", "timeout", type=click.IntRange(1, 30), default=10, show_default=True)
@click.option("--controller-namespace", default="haproxy-template-controller", show_default=True)
@click.option("--service-account", default="haproxy-template-controller", show_default=True)
def command(
    config: Path,
    url: str,
    ca_file: Path,
    name: str,
    failure_policy: str,
    config_failure_policy: str,
    timeout: int,
    controller_namespace: str,
    service_account: str,
) -> None:
    """Print the ValidatingWebhookConfiguration for CONFIG's admission collections and the
    HAProxyTemplateConfig itself, calling the webhook at URL (development, out of cluster)."""
    loaded = load_located(config)
    if loaded.config is None or loaded.diagnostics:
        echo_diagnostics(loaded.diagnostics)
        raise SystemExit(EXIT_USAGE)
    spec = loaded.config.spec
    doc = webhook_configuration(
        spec,
        ca_bundle=ca_file.read_bytes(),
        url=url,
        name=name,
        failure_policy="Fail" if failure_policy == "Fail" else "Ignore",
        config_failure_policy="Fail" if config_failure_policy == "Fail" else "Ignore",
        timeout_seconds=timeout,
        controller_namespace=controller_namespace,
        service_account=service_account,
    )
    click.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
