#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""TensorFlow/Keras peer of anvil_bench's model step benchmarks (networks.md, "How a step is timed").

The framework DLBench measured most, timed the way the PyTorch peer (pytorch_models.py) times
PyTorch: the same networks, synthetic data, batch, threads and step definition, one process per
(model, threads) that imports TensorFlow and forks a process per phase (pytorch_models.py's
fork_per_phase) so that peak RSS belongs to that phase, and the same JSON fields on stdout (one
object per run; "peer": "tensorflow").

  training step:  forward (training=True) + sparse softmax cross-entropy (mean over B; for the
                  LSTM language models summed over T, averaged over B) + tape.gradient + SGD
                  (the lr and momentum of the PyTorch peer; clip_by_global_norm(5) for the LSTMs)
  inference step: forward (training=False)

TensorFlow at its best on this machine, recorded in each result's "config":
- the step is one tf.function (graph mode, the way Keras' fit() runs it); --jit adds XLA
  compilation (jit_compile=True), which `tune` measures against the plain graph;
- intra-op threads = the run's thread count, inter-op threads = 1 (ops run one at a time, as in
  anvil and PyTorch; on 2 cores a second inter-op pool only competes for the same cores),
  OMP_NUM_THREADS = threads for oneDNN's OpenMP parts;
- TF's oneDNN kernels (TF_ENABLE_ONEDNN_OPTS=1, TF's default on x86 Linux) and its own caching
  CPU allocator (BFC); images in NHWC (channels_last), TF's native CPU layout: NCHW convolutions
  are not implemented on its CPU path.
The network definitions (sizes, optimizer settings) come from pytorch_models.py's MODELS / NETS
tables, so both peers time the same thing; parameter counts are asserted against networks.md.

Subcommands (the default is `run`):
  run    pytorch_models.py-compatible options: --models fcn5 --threads 1,2 --phases train,inference
         --reps 3 [--batch N] [--jit]
  tune   FCN-5 and LSTM-32 training steps with and without XLA; prints the faster per model
  check  builds every network, asserts its parameter count, runs one step at a small batch
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import provenance as P  # noqa: E402  (scripts/provenance.py: Note [Provenance])


