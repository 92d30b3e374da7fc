"""haproxy-template-controller: render HAProxy configurations from templates, validate every byte."""

__all__ = ["__version__"]

__version__ = "0.1.0"
