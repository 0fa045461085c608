#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The `anvil` command line end to end (a CTest entry, tools/anvil/CMakeLists.txt):
#  - models / info print what they promise;
#  - `anvil train` for one short epoch on a Fashion-MNIST subset prints the metrics and writes a
#    valid JSON log, then resumes from its checkpoint for a second epoch;
#  - bad options and bad data fail with a non-zero status and one clear line on stderr
#    (tests/cli/test_anvil_limits.sh checks the statuses: 2 for usage errors, 1 otherwise).
# Usage: test_anvil_cli.sh path/to/anvil
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prelude.sh" "$@"
# expect_ok NAME PATTERN... -- CMD...: CMD succeeds and its stdout matches every PATTERN.
expect_ok() {
  local name=$1; shift
  local patterns=()
  while [[ $1 != -- ]]; do patterns+=("$1"); shift; done
  shift
  if ! "$@" >"$tmp/out" 2>"$tmp/err"; then
    fail "$name: exit status $? (stderr: $(cat "$tmp/err"))"; return
  fi
  for p in "${patterns[@]}"; do
    grep -qE -- "$p" "$tmp/out" || fail "$name: output lacks /$p/"
  done
  echo "ok: $name"
}
# expect_error NAME PATTERN -- CMD...: CMD fails, and stderr matches PATTERN. Errors of anvil
# itself (not of the option parser) must be exactly one line.
expect_error() {
  local name=$1 pattern=$2; shift 3
  if "$@" >"$tmp/out" 2>"$tmp/err"; then fail "$name: succeeded, expected an error"; return; fi
  grep -qE -- "$pattern" "$tmp/err" || { fail "$name: stderr lacks /$pattern/: $(cat "$tmp/err")"; return; }
  if grep -q '^anvil: error:' "$tmp/err" && [[ $(wc -l <"$tmp/err") -ne 1 ]]; then
    fail "$name: the error is not one line: $(cat "$tmp/err")"; return
  fi
  echo "ok: $name ($(head -1 "$tmp/err"))"
}

expect_ok "models lists the zoo" 'mlp_mnist +669706' 'cnn_mnist +1199882' 'resnet50 +25557032' -- "$anvil" models
expect_ok "models shows which models have a GPU path" ' gpu +description' '^fcn5 .* yes  DLBench' '^mlp_mnist .* yes  ' '^lstm32 .* yes  ' -- "$anvil" models
expect_ok "models NAME prints the layer table" '1199882 parameters' 'Conv2d' -- "$anvil" models cnn_mnist
# The summary line once (it used to be printed twice, in two forms).
"$anvil" models resnet50 >"$tmp/models" 2>&1
[[ $(grep -c 'parameters' "$tmp/models") -eq 1 ]] || fail "models resnet50: the summary is not printed once"
# --version: the release, the git revision (or "unknown" outside a checkout) and the libraries.
expect_ok "--version names the release, the revision and the libraries" \
  '^anvil [0-9]+\.[0-9]+\.[0-9]+ \(git ([0-9a-f]{7,}(\+dirty)?|unknown)\)$' '^  Eigen +3\.' '^  oneDNN +' \
  -- "$anvil" --version
expect_ok "info" 'variant tables' 'gemm' 'oneDNN' 'cpu ' -- "$anvil" info --no-peak

# One short epoch on real data: 3000 Fashion-MNIST training samples (600 held out), 3000 test.
train=("$anvil" train --model mlp_mnist --dataset fashion-mnist --subset 3000 --batch 80 --optimizer adam
       --lr 1e-3 --threads 1 --seed 3 --target-accuracy 0.5)
# The report's lines with their numbers (a label alone would match a broken report).
num='[0-9]+(\.[0-9]+)?'
expect_ok "train one epoch" "^training time +$num s \(1 epoch" "^testing time +$num s \(3000 test" \
  "^test accuracy +$num % \(loss $num\)" "^peak memory +$num MB resident, $num MB anvil CPU allocator" \
  "^CPU utilisation +$num % of 1 thread" "^time to target +$num s" -- "${train[@]}" --epochs 1 --json-log "$tmp/log1.json" --checkpoint "$tmp/ck.safetensors"