def torch_peer():
    """pytorch_models.py as a module (it imports torch lazily, so this does not load torch)."""
    spec = importlib.util.spec_from_file_location("pytorch_models", os.path.join(HERE, "pytorch_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PT = torch_peer()
MODELS, NETS, SGD_LR, time_loop = PT.MODELS, PT.NETS, PT.SGD_LR, PT.time_loop


def log(*a):
    print("[tensorflow_models]", *a, file=sys.stderr, flush=True)


# /proc/self/status readers (VmRSS, VmHWM) and the children's --phase type, shared with PyTorch's.
rss_now_mb, peak_rss_mb, phase_list = PT.rss_now_mb, PT.peak_rss_mb, PT.phase_list


def child_env(threads: int) -> dict:
    env = dict(os.environ)
    env.update({
        "TF_NUM_INTRAOP_THREADS": str(threads), "TF_NUM_INTEROP_THREADS": "1",
        "OMP_NUM_THREADS": str(threads), "TF_CPP_MIN_LOG_LEVEL": "2",
        "TF_ENABLE_ONEDNN_OPTS": env.get("TF_ENABLE_ONEDNN_OPTS", "1"),
        "CUDA_VISIBLE_DEVICES": env.get("CUDA_VISIBLE_DEVICES", ""),  # CPU peer unless asked
    })
    return env


def setup_tf(threads: int):
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    return tf


# ---------------------------------------------------------------------------------------------
# Networks (Keras 3 functional models, channels_last).
# ---------------------------------------------------------------------------------------------
def build_fcn(keras, name: str):
    fin, hidden, classes, act, dropout, _ = MODELS[name]
    x = inp = keras.Input((fin,))
    for h in hidden:
        x = keras.layers.Dense(h, activation=act)(x)
        if dropout:
            x = keras.layers.Dropout(dropout)(x)
    return keras.Model(inp, keras.layers.Dense(classes)(x))


def build_alexnet(keras, classes: int):
    L = keras.layers
    x = inp = keras.Input((224, 224, 3))
    x = L.ZeroPadding2D(2)(x)                                     # PyTorch's padding=2
    x = L.Conv2D(96, 11, strides=4, activation="relu")(x)         # 55x55x96
    x = L.MaxPooling2D(3, 2)(x)                                   # 27x27
    x = L.Conv2D(256, 5, padding="same", activation="relu")(x)
    x = L.MaxPooling2D(3, 2)(x)                                   # 13x13
    x = L.Conv2D(384, 3, padding="same", activation="relu")(x)
    x = L.Conv2D(384, 3, padding="same", activation="relu")(x)
    x = L.Conv2D(256, 3, padding="same", activation="relu")(x)
    x = L.MaxPooling2D(3, 2)(x)                                   # 6x6x256
    x = L.Flatten()(x)
    x = L.Dropout(0.5)(L.Dense(4096, activation="relu")(x))
    x = L.Dropout(0.5)(L.Dense(4096, activation="relu")(x))
    return keras.Model(inp, L.Dense(classes)(x))


def build_vgg16(keras, classes: int):
    L = keras.layers
    x = inp = keras.Input((224, 224, 3))
    for v in PT.VGG16_CFG:
        x = L.MaxPooling2D(2, 2)(x) if v == "M" else L.Conv2D(v, 3, padding="same", activation="relu")(x)
    # At 224x224 the map is already 7x7: PyTorch's adaptive pool is the identity there.
    x = L.Flatten()(x)
    x = L.Dropout(0.5)(L.Dense(4096, activation="relu")(x))
    x = L.Dropout(0.5)(L.Dense(4096, activation="relu")(x))
    return keras.Model(inp, L.Dense(classes)(x))


def build_resnet50(keras, classes: int):
    """v1.5 bottlenecks (stride on the 3x3 conv), convs without bias, BN (momentum 0.9, eps 1e-5,
    PyTorch's defaults) after every conv. 'same' padding gives PyTorch's output sizes."""
    L = keras.layers

    def bn(x):
        return L.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)

    def block(x, width: int, stride: int):
        cout = width * 4
        idt = x
        if stride != 1 or x.shape[-1] != cout:
            idt = bn(L.Conv2D(cout, 1, strides=stride, use_bias=False)(x))
        y = L.ReLU()(bn(L.Conv2D(width, 1, use_bias=False)(x)))
        y = L.ReLU()(bn(L.Conv2D(width, 3, strides=stride, padding="same", use_bias=False)(y)))
        y = bn(L.Conv2D(cout, 1, use_bias=False)(y))
        return L.ReLU()(L.Add()([y, idt]))

    x = inp = keras.Input((224, 224, 3))
    x = L.ReLU()(bn(L.Conv2D(64, 7, strides=2, padding="same", use_bias=False)(x)))
    x = L.MaxPooling2D(3, 2, padding="same")(x)
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            x = block(x, width, stride if b == 0 else 1)
    x = L.GlobalAveragePooling2D()(x)
    return keras.Model(inp, L.Dense(classes)(x))


def build_cnn_mnist(keras):
    L = keras.layers
    x = inp = keras.Input((28, 28, 1))
    x = L.Conv2D(32, 3, activation="relu")(x)
    x = L.Conv2D(64, 3, activation="relu")(x)
    x = L.Flatten()(L.Dropout(0.25)(L.MaxPooling2D(2)(x)))
    x = L.Dropout(0.5)(L.Dense(128, activation="relu")(x))
    return keras.Model(inp, L.Dense(10)(x))


def build_cnn_cifar(keras):
    L = keras.layers
    x = inp = keras.Input((32, 32, 3))
    x = L.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = L.Conv2D(32, 3, activation="relu")(x)
    x = L.Dropout(0.25)(L.MaxPooling2D(2)(x))
    x = L.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = L.Conv2D(64, 3, activation="relu")(x)
    x = L.Flatten()(L.Dropout(0.25)(L.MaxPooling2D(2)(x)))
    x = L.Dropout(0.5)(L.Dense(512, activation="relu")(x))
    return keras.Model(inp, L.Dense(10)(x))


class WordLM:
    """Embedding V x H -> `layers` stacked LSTM(H) (one bias vector per layer, as networks.md) ->
    Dense H -> V at every step; batch-major [B, T] ids, state (h, c) per layer carried between
    calls."""

    def __init__(self, keras, vocab: int, hidden: int, layers: int, init_range: float | None):
        L = keras.layers
        init = keras.initializers.RandomUniform(-init_range, init_range) if init_range else None
        kw = {} if init is None else {"kernel_initializer": init, "recurrent_initializer": init,
                                      "bias_initializer": init}
        self.embed = L.Embedding(vocab, hidden, **({} if init is None else {"embeddings_initializer": init}))
        self.lstms = [L.LSTM(hidden, return_sequences=True, return_state=True, **kw) for _ in range(layers)]
        self.fc = L.Dense(vocab, **({} if init is None else {"kernel_initializer": init, "bias_initializer": init}))
        self.hidden, self.layers = hidden, layers

    def __call__(self, ids, state, training: bool):
        y = self.embed(ids)
        new_state = []
        for i, lstm in enumerate(self.lstms):
            y, h, c = lstm(y, initial_state=[state[2 * i], state[2 * i + 1]], training=training)
            new_state += [h, c]
        return self.fc(y), new_state                               # [B, T, V]

    @property
    def trainable_variables(self):
        out = list(self.embed.trainable_variables)
        for lstm in self.lstms:
            out += lstm.trainable_variables
        return out + list(self.fc.trainable_variables)


def build(keras, name: str):
    if name in MODELS:
        return build_fcn(keras, name)
    spec = NETS[name]
    if name == "alexnet":
        return build_alexnet(keras, spec["classes"])
    if name == "vgg16":
        return build_vgg16(keras, spec["classes"])
    if name == "resnet50":
        return build_resnet50(keras, spec["classes"])
    if name == "cnn_mnist":
        return build_cnn_mnist(keras)
    if name == "cnn_cifar":
        return build_cnn_cifar(keras)
    return WordLM(keras, spec["vocab"], spec["hidden"], spec["layers"], spec.get("init_range"))


def param_count(net) -> int:
    return int(sum(int(v.shape.num_elements()) for v in net.trainable_variables))


# ---------------------------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------------------------
class Step:
    """One model's training or inference step as a tf.function, on synthetic data."""

    WINDOWS = 8  # distinct LSTM windows cycled through, as in the PyTorch peer

    def __init__(self, tf, keras, name: str, batch: int, train: bool, jit: bool):
        self.tf, self.name, self.batch, self.train = tf, name, batch, train
        keras.utils.set_random_seed(1)
        self.net = build(keras, name)
        if name in MODELS:
            fin, _, classes, _, _, _ = MODELS[name]
            self.kind, lr, momentum, clip = "fcn", SGD_LR[name], 0.0, None
            self.x = tf.random.normal((batch, fin))
            self.y = tf.random.uniform((batch,), 0, classes, dtype=tf.int64)
        else:
            spec = NETS[name]
            self.kind, lr, momentum, clip = spec["kind"], spec["lr"], spec["momentum"], spec.get("clip")
            if self.kind == "cnn":
                c, h, w = spec["input"]
                self.x = tf.random.normal((batch, h, w, c))
                self.y = tf.random.uniform((batch,), 0, spec["classes"], dtype=tf.int64)
            else:
                t = spec["steps"]
                stream = tf.random.uniform((batch, self.WINDOWS * t + 1), 0, spec["vocab"], dtype=tf.int64)
                self.windows = [(stream[:, k * t:(k + 1) * t], stream[:, k * t + 1:(k + 1) * t + 1])
                                for k in range(self.WINDOWS)]
                self.k = 0
                zeros = tf.zeros((batch, spec["hidden"]))
                self.state = [zeros] * (2 * spec["layers"])
        self.clip = clip
        self.optimizer = {"sgd_lr": lr, "momentum": momentum, "clip_grad_norm": clip} if train else None
        self.opt = keras.optimizers.SGD(learning_rate=lr, momentum=momentum) if train else None
        fn = self._lm_train if self.kind == "lstm" and train else self._lm_infer if self.kind == "lstm" \
            else self._train if train else self._infer
        self.fn = tf.function(fn, jit_compile=jit)

    def _apply(self, tape, loss):
        vars_ = self.net.trainable_variables
        grads = tape.gradient(loss, vars_)
        if self.clip:
            grads, _ = self.tf.clip_by_global_norm(grads, self.clip)
        self.opt.apply_gradients(zip(grads, vars_))

    def _train(self, x, y):
        tf = self.tf
        with tf.GradientTape() as tape:
            logits = self.net(x, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        self._apply(tape, loss)
        return loss

    def _infer(self, x):
        return self.net(x, training=False)

    def _lm_train(self, x, y, state):
        tf = self.tf
        with tf.GradientTape() as tape:
            logits, new_state = self.net(x, state, training=True)
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)        # [B, T]
            loss = tf.reduce_sum(ce) / tf.cast(tf.shape(x)[0], tf.float32)
        self._apply(tape, loss)
        return loss, [tf.stop_gradient(s) for s in new_state]

    def _lm_infer(self, x, state):
        # The logits are returned although nothing reads them: a graph that dropped them would let
        # TensorFlow prune the decoder (H -> V at every step, most of the work) from the step.
        logits, new_state = self.net(x, state, training=False)
        return logits, new_state

    def step(self):
        if self.kind != "lstm":
            out = self.fn(self.x, self.y) if self.train else self.fn(self.x)
            # CPU kernels run synchronously, but fetching one value makes the step's end explicit.
            (out if self.train else out[0, 0]).numpy()
            return
        x, y = self.windows[self.k]
        self.k = (self.k + 1) % self.WINDOWS
        if self.train:
            loss, self.state = self.fn(x, y, self.state)
            loss.numpy()
        else:
            logits, self.state = self.fn(x, self.state)
            logits[0, 0, 0].numpy()

    def macs_per_sample(self) -> float:
        if self.kind == "fcn":
            fin, hidden, classes, _, _, _ = MODELS[self.name]
            dims = [fin, *hidden, classes]
            return float(sum(a * b for a, b in zip(dims, dims[1:])))
        spec = NETS[self.name]
        if spec.get("macs"):
            return float(spec["macs"])
        if self.kind == "lstm":
            h, t, v = spec["hidden"], spec["steps"], spec["vocab"]
            return float(t * (spec["layers"] * 4 * h * 2 * h + h * v))
        return float("nan")  # the small CNNs: not needed for the ratios


def tf_facts(tf, keras, jit: bool) -> dict:
    build = tf.sysconfig.get_build_info() if hasattr(tf.sysconfig, "get_build_info") else {}
    return {
        "tensorflow_version": tf.__version__, "keras_version": keras.__version__,
        "python": sys.version.split()[0], "graph": "tf.function", "jit_compile_xla": jit,
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS"), "layout": "NHWC (channels_last)",
        "cuda_build": bool(build.get("is_cuda_build", False)),
        "env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                                           "TF_NUM_INTEROP_THREADS", "TF_ENABLE_ONEDNN_OPTS")
                if k in os.environ},
    }


