"""Dies of a signal, as a validator with a native bug would."""

import os
import signal
import sys

print("about to crash", file=sys.stderr)
os.kill(os.getpid(), signal.SIGSEGV)
