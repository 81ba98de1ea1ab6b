#!/bin/bash
# The second run of the session: make gpu-check's epoch check (the engine's four epochs with the
# implementation picked by device), then its bench check (depths 20 and 56), each alone.
set -u
export PYTHONPATH=core
PY=${PYTHON:-python3}
SKIP="environment smoke_train layers network ddp tiny_section"
t0=$SECONDS
$PY -m quadnn_paper.execution.gpu_check --device cuda:0 --out "$OUT/epoch" --timeout 150 --skip $SKIP bench
echo "epoch check: $((SECONDS - t0)) s"
t0=$SECONDS
$PY -m quadnn_paper.execution.gpu_check --device cuda:0 --out "$OUT/bench" --timeout 200 --skip $SKIP epoch
echo "bench check: $((SECONDS - t0)) s"
rm -rf "$OUT"/*/epoch  # generated data, run caches, inductor cache: not results
