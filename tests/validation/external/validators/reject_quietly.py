"""Exits 1 without any JSON: the exit status alone rejects."""

import sys

print("policy violated: no TLS on frontend fe", file=sys.stderr)
sys.exit(1)
