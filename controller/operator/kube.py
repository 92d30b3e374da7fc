"""How ``htc run`` reaches the API server: one configuration, shared by kopf and our own calls.

The credentials come from ``--kubeconfig`` (or ``$KUBECONFIG``, or ``~/.kube/config``) or, in a
pod, from the mounted ServiceAccount. Both kopf's watches and our own requests (status, Events,
the Lease) use the same identity, so RBAC sees one subject.
"""

from __future__ import annotations

from dataclasses import dataclass

import kopf
from kubernetes import client, config

__all__ = ["KubeConnection", "connect"]


@dataclass(frozen=True)
class KubeConnection:
    configuration: client.Configuration
    default_namespace: str | None

    def api_client(self) -> client.ApiClient:
        return client.ApiClient(self.configuration)

    def kopf_credentials(self) -> kopf.ConnectionInfo:
        """The same identity in kopf's terms (certificates, or a bearer token)."""
        cfg = self.configuration
        header = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix(
            "authorization"
        )
        scheme, token = None, None
        if header:
            parts = header.split(" ", 1)
            scheme, token = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])
        return kopf.ConnectionInfo(
            server=str(cfg.host),
            ca_path=cfg.ssl_ca_cert,
            insecure=not cfg.verify_ssl,
            scheme=scheme,
            token=token,
            certificate_path=cfg.cert_file,
            private_key_path=cfg.key_file,
            default_namespace=self.default_namespace,
        )


def connect(kubeconfig: str | None) -> KubeConnection:
    """In-cluster when no kubeconfig is named and a ServiceAccount is mounted; else kubeconfig."""
    cfg = client.Configuration()
    namespace: str | None = None
    if kubeconfig is None:
        try:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            return KubeConnection(cfg, None)
        except config.ConfigException:
            pass
    config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=kubeconfig, client_configuration=cfg
    )
    try:
        _, active = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        namespace = (active or {}).get("context", {}).get("namespace")
    except config.ConfigException:
        namespace = None
    return KubeConnection(cfg, namespace)
