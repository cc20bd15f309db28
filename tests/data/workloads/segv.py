"""TEST WORKLOAD (named as such): local rank 1 dies of SIGSEGV after a second; the others wait for it.

A real run that fails in a way the live diagnosis names (segfault-exit-11), on one machine, in seconds:
the `ddptui open` tests bundle it and replay it.
"""

import os
import signal
import sys
import time

print(f"segv: rank {os.environ.get('RANK')} starting", flush=True)
time.sleep(1.0)
if os.environ.get("LOCAL_RANK") == "1":
    print("segv: rank 1 is about to crash", flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)
time.sleep(3.0)
print(f"segv: rank {os.environ.get('RANK')} done", flush=True)
sys.exit(0)