PYTHONPATH="$(dirname "$0")/.." python3 - "$tmp/log1.json" <<'PY' || fail "JSON log of the one-epoch run"
import json, sys
from provenance_check import provenance_problems
log = json.load(open(sys.argv[1]))
assert not provenance_problems(log["provenance"]), provenance_problems(log["provenance"])
r = log["result"]
assert log["finished"] and log["model"] == "mlp_mnist" and len(log["epochs"]) == 1, log
assert log["samples"] == {"train": 2400, "val": 600, "test": 3000}, log["samples"]
assert 0.6 < r["test_accuracy"] <= 1.0, r  # one epoch of Adam on 2400 images: well above chance (0.1)
assert r["training_seconds"] > 0 and r["testing_seconds"] > 0 and r["peak_rss_MB"] > 0, r
assert r["time_to_target_seconds"] is not None, r
e = log["epochs"][0]
assert e["val_accuracy"] > 0.5 and e["train_loss"] > 0 and e["allocator_peak_MB"] > 0, e
print("ok: JSON log valid, test accuracy %.3f" % r["test_accuracy"])
PY
# --precision bf16 (Note [Autocast policy]): the same epoch under autocast. The dispatch log names
# the precision of each decision, the JSON log records it, and the accuracy stays near fp32's.
autocast_line='^anvil autocast: op=linear list=low_precision precision=bf16 input=f32 runs=bf16$'
if ANVIL_VERBOSE=dispatch "${train[@]}" --epochs 1 --precision bf16 --json-log "$tmp/log_bf16.json" \
    >"$tmp/out" 2>"$tmp/err"; then
  for p in "$autocast_line" '^anvil autocast: op=cross_entropy list=fp32 precision=bf16 input=bf16 runs=f32$' \
           '^anvil dispatch: op=gemm problem=gemm bf16 cpu NT .* chosen=[a-z0-9_.]+ '; do
    grep -qE -- "$p" "$tmp/err" || fail "train --precision bf16: dispatch log lacks /$p/"
  done
  python3 - "$tmp/log1.json" "$tmp/log_bf16.json" <<'PY' || fail "JSON log of the bf16 run"
import json, sys
fp32, bf16 = (json.load(open(p)) for p in sys.argv[1:])
assert fp32["config"]["precision"] == "fp32" and bf16["config"]["precision"] == "bf16", bf16["config"]
a32, a16 = fp32["result"]["test_accuracy"], bf16["result"]["test_accuracy"]
# bf16 keeps 8 significant bits; on 3000 test images one epoch lands within 3 points of fp32.
assert abs(a16 - a32) < 0.03, (a32, a16)
print("ok: train --precision bf16, test accuracy %.3f (fp32 %.3f)" % (a16, a32))
PY
else
  fail "train --precision bf16: exit status $? (stderr: $(tail -3 "$tmp/err"))"
fi
# --precision fp16 (Note [Dynamic loss scaling]): f16 autocast with the loss scaler, whose scale
# and skipped steps are in the epoch lines, the summary and the JSON log.
expect_ok "train --precision fp16" "^epoch 1/1: loss scale $num, [0-9]+ step\(s\) skipped" \
  "^loss scaling +scale $num at the end, [0-9]+ step\(s\) skipped in all" -- \
  "${train[@]}" --epochs 1 --precision fp16 --json-log "$tmp/log_fp16.json"
python3 - "$tmp/log1.json" "$tmp/log_fp16.json" <<'PY' || fail "JSON log of the fp16 run"
import json, sys
fp32, fp16 = (json.load(open(p)) for p in sys.argv[1:])
assert fp16["config"]["precision"] == "fp16", fp16["config"]
assert fp32["epochs"][0]["loss_scale"] is None and fp16["epochs"][0]["loss_scale"] > 0, fp16["epochs"]
assert fp16["result"]["skipped_steps"] == fp16["epochs"][0]["skipped_steps"], fp16["result"]
a32, a16 = fp32["result"]["test_accuracy"], fp16["result"]["test_accuracy"]
# f16 keeps 11 significant bits; on 3000 test images one epoch lands within 2 points of fp32.
assert abs(a16 - a32) < 0.02, (a32, a16)
print("ok: train --precision fp16, test accuracy %.3f (fp32 %.3f), loss scale %g" %
      (a16, a32, fp16["epochs"][0]["loss_scale"]))
PY
expect_error "precision fp16 on cuda is refused" \
  '^anvil: error: .*--precision fp16 on --device cuda is not supported yet' -- \
  "$anvil" train --model mlp_mnist --precision fp16 --device cuda
expect_error "unknown precision" "^anvil: error: .*unknown precision 'fp8'" -- \
  "$anvil" train --model mlp_mnist --precision fp8
expect_ok "resume for a second epoch" 'resumed after epoch 1' 'epoch 2/2' -- \
  "${train[@]}" --epochs 2 --resume "$tmp/ck.safetensors" --json-log "$tmp/log2.json"
python3 -c "import json,sys; l=json.load(open(sys.argv[1])); assert l['first_epoch']==2 and len(l['epochs'])==1, l" \
  "$tmp/log2.json" || fail "JSON log of the resumed run"

