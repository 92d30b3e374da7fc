"""The local adapter (``htc local``): a directory of manifests stands in for the cluster, and a
local HAProxy under our supervisor serves what each validated render produced."""

from controller.local.app import LocalApp, LocalOptions

__all__ = ["LocalApp", "LocalOptions"]
