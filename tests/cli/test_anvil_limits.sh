#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Faults of knobs, divergence and outputs through the `anvil` command line (a CTest entry,
# tools/anvil/CMakeLists.txt). Every refusal is ONE line "anvil: error: ..." naming the knob and
# the value; usage errors (options, limits, environment variables) exit 2, other failures 1.
#  - limits: --threads, OMP_NUM_THREADS, ANVIL_NUM_THREADS, --seed, --epochs, --batch,
#    --bucket-mb, --accumulate, --shard-optimizer's and --grad-bucket-dtype's exclusions and the
#    other environment variables anvil reads (docs/training.md, "Limits");
#  - a variant forced for an op anvil does not have (--variant, ANVIL_VARIANT);
#  - checkpoint run metadata that is not a number (was "anvil: error: stoi");
#  - divergence: a NaN loss stops the run and keeps the last good checkpoint byte for byte;
#  - outputs probed before the first epoch, temporary files unique per process, splits too small.
# Usage: test_anvil_limits.sh path/to/anvil
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prelude.sh" "$@"

# expect STATUS NAME PATTERN -- CMD...: CMD exits with STATUS, prints nothing on stdout before
# the refusal unless STATUS is 1, and stderr is exactly one line "anvil: error: ..." matching
# PATTERN.
expect() {
  local status=$1 name=$2 pattern=$3; shift 4
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [[ $rc -eq $status ]] || { fail "$name: exit status $rc, expected $status (stderr: $(cat "$tmp/err"))"; return; }
  [[ $(wc -l <"$tmp/err") -eq 1 ]] || { fail "$name: not one line on stderr: $(cat "$tmp/err")"; return; }
  grep -qE -- "^anvil: error: .*$pattern" "$tmp/err" || { fail "$name: stderr lacks /$pattern/: $(cat "$tmp/err")"; return; }
  echo "ok: $name ($(cat "$tmp/err"))"
}
# No epoch may have run before a refusal that is meant to come up front.
no_epoch() { ! grep -q '^epoch 1/' "$tmp/out" || fail "$1: an epoch ran before the refusal"; }

base=("$anvil" train --model mlp_mnist --dataset fashion-mnist --subset 400 --batch 40)
small=("${base[@]}" --threads 1 --epochs 1)

