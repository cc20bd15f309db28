#!/bin/bash
# ddptui on a real GPU machine: real nvidia-smi, real NCCL on torch's CUDA build, and the issue-15
# benches on that machine's cores. Not part of CI (CI has no GPU); run where a GPU machine is lent,
# from the repository's root. What it found on 2026-12-04 (one H200) is in tests/data/recorded/gpu
# and tests/data/recorded/probe/gpu-h200.txt, read by tests/core/test_recorded_gpu_node.py.
#
# The machine has torch but none of ddptui's own dependencies, and no network: bring them as
# wheels for its Python (3.12) in .whl/ (ignored by git), then run this script with .whl carried:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl \
#       textual==8.2.8 rich markdown-it-py mdit-py-plugins linkify-it-py uc-micro-py mdurl pygments \
#       typing_extensions platformdirs ruamel.yaml paramiko bcrypt cryptography pynacl cffi pycparser \
#       invoke ahocorasick_rs
#   bash scripts/device/gpu-check.sh            # DRY=1 PY=.venv/bin/python: a rehearsal here
# Everything lands in /tmp/dev, packed into $OUT/dev.tgz after each step.
set -u
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
DRY=${DRY:-}  # DRY=1: a rehearsal on the CPU machine (its own venv, quick benches)
[ -n "$DRY" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/tui:$PWD
D=/tmp/dev; rm -rf $D; mkdir -p "$D"/logs; R=$D/runs
pack() { tar czf "$OUT/dev.tgz" -C /tmp dev 2>/dev/null; }
step() { echo "=== $(date +%T) $*"; }
PY=${PY:-$(command -v python3)}; Q=${DRY:+--quick}; OUT=${OUT:-/tmp/devout}; mkdir -p "$OUT"
step env
{ date -u; uname -a; nproc; free -g | head -2; "$PY" -V
  "$PY" -c "import torch;print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version(), torch.cuda.device_count(), torch.cuda.get_device_name())"
  command -v torchrun ip ss ping getent ibv_devinfo; } > "$D"/env.txt 2>&1; cat "$D"/env.txt
step probe
$PY -c "from ddptui.core.checks.probe import probe_commands, probe_script; print(probe_script(probe_commands('127.0.0.1', 29531, True, False)))" > "$D"/probe.sh
sh "$D"/probe.sh > "$D"/probe.out 2>&1; nvidia-smi > "$D"/nvidia-smi.txt 2>&1; nvidia-smi -q > "$D"/nvidia-smi-q.txt 2>&1
grep -c . "$D"/probe.out; pack
for n in 1 2; do
cat > "$D"/gpu$n.yaml <<YAML
name: gpu-smoke-$n
description: this GPU machine, $n process(es), NCCL, the bundled DDP smoke test
transport: local
nodes: localhost
job:
  script: builtin:smoke
  args: ["--steps", "5"]
  nproc_per_node: $n
  master_port: 2953$n
  backend: nccl
  rdzv_timeout: 60
  env:
    NCCL_DEBUG: INFO
YAML
done
step check 1 and 2 processes
for n in 1 2; do timeout 120 "$PY" -m ddptui check "$D"/gpu$n.yaml --json --runs-dir $R > "$D"/check$n.json 2> "$D"/check$n.err; echo "check $n rc=$?"; done
pack
step run: the smoke test on the GPU, NCCL_DEBUG=INFO
timeout 180 "$PY" -m ddptui run "$D"/gpu1.yaml --headless --runs-dir $R > "$D"/run1.txt 2>&1; echo "run rc=$?"; tail -25 "$D"/run1.txt; pack
if grep -q "check: failed" "$D"/run1.txt; then  # a tool this image lacks: the job itself still matters
  step run again from launch-master
  timeout 150 "$PY" -m ddptui run "$D"/gpu1.yaml --headless --from launch-master --runs-dir $R > "$D"/run1b.txt 2>&1; echo "run rc=$?"; tail -25 "$D"/run1b.txt; pack
fi
step recorded failures
rec() { name=$1; n=$2; shift 2
  ( export NCCL_DEBUG=INFO; for kv in "$@"; do export "${kv?}"; done; timeout 90 "$PY" -m torch.distributed.run --nproc_per_node "$n" --master_port 29541 tests/data/workloads/one_gpu_nccl.py ) > "$D"/logs/"$name".log 2>&1
  echo "$name torchrun rc=$?: $(grep -c . "$D"/logs/"$name".log) lines"
  timeout 60 "$PY" -m ddptui diagnose "$D"/logs/"$name".log --json > "$D"/logs/"$name".diag.json 2>&1; echo "  diagnose rc=$? $(head -c 400 "$D"/logs/"$name".diag.json)"; }
rec duplicate-gpu 2
rec bad-socket-ifname 1 NCCL_SOCKET_IFNAME=nosuchif0
rec net-ib-forced-no-ib 1 NCCL_NET=IB
rec healthy-one-rank 1
rec more-ranks-than-gpus 2 DEVICE=local
pack
step bench.stream on 16 cores, local nodes, 1 and 4
# shellcheck disable=SC2086  # ${Q:-...}: the options, split into words on purpose
timeout 200 "$PY" -m bench.stream ${Q:---nodes 1,4 --reps 3} > "$D"/bench_stream.txt 2>&1; echo "rc=$?"; tail -40 "$D"/bench_stream.txt; pack
step bench.tui_flood on 16 cores
# shellcheck disable=SC2086  # ${Q:-...}: the options, split into words on purpose
timeout 110 "$PY" -m bench.tui_flood ${Q:---runs 4x1000000 --reps 1} > "$D"/bench_tui.txt 2>&1; echo "rc=$?"; tail -25 "$D"/bench_tui.txt; pack
step bench.startup
# shellcheck disable=SC2086  # ${Q:-...}: the options, split into words on purpose
timeout 45 "$PY" -m bench.startup ${Q:---reps 5} > "$D"/bench_startup.txt 2>&1; echo "rc=$?"; tail -12 "$D"/bench_startup.txt; pack
step finished
