"""Trigger paths: each turns an occasion (a change, a proposal) into one pipeline call."""

from controller.triggers.admission import AdmissionDecision, AdmissionJudge
from controller.triggers.clock import Clock
from controller.triggers.engine import (
    Engine,
    EngineFactory,
    default_engine,
    evaluate,
    failure_report,
    spec_lint,
    spec_rejection,
    with_listen,
)
from controller.triggers.http_sources import FetchError, HttpSources
from controller.triggers.reconcile import ReconcileTrigger, SpecDecision

__all__ = [
    "AdmissionDecision",
    "AdmissionJudge",
    "Clock",
    "Engine",
    "EngineFactory",
    "FetchError",
    "HttpSources",
    "ReconcileTrigger",
    "SpecDecision",
    "default_engine",
    "evaluate",
    "failure_report",
    "spec_lint",
    "spec_rejection",
    "with_listen",
]