def child_main(a) -> None:
    """One model at one thread count; --phase train,inference times both (PT.fork_per_phase)."""
    PT.fork_per_phase(a, phase_main, lambda: (setup_tf(a.threads), __import__("keras")))


def phase_main(a) -> None:
    rss_start = rss_now_mb()
    tf = setup_tf(a.threads)
    import keras
    rss_import = rss_now_mb()
    default_batch = MODELS[a.model][5] if a.model in MODELS else NETS[a.model]["batch"]
    batch = a.batch or default_batch
    train = a.phase == "train"
    st = Step(tf, keras, a.model, batch, train, a.jit)
    st.step()  # builds the layers Keras creates lazily (the LSTM model's), traces the graph
    params = param_count(st.net)
    # Keras' LSTM has one bias vector per layer, as networks.md: no PyTorch-style extra.
    expected = None if a.model in MODELS else NETS[a.model]["params"]
    if expected is not None and params != expected:
        sys.exit(f"{a.model}: {params:,} trainable parameters, networks.md says {expected:,}")
    per_rep = time_loop(st.step, max(0, a.warmup - 1), a.reps, a.min_time, a.min_steps)
    flat = [t for r in per_rep for t in r]
    rep_means = [statistics.fmean(r) for r in per_rep]
    flops = 2.0 * st.macs_per_sample() * batch * (3.0 if train else 1.0)
    out = {
        "peer": "tensorflow", "model": a.model, "phase": "train_step" if train else "inference_step",
        "threads": a.threads, "batch": batch, "params": params, "optimizer": st.optimizer,
        "warmup_steps": a.warmup, "reps": a.reps, "steps": len(flat), "steps_per_rep": [len(r) for r in per_rep],
        "median_s": statistics.median(flat), "mean_s": statistics.fmean(flat), "min_s": min(flat),
        "rep_means_s": rep_means, "median_of_rep_means_s": statistics.median(rep_means),
        "pct_peak": PT.pct_of_peak(flops, statistics.median(flat), a), "peak_gflops_per_core": a.peak or None,
        "peak_rss_MB": peak_rss_mb(), "process": a.process, "rss_at_start_MB": rss_start, "rss_after_import_MB": rss_import,
        "config": tf_facts(tf, keras, a.jit),
    }
    if st.kind == "lstm":
        out["seq_len"] = NETS[a.model]["steps"]
    out["provenance"] = P.provenance(P.tensorflow_libraries(tf, keras))  # after the memory fields
    print(json.dumps(out), flush=True)


