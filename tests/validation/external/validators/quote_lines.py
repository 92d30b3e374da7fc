"""Passes, reporting every configuration line back verbatim as an info finding."""

import json
import os
import sys

root = sys.argv[-1]
with open(os.path.join(root, "haproxy.cfg"), encoding="utf-8") as f:
    lines = f.read().splitlines()
findings = [
    {"severity": "info", "message": f"saw: {text.strip()}", "file": "haproxy.cfg", "line": n}
    for n, text in enumerate(lines, 1)
    if text.strip()
]
print(json.dumps({"diagnostics": findings}))
