"""Stage ``haproxy``: binary detection, the sandboxed ``haproxy -c`` and its message mapping."""

from controller.validation.haproxy.binary import HaproxyBinary, HaproxyBinaryError
from controller.validation.haproxy.stage import HaproxyStage

__all__ = ["HaproxyBinary", "HaproxyBinaryError", "HaproxyStage"]