# Limits: exit 2, the knob and the value named.
expect 2 "--threads 100000" '--threads must be in \[1, [0-9]+\].*got 100000' -- "${base[@]}" --epochs 1 --threads 100000
expect 2 "OMP_NUM_THREADS=100000" "OMP_NUM_THREADS.*100000" -- env OMP_NUM_THREADS=100000 "${base[@]}" --epochs 1
expect 2 "OMP_NUM_THREADS=100000 for anvil info" "OMP_NUM_THREADS.*100000" -- env OMP_NUM_THREADS=100000 "$anvil" info --no-peak
expect 2 "ANVIL_NUM_THREADS=100000" "ANVIL_NUM_THREADS: .*got '100000'" -- env ANVIL_NUM_THREADS=100000 "$anvil" info --no-peak
expect 2 "--seed -1" "--seed: expected an integer in \[0, 18446744073709551615\], got '-1'" -- "${small[@]}" --seed -1
expect 2 "--seed 2^64" "--seed: .*got '18446744073709551616'" -- "${small[@]}" --seed 18446744073709551616
expect 2 "--epochs 0" "--epochs must be in \[1, 1000000\], got 0" -- "$anvil" train --model mlp_mnist --epochs 0
expect 2 "--epochs 2000000" "--epochs must be in \[1, 1000000\], got 2000000" -- "$anvil" train --model mlp_mnist --epochs 2000000
expect 2 "--batch 2^21" "--batch must be in \[1, 1048576\], got 2097152" -- "$anvil" train --model mlp_mnist --batch 2097152
expect 2 "--threads 0" "--threads must be in \[1, [0-9]+\].*got 0" -- "$anvil" train --model mlp_mnist --threads 0
expect 2 "--batch 0" "--batch must be in \[1, 1048576\], got 0" -- "$anvil" train --model mlp_mnist --batch 0
expect 2 "--bucket-mb inf" "--bucket-mb must be in \(0, 65536\] MiB, got inf" -- "$anvil" train --model mlp_mnist --bucket-mb inf
expect 2 "--bucket-mb 0" "--bucket-mb must be in \(0, 65536\] MiB, got 0" -- "$anvil" train --model mlp_mnist --bucket-mb 0
expect 2 "--accumulate 0" "--accumulate must be in \[1, 1024\], got 0" -- "$anvil" train --model mlp_mnist --accumulate 0
expect 2 "--accumulate 1025" "--accumulate must be in \[1, 1024\], got 1025" -- "$anvil" train --model mlp_mnist --accumulate 1025
expect 2 "--batch 80 --accumulate 3" "--batch 80 is not divisible by 1 rank\(s\) x --accumulate 3" -- "$anvil" train --model mlp_mnist --batch 80 --accumulate 3
expect 2 "--shard-optimizer --clip 5" "--shard-optimizer with --clip is not supported" -- "$anvil" train --model mlp_mnist --shard-optimizer --clip 5
expect 2 "--shard-optimizer --checkpoint" "--shard-optimizer with --checkpoint or --resume is not supported" -- "$anvil" train --model mlp_mnist --shard-optimizer --checkpoint "$tmp/never.safetensors"
expect 2 "--grad-bucket-dtype bf16 --shard-optimizer" "--grad-bucket-dtype bf16 with --shard-optimizer is not supported" -- "$anvil" train --model mlp_mnist --grad-bucket-dtype bf16 --shard-optimizer
expect 2 "--grad-bucket-dtype f16" "--grad-bucket-dtype: f16 not in \{f32,bf16\}" -- "$anvil" train --model mlp_mnist --grad-bucket-dtype f16
expect 2 "--accumulate 2 on a language model" "--accumulate applies to classifiers; ptb_small" -- "$anvil" train --model ptb_small --dataset ptb --subset 1000 --batch 4 --accumulate 2
expect 2 "--optimizer adamw2" "--optimizer: adamw2 not in \{sgd,adam,adamw\}" -- "$anvil" train --model mlp_mnist --optimizer adamw2
expect 2 "--weight-decay -0.1" "--weight-decay must be in \[0, 1\], got -0.1" -- "$anvil" train --model mlp_mnist --optimizer adamw --weight-decay -0.1
expect 2 "--weight-decay 2" "--weight-decay must be in \[0, 1\], got 2" -- "$anvil" train --model mlp_mnist --weight-decay 2
expect 2 "--lr-schedule linear" "--lr-schedule: linear not in \{none,step,multistep,cosine\}" -- "$anvil" train --model mlp_mnist --lr-schedule linear
expect 2 "--milestones 0" "--milestones: each must be in \[1, 1000000\], got 0" -- "$anvil" train --model mlp_mnist --lr-schedule multistep --lr-decay 0.5 --milestones 3,0
expect 2 "--milestones abc" "--milestones" -- "$anvil" train --model mlp_mnist --lr-schedule multistep --lr-decay 0.5 --milestones 3,abc
expect 2 "--warmup-steps -5" "--warmup-steps must be in \[0, 1073741824\], got -5" -- "$anvil" train --model mlp_mnist --warmup-steps -5
expect 2 "--lr-schedule step without --lr-decay" "--lr-schedule step multiplies the lr by --lr-decay, which must be below 1, got 1" -- "$anvil" train --model mlp_mnist --lr-schedule step
expect 2 "--step-epochs -1" "--step-epochs must be in \[1, 1000000\], got -1" -- "$anvil" train --model mlp_mnist --lr-schedule step --lr-decay 0.5 --step-epochs -1
expect 2 "--cosine-epochs 0" "--cosine-epochs must be in \[1, 1000000\], got 0" -- "$anvil" train --model mlp_mnist --lr-schedule cosine --cosine-epochs 0
expect 2 "--cosine-epochs without cosine" "--cosine-epochs applies to --lr-schedule cosine, got --lr-schedule none" -- "$anvil" train --model mlp_mnist --cosine-epochs 3
expect 2 "--decay-after with a schedule" "--decay-after 2 is the per-epoch decay, which does not combine with --lr-schedule cosine\$" -- "$anvil" train --model mlp_mnist --lr-schedule cosine --decay-after 2
expect 2 "--momentum with adamw" "--momentum applies to sgd, not adamw" -- "$anvil" train --model mlp_mnist --optimizer adamw --momentum 0.9
expect 2 "--shard-optimizer with adamw's decay" "--shard-optimizer with weight decay \(0.01\) is not supported" -- "$anvil" train --model mlp_mnist --optimizer adamw --shard-optimizer
expect 2 "--on-divergence maybe" "--on-divergence: maybe not in" -- "$anvil" train --model mlp_mnist --on-divergence maybe
expect 2 "ANVIL_DIST_TIMEOUT=-3" "ANVIL_DIST_TIMEOUT: .*got '-3'" -- env ANVIL_DIST_TIMEOUT=-3 "${small[@]}"
expect 2 "ANVIL_MPI_PROGRESS_US=abc" "ANVIL_MPI_PROGRESS_US: .*got 'abc'" -- env ANVIL_MPI_PROGRESS_US=abc "${small[@]}"
expect 2 "ANVIL_ALLREDUCE=tree" "ANVIL_ALLREDUCE: expected libnbc, chunked, ring, auto, got 'tree'" -- env ANVIL_ALLREDUCE=tree "${small[@]}"
expect 2 "ANVIL_ALLREDUCE_CHUNK_KIB=0" "ANVIL_ALLREDUCE_CHUNK_KIB: .*got '0'" -- env ANVIL_ALLREDUCE_CHUNK_KIB=0 "${small[@]}"
expect 2 "ANVIL_AUTOTUNE=yes" "ANVIL_AUTOTUNE: expected 0, 1, got 'yes'" -- env ANVIL_AUTOTUNE=yes "${small[@]}"
expect 2 "ANVIL_VERBOSE=dispatc" "ANVIL_VERBOSE: .*got 'dispatc'" -- env ANVIL_VERBOSE=dispatc "${small[@]}"
expect 2 "option parser errors are one line too" "The following arguments were not expected" -- "$anvil" train --model mlp_mnist --bogus 1