# The other readers end to end, on small generated files in the real formats (CIFAR-10 and IMDB
# are not available offline): one epoch each must run and report.
python3 - "$tmp" <<'PY'
import json, os, random, sys
root = sys.argv[1]
rng = random.Random(7)
os.makedirs(f"{root}/cifar")
for name, n in [(f"data_batch_{i}.bin", 20) for i in range(1, 6)] + [("test_batch.bin", 20)]:
    with open(f"{root}/cifar/{name}", "wb") as f:
        for _ in range(n):
            f.write(bytes([rng.randrange(10)]) + bytes(rng.randrange(256) for _ in range(3072)))
os.makedirs(f"{root}/imdb")
words = ["good", "bad", "film", "plot", "actor", "great", "awful", "boring", "fun", "story"]
json.dump({w: i + 1 for i, w in enumerate(words)}, open(f"{root}/imdb/imdb_word_index.json", "w"))
for name in ["train.tsv", "test.tsv"]:
    with open(f"{root}/imdb/{name}", "w") as f:
        for _ in range(40):
            label = rng.randrange(2)
            f.write(f"{label}\t" + " ".join(rng.choice(words) for _ in range(rng.randrange(5, 30))) + "\n")
PY
expect_ok "train cnn_cifar on CIFAR-10 binary files" "^test accuracy +$num % \(loss $num\)" -- \
  "$anvil" train --model cnn_cifar --dataset "$tmp/cifar" --epochs 1 --batch 16 --threads 1
expect_ok "train lstm_imdb on IMDB files" "^test accuracy +$num % \(loss $num\)" -- \
  "$anvil" train --model lstm_imdb --dataset "$tmp/imdb" --epochs 1 --batch 16 --optimizer adam --lr 1e-2 --threads 1
expect_ok "train ptb_small on PTB text" "^test perplexity +$num \(loss $num\)" -- \
  "$anvil" train --model ptb_small --dataset ptb --subset 4000 --epochs 1 --lr 1 --clip 5 --threads 1

expect_error "unknown model" "^anvil: error: .*unknown model 'nosuchnet'; known models: .*mlp_mnist" -- \
  "$anvil" train --model nosuchnet
expect_error "missing dataset folder" "^anvil: error: anvil train: unknown dataset '$tmp/none': not a folder" -- \
  "$anvil" train --model mlp_mnist --dataset "$tmp/none"
expect_error "model and dataset disagree" '^anvil: error: .*model lstm32 takes token ids, not the images of fashion-mnist' -- \
  "$anvil" train --model lstm32 --dataset fashion-mnist --subset 100
expect_error "zero epochs" '^anvil: error: anvil train: --epochs must be in \[1, [0-9]+\], got 0' -- "$anvil" train --model mlp_mnist --epochs 0
expect_error "unknown optimizer" '^anvil: error: --optimizer: rmsprop not in \{sgd,adam,adamw\}' -- \
  "$anvil" train --model mlp_mnist --optimizer rmsprop
expect_error "unknown option" 'arguments were not expected: .*--bogus' -- "$anvil" train --model mlp_mnist --bogus 1
expect_error "no subcommand" '^anvil: error: A subcommand is required' -- "$anvil"
mkdir -p "$tmp/bad"
# All four files present, the training images not in the IDX format.
printf 'not an idx file' >"$tmp/bad/train-images-idx3-ubyte"
for f in train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  cp "${ANVIL_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}/$f.gz" "$tmp/bad/"
done
expect_error "malformed dataset file" 'train-images-idx3-ubyte' -- "$anvil" train --model mlp_mnist --dataset "$tmp/bad"
expect_error "resume with another batch size" 'anvil_train.batch = 80 but this run has 40' -- \
  "$anvil" train --model mlp_mnist --dataset fashion-mnist --subset 3000 --batch 40 --optimizer adam --lr 1e-3 \
  --seed 3 --epochs 2 --resume "$tmp/ck.safetensors"
expect_error "resume with another optimizer" 'anvil_train.optimizer = adam but this run has sgd' -- \
  "$anvil" train --model mlp_mnist --dataset fashion-mnist --subset 3000 --batch 80 --epochs 2 --seed 3 --lr 1e-3 \
  --resume "$tmp/ck.safetensors"
expect_error "resume a file that is not a checkpoint" \
  "^anvil: error: load_safetensors: $tmp/log1.json: header length [0-9]+ is larger than the rest of the file" -- \
  "$anvil" train --model mlp_mnist --dataset fashion-mnist --subset 3000 --epochs 2 --resume "$tmp/log1.json"

if [[ $failures -ne 0 ]]; then echo "$failures failure(s)"; exit 1; fi
echo "all anvil CLI checks passed"
