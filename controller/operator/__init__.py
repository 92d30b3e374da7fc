"""The cluster adapter: kopf watches feed the store; status, Events and the Lease go back."""

from controller.operator.app import OperatorApp, OperatorOptions
from controller.operator.fleet_pods import DataplaneSettings

__all__ = ["DataplaneSettings", "OperatorApp", "OperatorOptions"]
