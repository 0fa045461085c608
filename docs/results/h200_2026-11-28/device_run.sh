#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one device call of 2026-11-28 (H200), run from the repository root with the packed kit in
# .gpukit/ (scripts/gpu_kit.sh pack): the GPU tests, then the study's steps part at the batches of
# the 2026-11-26 run (anvil with host_enqueue_ms and ANVIL_CUDNN_LOG=1, PyTorch defaults and best),
# then the per-layer conv table of AlexNet and VGG16 while time is left. Everything lands in
# $OUT/results.tgz (the device tool brings back at most 8 files).
set -u
LIMIT=${LIMIT:-540}
R=$OUT/r
mkdir -p "$R"
T0=$SECONDS
left() { echo $((LIMIT - (SECONDS - T0))); }
log() { echo "[$((SECONDS - T0)) s] $*" | tee -a "$OUT/run.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,memory.total --format=csv > "$R/gpu.txt" 2>&1
lscpu > "$R/lscpu.txt" 2>&1
export ANVIL_GPU_TEST_TIMEOUT=40
timeout -k 5 175 bash scripts/gpu_kit.sh run --part tests --budget 165 --out "$R" > "$R/tests.log" 2>&1
log "tests rc=$?"
export ANVIL_CUDNN_LOG=1
for mb in resnet50:32 alexnet:64 lstm64:128 vgg16:32; do
  l=$(left)
  [ "$l" -gt 70 ] || { log "steps $mb not run: $l s left"; continue; }
  timeout -k 5 "$l" bash scripts/gpu_kit.sh run --part steps --models "${mb%:*}" --batches "${mb#*:}" \
    --reps 3 --min-time 0.5 --no-compile --budget $((l - 10)) --out "$R" > "$R/steps_${mb%:*}.log" 2>&1
  log "steps $mb rc=$?"
done
l=$(left)
if [ "$l" -gt 100 ]; then
  timeout -k 5 "$l" bash scripts/gpu_kit.sh run --part layers --budget $((l - 10)) --out "$R" > "$R/layers.log" 2>&1
  log "layers rc=$?"
else
  log "layers not run: $l s left"
fi
cp "$OUT/run.log" "$R/"
tar -C "$OUT" -czf "$OUT/results.tgz" r && rm -rf "$R"
log "done"
