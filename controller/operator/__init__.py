"""The cluster adapter: kopf watches feed the store; status, Events and the Lease go back."""

from controller.operator.app import OperatorApp, OperatorOptions

__all__ = ["OperatorApp", "OperatorOptions"]
