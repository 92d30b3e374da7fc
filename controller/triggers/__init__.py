"""Trigger paths: each turns an occasion (a change, a proposal) into one pipeline call."""

from controller.triggers.reconcile import Engine, EngineFactory, ReconcileTrigger, SpecDecision

__all__ = ["Engine", "EngineFactory", "ReconcileTrigger", "SpecDecision"]
