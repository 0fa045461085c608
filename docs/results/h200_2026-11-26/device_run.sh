#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Kept as run (run 3, 395253e); run 2 had "(/tf32)?$" at the end of F and internal limits 200/170/70/90 s.
# Second device run of 2026-11-26: the GPU tests after the fixes, then anvil's CNN/LSTM GPU steps
# (batch resident, FP32 and TF32) and PyTorch's on the same GPU.
set -u
R=$OUT/r; mkdir -p $R
export ANVIL_GPU_TEST_TIMEOUT=45
timeout -k 5 150 bash scripts/gpu_kit.sh run --tests-only --out $R > $OUT/run.log 2>&1; echo "tests rc=$?" >> $OUT/run.log
K=.gpukit/root
export "$(grep -m1 '^LD_LIBRARY_PATH=' $R/summary.txt)"
F='^model/(alexnet/[a-z_]+/batch:64|vgg16/[a-z_]+/batch:32|resnet50/[a-z_]+/batch:32|lstm32/[a-z_]+/batch:128|lstm64/[a-z_]+/batch:128)/device:cuda/input:resident'
t0=$SECONDS
timeout -k 5 110 $K/build/bench/anvil_bench --anvil_gpu=on --anvil_models=alexnet,resnet50,vgg16,lstm32,lstm64 \
  --benchmark_filter="$F" --benchmark_out=$R/anvil_gpu_steps.json --benchmark_out_format=json > $R/anvil_gpu_steps.txt 2>&1
echo "anvil bench rc=$? in $((SECONDS-t0)) s" >> $OUT/run.log
for mb in alexnet:64 vgg16:32 resnet50:32; do
  t0=$SECONDS
  timeout 40 python3 bench/peers/pytorch_gpu_models.py --model ${mb%:*} --batch ${mb#*:} --steps resident >> $R/torch_gpu_steps.jsonl 2>>$R/torch.err
  echo "torch ${mb} rc=$? in $((SECONDS-t0)) s" >> $OUT/run.log
done
t0=$SECONDS
timeout 40 python3 bench/peers/pytorch_gpu_lstm.py --steps-only > $R/torch_gpu_lstm_steps.jsonl 2>>$R/torch.err
echo "torch lstm steps rc=$? in $((SECONDS-t0)) s" >> $OUT/run.log
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv >> $OUT/run.log 2>&1
tar -C $OUT -czf $OUT/results.tgz r run.log; rm -rf $R
cat $OUT/run.log | grep -v '^LD_LIBRARY_PATH'
