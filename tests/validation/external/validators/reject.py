"""Rejects with findings that point into the rendered files (absolute sandbox paths)."""

import json
import os
import sys

root = sys.argv[-1]
print(
    json.dumps(
        {
            "diagnostics": [
                {
                    "ruleId": "ACME-12",
                    "severity": "error",
                    "message": f"backend without health check in {root}/haproxy.cfg",
                    "file": os.path.join(root, "haproxy.cfg"),
                    "line": 3,
                },
                {"severity": "warning", "message": "consider http-reuse safe"},
            ]
        }
    )
)
sys.exit(1)
