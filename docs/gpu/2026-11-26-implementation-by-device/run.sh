#!/bin/bash
# One device session (issue 38: the implementation picked by device; the engine's epochs again).
# Run from the repository root: OUT=<folder> bash docs/gpu/2026-11-26-implementation-by-device/run.sh
# DEVICE defaults to cuda:0; STEPS (bench rounds) to 10. Each step's output goes to $OUT/<name>.
set -u
export PYTHONPATH=core
DEVICE=${DEVICE:-cuda:0}
STEPS=${STEPS:-10}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
step() {  # name, limit (s), command...
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    echo "$name rc=$? $((SECONDS - t0))s" | tee -a "$OUT/steps.txt"
}
{ nvidia-smi -L; $PY -c "import torch, timm; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), timm.__version__)"; git rev-parse HEAD 2>/dev/null; } >"$OUT/env.txt" 2>&1
# 1. QResNet20's plain step, eager and compiled, for both implementations (each invocation compiles
#    its first one), against ResNet20 in the same rounds.
for first in naive default; do
    other=$([ $first = naive ] && echo default || echo naive)
    step "bench_${first}_compiled" 240 $PY -m quadnn.bench --device "$DEVICE" --models cifar_qresnet20 \
        --implementations $first $other --compile --steps "$STEPS" --no-memory --no-limit --json
done
# 2. The engine's QResNet20 epoch, eager: the implementation the engine picks on this device (auto),
#    then the layers' default ("speed"), each in its own cache (the run id does not name it).
step epoch_qresnet20_auto 150 $PY -m quadnn_paper.execution.gpu_check --_epoch cifar_qresnet20 \
    --device "$DEVICE" --out "$OUT/auto" --_no_floor
step epoch_qresnet20_speed 150 $PY -m quadnn_paper.execution.gpu_check --_epoch cifar_qresnet20 \
    --device "$DEVICE" --out "$OUT/speed" --_implementation speed --_no_floor
rm -rf "$OUT"/*/epoch/cifar10-* "$OUT"/*/epoch/runs/*/*.pt  # the generated data and checkpoints: not results
echo done | tee -a "$OUT/steps.txt"
