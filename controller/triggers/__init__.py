"""Trigger paths: each turns an occasion (a change, a proposal) into one pipeline call."""

from controller.triggers.clock import Clock
from controller.triggers.reconcile import Engine, EngineFactory, ReconcileTrigger, SpecDecision

__all__ = ["Clock", "Engine", "EngineFactory", "ReconcileTrigger", "SpecDecision"]
