"""The project's test bed: a real control plane and a pod network, for tests and people.

Not part of the controller's runtime: nothing under ``controller/`` outside this package may
import it (import-linter enforces that). It ships in the package so that tests, benchmarks and
``make cluster`` import it the normal way.
"""