def run_child(threads: int, args: list[str], timeout: float = 1800) -> list[dict]:
    cmd = [sys.executable, os.path.abspath(__file__), "child", "--threads", str(threads), *args]
    p = subprocess.run(cmd, env=child_env(threads), capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
        raise SystemExit(f"tensorflow_models: child failed ({' '.join(args)}), exit {p.returncode}")
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]


def timing_args(a) -> list[str]:
    args = ["--reps", str(a.reps), "--warmup", str(a.warmup), "--min-time", str(a.min_time),
            "--min-steps", str(a.min_steps), "--peak", str(a.peak or 0)]
    if a.batch:
        args += ["--batch", str(a.batch)]
    if a.jit:
        args.append("--jit")
    return args


def check_model(name: str) -> str:
    if name not in MODELS and name not in NETS:
        raise SystemExit(f"unknown model '{name}'; known: {', '.join([*MODELS, *NETS])}")
    return name


def run_main(a) -> None:
    try:
        phase_list(a.phases)
    except argparse.ArgumentTypeError as e:
        raise SystemExit(f"--phases: {e}")
    # One child per (model, threads) times every phase, each in a process forked after the
    # imports (PT.fork_per_phase).
    for model in [check_model(m) for m in a.models.split(",")]:
        for t in [int(v) for v in a.threads.split(",")]:
            log(f"{model} {a.phases} threads={t}")
            for obj in run_child(t, ["--model", model, "--phase", a.phases, *timing_args(a)]):
                print(json.dumps(obj), flush=True)


