"""Passes, with more findings than the contract reads (argv[1] of them)."""

import json
import sys

count = int(sys.argv[1])
items = [{"severity": "warning", "message": f"note {i}"} for i in range(count)]
print(json.dumps({"diagnostics": items}))
