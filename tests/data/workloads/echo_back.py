"""TEST WORKLOAD (named as such): prints back, as one JSON line, what reached it: its arguments,
the values of the environment variables named in ECHO_NAMES, and its working directory."""

import json
import os
import sys

names = os.environ.get("ECHO_NAMES", "").split(",")
print("echo-back " + json.dumps({"rank": os.environ.get("RANK"), "argv": sys.argv[1:], "cwd": os.getcwd(),
                                 "env": {n: os.environ.get(n) for n in names if n}}), flush=True)