def tune_main(a) -> None:
    """Graph vs XLA for the training step of a few models at 1 thread; prints the medians."""
    result = {}
    for model in a.models.split(","):
        res = {}
        for jit in (False, True):
            args = ["--model", check_model(model), "--phase", "train", "--reps", "1", "--warmup", "3",
                    "--min-time", "2", "--min-steps", "5"] + (["--jit"] if jit else [])
            res["xla" if jit else "graph"] = run_child(1, args)[0]["median_s"]
        res["faster"] = min(("graph", "xla"), key=lambda k: res[k])
        result[model] = res
        log(model, res)
    import tensorflow as tf  # the children measured; this process names the version they ran
    result["provenance"] = P.provenance(P.tensorflow_libraries(tf))
    print(json.dumps(result, indent=2))


def check_main(a) -> None:
    for model in [check_model(m) for m in (a.models.split(",") if a.models else [*MODELS, *NETS])]:
        for phase in ("train", "inference"):
            obj = run_child(1, ["--model", model, "--phase", phase, "--batch", str(a.batch), "--reps", "1",
                                "--warmup", "1", "--min-time", "0", "--min-steps", "1"])[0]
            print(f"{model:10s} {phase:9s} params {obj['params']:>11,}  {obj['median_s']:.4f} s/step")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd")

    def timing(q, child: bool):
        q.add_argument("--reps", type=int, default=3, help="timed repetitions (each >= --min-time)")
        q.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps (the first traces the graph)")
        q.add_argument("--min-time", type=float, default=2.0, help="seconds per repetition (anvil_bench: 2.0)")
        q.add_argument("--min-steps", type=int, default=5, help="steps per repetition at least")
        q.add_argument("--batch", type=int, default=0, help="mini-batch (default: the model's CPU batch)")
        q.add_argument("--peak", type=float, default=None,
                       help="per-core FMA peak in GFLOP/s for pct_peak (bench.sh passes anvil_bench's measured "
                            "one); without it pct_peak is null")
        q.add_argument("--jit", action="store_true", help="XLA-compile the step (jit_compile=True)")

    r = sub.add_parser("run", help="time models, one process per (model, threads), a forked one per phase")
    timing(r, False)
    r.add_argument("--models", default="fcn5")
    r.add_argument("--threads", default="1,2")
    r.add_argument("--phases", default="train,inference")
    c = sub.add_parser("child", help="(internal) one timed run")
    timing(c, True)
    c.add_argument("--model", required=True)
    c.add_argument("--phase", type=phase_list, required=True)
    c.add_argument("--threads", type=int, required=True)
    t = sub.add_parser("tune", help="graph vs XLA per model (training step, 1 thread)")
    t.add_argument("--models", default="fcn5,lstm32")
    ck = sub.add_parser("check", help="build every network, assert parameters, one step each")
    ck.add_argument("--models", default="")
    ck.add_argument("--batch", type=int, default=2)
    argv = sys.argv[1:]
    if not argv or argv[0] not in ("run", "child", "tune", "check", "-h", "--help"):
        argv = ["run", *argv]
    a = p.parse_args(argv)
    {"run": run_main, "child": child_main, "tune": tune_main, "check": check_main}[a.cmd](a)


if __name__ == "__main__":
    main()