# A variant forced for an op anvil does not have: the op named, the ops listed.
expect 2 "--variant nosuchop=x" "--variant.*'nosuchop'.*ops are: .*gemm" -- "${small[@]}" --variant nosuchop=x
expect 2 "ANVIL_VARIANT=nosuchop=x" "ANVIL_VARIANT: .*'nosuchop'.*ops are: .*gemm" -- env ANVIL_VARIANT=nosuchop=x "${small[@]}"
expect 2 "ANVIL_VARIANT=gemm" "ANVIL_VARIANT: .*expected op=name" -- env ANVIL_VARIANT=gemm "${small[@]}"

# A good checkpoint (epoch 1), then copies with bad run metadata.
"${small[@]}" --checkpoint "$tmp/good.safetensors" >"$tmp/out" 2>&1 || fail "the base run failed: $(cat "$tmp/out")"
edit_meta() {  # edit_meta SRC DST KEY VALUE: a copy with one metadata value replaced
  python3 - "$@" <<'PY'
import json, struct, sys
src, dst, key, value = sys.argv[1:5]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"][key] = value
hb = json.dumps(h).encode()
hb += b" " * ((8 - len(hb) % 8) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
PY
}
for bad in "anvil_train.epochs_done x" "anvil_train.epochs_done 99999999999" "anvil_train.epochs_done -1" \
           "anvil_train.training_seconds nan" "anvil_train.time_to_target -5"; do
  read -r key value <<<"$bad"
  edit_meta "$tmp/good.safetensors" "$tmp/bad.safetensors" "$key" "$value"
  expect 1 "resume metadata $key = $value" "$key = '$value' is not" -- "${base[@]}" --threads 1 --epochs 3 --resume "$tmp/bad.safetensors"
  no_epoch "resume metadata $key = $value"
done

# Divergence: --lr 1e30 makes the loss NaN at step 2; the run fails naming it and the checkpoint
# of the good run is untouched. --on-divergence continue trains on, writes no checkpoint.
cp "$tmp/good.safetensors" "$tmp/kept.safetensors"
expect 1 "divergence stops the run" "training diverged at epoch 1, step [0-9]+: loss (nan|inf)" -- \
  "${small[@]}" --lr 1e30 --checkpoint "$tmp/kept.safetensors"
cmp -s "$tmp/good.safetensors" "$tmp/kept.safetensors" || fail "divergence: the last good checkpoint was overwritten"
"${base[@]}" --threads 1 --epochs 2 --lr 1e30 --on-divergence continue --checkpoint "$tmp/cont.safetensors" \
  --json-log "$tmp/cont.json" >"$tmp/out" 2>"$tmp/err" || fail "--on-divergence continue: exit status $?"
[[ ! -e "$tmp/cont.safetensors" ]] || fail "--on-divergence continue wrote a checkpoint of NaN weights"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['diverged'].startswith('epoch 1, step'), d['diverged']" \
  "$tmp/cont.json" && echo "ok: --on-divergence continue" || fail "--on-divergence continue: JSON log lacks 'diverged'"

# Outputs probed before the first epoch.
expect 1 "--checkpoint in a missing folder" "--checkpoint $tmp/none/ck.safetensors: the folder $tmp/none does not exist" -- \
  "${small[@]}" --checkpoint "$tmp/none/ck.safetensors"
no_epoch "--checkpoint in a missing folder"
expect 1 "--json-log in a missing folder" "--json-log $tmp/none/log.json: the folder" -- "${small[@]}" --json-log "$tmp/none/log.json"
no_epoch "--json-log in a missing folder"
expect 1 "--json-log is a folder" "--json-log $tmp is a folder" -- "${small[@]}" --json-log "$tmp"
expect 1 "--json-log equal to --checkpoint" "is the same file as --checkpoint" -- \
  "${small[@]}" --checkpoint "$tmp/same" --json-log "$tmp/same"
# The temporary file is unique per process: a leftover at the old fixed name "<log>.tmp" (here a
# folder, as a concurrent run's half-written file would be in the way) does not stop a run.
mkdir "$tmp/shared.json.tmp"
"${small[@]}" --json-log "$tmp/shared.json" >"$tmp/out" 2>"$tmp/err" &&
  python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['finished']" "$tmp/shared.json" &&
  echo "ok: the JSON log's temporary file is unique per process" ||
  fail "a leftover <log>.tmp broke the run: $(cat "$tmp/err")"

# Splits too small for the model, refused before training.
expect 1 "PTB validation split too small" "the validation split of ptb .* has 20 tokens, too few" -- \
  "$anvil" train --model ptb_small --dataset ptb --subset 4000 --val-split 0.005 --epochs 1 --lr 1 --threads 1
no_epoch "PTB validation split too small"
expect 1 "PTB training split too small" "the training split of ptb .* has 24 tokens, too few" -- \
  "$anvil" train --model ptb_small --dataset ptb --subset 30 --epochs 1 --lr 1 --threads 1

if [[ $failures -ne 0 ]]; then echo "$failures failure(s)"; exit 1; fi
echo "all anvil limit checks passed"
