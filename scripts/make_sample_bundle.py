"""Make assets/sample.ddpt: a real 2-node run where NCCL's transports split, for newcomers to open.

    sudo flock /tmp/ddpt-cluster.lock .venv/bin/python scripts/make_sample_bundle.py

Brings up the namespace test cluster (tests/cluster/netns.py; root, network namespaces ddpt-*), runs
the named test double tests/data/workloads/nccl_replay.py on node02 and node03 with `ddptui run
--headless` (node02 prints recorded NET/IB lines, node03 NET/Socket ones: ib-socket-mismatch; node02
hangs a few seconds, then the job completes), packs the run with `ddptui bundle` and takes the
cluster down again. `ddptui open assets/sample.ddpt` shows it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster.netns import NodeOpts, down, up  # noqa: E402

OUT = ROOT / "assets" / "sample.ddpt"
REPLAY = ROOT / "tests" / "data" / "workloads" / "nccl_replay.py"
PLAYBOOK = f"""\
name: sample-ib-socket
description: two nodes; NCCL picks NET/IB on node02 and NET/Socket on node03
nodes: [node02, node03]
job:
  script: {REPLAY}
  nproc_per_node: 1
  master_port: 29581
  backend: gloo
  python: {sys.executable}
  rdzv_timeout: 60
  master_wait_timeout: 60
  stop_grace: 5
  env:
    OMP_NUM_THREADS: 1
    NCCL_DEBUG: INFO
    REPLAY_HANG_SECONDS: 8
ssh:
  connect_timeout: 3
"""


def ddptui(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT / "tui")}
    env.pop("SSH_AUTH_SOCK", None)
    return subprocess.run([sys.executable, "-m", "ddptui", *args], env=env, text=True, capture_output=True,
                          timeout=300)


def main() -> int:
    cl = up([NodeOpts("node02"), NodeOpts("node03")])
    try:
        with tempfile.TemporaryDirectory(prefix="ddptui-sample-") as tmp:
            base = Path(tmp)
            (base / "home" / ".ssh").mkdir(parents=True)
            pb = base / "sample-ib-socket.yaml"
            pb.write_text(PLAYBOOK)
            runs = base / "runs"
            r = ddptui("run", str(pb), "--headless", "--runs-dir", str(runs), "--ssh-config", str(cl.ssh_config),
                       home=base / "home")
            print(r.stdout[-1500:], r.stderr[-1500:], sep="\n")
            if "ib-socket-mismatch" not in r.stdout:
                print("the run did not raise ib-socket-mismatch: no sample written", file=sys.stderr)
                return 1
            (run,) = list(runs.iterdir())
            OUT.parent.mkdir(exist_ok=True)
            OUT.unlink(missing_ok=True)
            r = ddptui("bundle", str(run), "-o", str(OUT), home=base / "home")
            print(r.stdout, r.stderr, sep="")
            if r.returncode != 0:
                return 1
            OUT.chmod(0o644)  # a sample in the repository, not someone's private run
    finally:
        down(cl)
    print(f"{OUT}: {OUT.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
