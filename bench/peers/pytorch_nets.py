# SPDX-License-Identifier: Apache-2.0
"""The networks of the PyTorch peer (pytorch_models.py): networks.md's fully connected models
(MODELS) and its CNN and LSTM networks (NETS) written out in torch.nn (torchvision is not used),
their parameter and FLOP counts, the timed step of a CNN/LSTM network (NetStep), the SGD of each
implementation and the autocast context. torch is passed in by the caller, which imports it
lazily, so importing this module does not load torch (tensorflow_models.py and
compare_report.py read its tables).
"""
from __future__ import annotations

import sys


# ---------------------------------------------------------------------------------------------
# Models (networks.md). Same definitions as anvil's models/fcn.cpp: nn.Linear stacks, whose
# weight layout [out, in] is also anvil's; the loss is applied by the step, not the model.
# ---------------------------------------------------------------------------------------------
MODELS = {
    # name: (input features, hidden widths, classes, activation, dropout p, DLBench/CPU batch)
    "fcn5": (26752, [2048, 2048, 2048], 26752, "sigmoid", 0.0, 64),
    "fcn8": (26752, [2048] * 6, 26752, "sigmoid", 0.0, 64),
    "fcn_r": (784, [2048, 4096, 1024], 10, "sigmoid", 0.0, 64),
    "mlp_mnist": (784, [512, 512], 10, "relu", 0.2, 80),
}
# The CNN and LSTM networks of networks.md (built by build_net() below). "params" is the exact
# count of networks.md; "extra_params" what PyTorch's layout adds to it (nn.LSTM has two bias
# vectors per layer, b_ih and b_hh, where networks.md's LSTM has one: +8H per layer), so that
# build_net() can assert params == networks.md + extra. Optimizer (networks.md, "How a step is
# timed"): plain SGD lr 0.01 for AlexNet; momentum 0.9 for ResNet-50 and VGG16 (allowed by
# networks.md, and what their training recipes use); lr 1.0 with clip_grad_norm_(5) for the
# LSTMs. cnn_mnist/cnn_cifar were trained with Adadelta/RMSprop in Keras; here plain SGD lr 0.01
# (the update is a negligible part of their step, and anvil_bench times them with SGD too).
NETS = {
    "alexnet": {"kind": "cnn", "input": (3, 224, 224), "classes": 1000, "batch": 16,
                "lr": 0.01, "momentum": 0.0, "params": 62378344, "extra_params": 0, "macs": 1.14e9},
    "vgg16": {"kind": "cnn", "input": (3, 224, 224), "classes": 1000, "batch": 16,
              "lr": 0.01, "momentum": 0.9, "params": 138357544, "extra_params": 0, "macs": 15.5e9},
    "resnet50": {"kind": "cnn", "input": (3, 224, 224), "classes": 1000, "batch": 16,
                 "lr": 0.01, "momentum": 0.9, "params": 25557032, "extra_params": 0, "macs": 4.09e9},
    "cnn_mnist": {"kind": "cnn", "input": (1, 28, 28), "classes": 10, "batch": 128,
                  "lr": 0.01, "momentum": 0.0, "params": 1199882, "extra_params": 0, "macs": None},
    "cnn_cifar": {"kind": "cnn", "input": (3, 32, 32), "classes": 10, "batch": 32,
                  "lr": 0.01, "momentum": 0.0, "params": 1250858, "extra_params": 0, "macs": None},
    # Word-level LSTM language models: vocabulary V, embedding/hidden width H, layers, unroll T.
    "lstm32": {"kind": "lstm", "vocab": 10000, "hidden": 256, "layers": 2, "steps": 32, "batch": 128,
               "lr": 1.0, "momentum": 0.0, "clip": 5.0, "params": 6180624, "extra_params": 2 * 4 * 256},
    "lstm64": {"kind": "lstm", "vocab": 10000, "hidden": 256, "layers": 2, "steps": 64, "batch": 128,
               "lr": 1.0, "momentum": 0.0, "clip": 5.0, "params": 6180624, "extra_params": 2 * 4 * 256},
    # Zaremba et al. "small": init U(-0.1, 0.1); 4,651,600 + 1,600 (second biases) in PyTorch.
    "ptb_small": {"kind": "lstm", "vocab": 10000, "hidden": 200, "layers": 2, "steps": 20, "batch": 20,
                  "lr": 1.0, "momentum": 0.0, "clip": 5.0, "params": 4651600, "extra_params": 2 * 4 * 200,
                  "init_range": 0.1},
}

# The DLBench step uses plain SGD (networks.md). anvil_bench's model_bench.cpp takes the lr from
# the model's optimizer string ("sgd lr=0.01", "sgd lr=0.05" for fcn_r, "adam lr=1e-3" for
# mlp_mnist), always with SGD; mirrored here (the lr does not change the work done).
SGD_LR = {"fcn5": 0.01, "fcn8": 0.01, "fcn_r": 0.05, "mlp_mnist": 1e-3}
# --device cuda: networks.md's GPU mini-batch sweep (mlp_mnist has its one batch), the batches
# anvil_bench's model/<name>/<phase>/batch:<b>/device:cuda rows run at. FP32 only: TF32 is
# switched off for matmuls and cuDNN; the batch is copied host -> device inside every step and
# the step ends with torch.cuda.synchronize() (networks.md, "How a step is timed").
GPU_BATCHES = {"fcn5": [32, 64, 128, 256, 512, 1024], "fcn8": [32, 64, 128, 256, 512, 1024],
               "fcn_r": [32, 64, 128, 256, 512, 1024], "mlp_mnist": [80]}


def build_model(torch, name: str, seed: int = 1):
    nn = torch.nn
    fin, hidden, classes, act, p, _ = MODELS[name]
    torch.manual_seed(seed)
    layers, width = [], fin
    for h in hidden:
        layers += [nn.Linear(width, h), nn.Sigmoid() if act == "sigmoid" else nn.ReLU()]
        if p > 0:
            layers.append(nn.Dropout(p))
        width = h
    layers.append(nn.Linear(width, classes))
    return nn.Sequential(*layers)


# ---------------------------------------------------------------------------------------------
# CNN and LSTM networks (networks.md), written here: torchvision is not installed, and writing
# them keeps every layer visible next to the spec. NCHW (PyTorch's default memory format).
# ---------------------------------------------------------------------------------------------
def build_alexnet(nn, classes: int = 1000, dropout: float = 0.5):
    """networks.md's AlexNet: single tower, no LRN, no grouping (the Torch/Caffe/CNTK form of
    DLBench); dropout 0.5 after fc6 and fc7 as in the Caffe form (networks.md: optional; it costs
    two [B, 4096] masks)."""
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, stride=4, padding=2), nn.ReLU(inplace=True),    # 96x55x55
        nn.MaxPool2d(3, 2),                                                   # 96x27x27
        nn.Conv2d(96, 256, 5, padding=2), nn.ReLU(inplace=True),             # 256x27x27
        nn.MaxPool2d(3, 2),                                                   # 256x13x13
        nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),            # 256x13x13
        nn.MaxPool2d(3, 2),                                                   # 256x6x6
        nn.Flatten(),
        nn.Linear(9216, 4096), nn.ReLU(inplace=True), nn.Dropout(dropout),
        nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(dropout),
        nn.Linear(4096, classes))


VGG16_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


def build_vgg16(nn, classes: int = 1000):
    """13 conv 3x3 pad 1 + ReLU, 2x2/2 max-pools, adaptive average pool to 7x7, classifier
    25088 -> 4096 -> 4096 -> classes with ReLU and dropout 0.5 (torchvision's vgg16 without BN).
    The same module serves 224x224 ImageNet-size and 32x32 CIFAR inputs (the adaptive pool
    turns the 1x1 map into 7x7)."""
    layers, c = [], 3
    for v in VGG16_CFG:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)]
            c = v
    layers += [nn.AdaptiveAvgPool2d((7, 7)), nn.Flatten(),
               nn.Linear(512 * 7 * 7, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5),
               nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5),
               nn.Linear(4096, classes)]
    return nn.Sequential(*layers)


def build_resnet50(torch, classes: int = 1000):
    """Bottleneck ResNet-50 in torchvision's form (v1.5: the stride sits on the 3x3 conv of a
    stage's first block), stages [3, 4, 6, 3], convs without bias, BN after every conv,
    projection shortcut (1x1 conv + BN) where the shape changes. BN runs in training mode in the
    training step (batch statistics), in eval mode in the inference step."""
    nn = torch.nn

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin: int, width: int, stride: int):
            super().__init__()
            cout = width * 4
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + idt)

    layers = [nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
              nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(2048, classes)]
    return nn.Sequential(*layers)


def build_cnn_mnist(nn):
    """The Keras MNIST CNN (Al-Bdour): 1x28x28 -> conv 3x3 (32) -> conv 3x3 (64) -> pool 2 ->
    9216 -> 128 -> 10, 'valid' convolutions."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(inplace=True),
        nn.Conv2d(32, 64, 3), nn.ReLU(inplace=True),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
        nn.Linear(9216, 128), nn.ReLU(inplace=True), nn.Dropout(0.5),
        nn.Linear(128, 10))


def build_cnn_cifar(nn):
    """The Keras CIFAR-10 CNN (Al-Bdour): 'same' 3x3 then 'valid' 3x3, twice; 64x6x6 = 2304."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(32, 32, 3), nn.ReLU(inplace=True),                          # 32x30x30
        nn.MaxPool2d(2), nn.Dropout(0.25),                                    # 32x15x15
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(64, 64, 3), nn.ReLU(inplace=True),                          # 64x13x13
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),                      # 2304
        nn.Linear(2304, 512), nn.ReLU(inplace=True), nn.Dropout(0.5),
        nn.Linear(512, 10))


def build_word_lm(torch, vocab: int, hidden: int, layers: int, init_range: float | None = None):
    """Word-level LSTM language model: embedding V x H -> nn.LSTM(H, H, layers) -> Linear H -> V
    at every step. Takes batch-major ids [B, T] (networks.md) and runs the LSTM time-major
    ([T, B, H], nn.LSTM's native layout, as anvil's lstm_layer); returns logits [T, B, V] and the
    final (h, c), each [layers, B, H]. PyTorch's gates are (input, forget, cell, output) as in
    networks.md; nn.LSTM has the two bias vectors b_ih and b_hh."""
    nn = torch.nn

    class WordLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, hidden)
            self.lstm = nn.LSTM(hidden, hidden, layers)
            self.fc = nn.Linear(hidden, vocab)
            if init_range is not None:
                for p in self.parameters():
                    nn.init.uniform_(p, -init_range, init_range)

        def forward(self, ids_bt, state=None):
            y, state = self.lstm(self.embed(ids_bt.t()), state)   # [T, B, H]
            return self.fc(y), state                                # [T, B, V]

    return WordLM()


def build_net(torch, name: str, seed: int = 1):
    """One of NETS, with its parameter count asserted against networks.md."""
    nn = torch.nn
    spec = NETS[name]
    torch.manual_seed(seed)
    if name == "alexnet":
        net = build_alexnet(nn, spec["classes"])
    elif name == "vgg16":
        net = build_vgg16(nn, spec["classes"])
    elif name == "resnet50":
        net = build_resnet50(torch, spec["classes"])
    elif name == "cnn_mnist":
        net = build_cnn_mnist(nn)
    elif name == "cnn_cifar":
        net = build_cnn_cifar(nn)
    else:
        net = build_word_lm(torch, spec["vocab"], spec["hidden"], spec["layers"], spec.get("init_range"))
    params = sum(p.numel() for p in net.parameters())
    expected = spec["params"] + spec["extra_params"]
    assert params == expected, (f"{name}: {params:,} parameters, networks.md says {spec['params']:,}"
                                f" (+{spec['extra_params']:,} for PyTorch's layout)")
    return net


def count_macs(torch, net, run_forward) -> float:
    """Multiply-accumulates of one forward pass, counted with hooks on Conv2d, Linear and LSTM
    (the layers that hold all but a fraction of a percent of the work)."""
    nn = torch.nn
    total = [0.0]

    def conv_hook(m, inp, out):
        total[0] += out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]

    def linear_hook(m, inp, out):
        total[0] += out.numel() * m.in_features

    def lstm_hook(m, inp, out):
        x = inp[0]
        steps_batch = x.shape[0] * x.shape[1]
        for layer in range(m.num_layers):
            i = m.input_size if layer == 0 else m.hidden_size
            total[0] += steps_batch * 4 * m.hidden_size * (i + m.hidden_size)

    hooks = []
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            hooks.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, nn.Linear):
            hooks.append(m.register_forward_hook(linear_hook))
        elif isinstance(m, nn.LSTM):
            hooks.append(m.register_forward_hook(lstm_hook))
    try:
        with torch.no_grad():
            run_forward()
    finally:
        for h in hooks:
            h.remove()
    return total[0]


class NetStep:
    """The training and inference steps of a NETS model on synthetic data (networks.md, "How a
    step is timed").

    CNN: x ~ N(0, 1) [B, C, H, W], uniform labels; zero_grad + forward + F.cross_entropy (mean
    over B) + backward + SGD. Inference: forward under torch.no_grad() in eval mode.
    LSTM: a synthetic stream of uniform random ids laid out as [B, K*T + 1] (the PtbBatcher
    layout: row b is one stream), cycled window by window; the hidden state is carried from one
    mini-batch to the next and detached (truncated BPTT); loss = CE summed over T, averaged over
    B; backward; clip_grad_norm_(5); SGD lr 1.0. Inference: forward with the state carried, under
    torch.no_grad()."""

    WINDOWS = 8  # distinct LSTM windows cycled through (ids differ between consecutive steps)

    def __init__(self, torch, F, name: str, batch: int, train: bool, sgd_impl: str, amp=None):
        import contextlib
        self.torch, self.F, self.name, self.batch, self.train = torch, F, name, batch, train
        self.amp = amp or contextlib.nullcontext  # autocast_of(): the forward's context
        self.spec = spec = NETS[name]
        self.net = build_net(torch, name)
        self.net.train(train)
        g = torch.Generator().manual_seed(1)
        if spec["kind"] == "cnn":
            self.x = torch.randn(batch, *spec["input"], generator=g)
            self.y = torch.randint(0, spec["classes"], (batch,), generator=g)
        else:
            t = spec["steps"]
            stream = torch.randint(0, spec["vocab"], (batch, self.WINDOWS * t + 1), generator=g)
            # inputs [B, T] batch-major; targets stored time-major [T, B] like the logits.
            self.windows = [(stream[:, k * t:(k + 1) * t].contiguous(),
                             stream[:, k * t + 1:(k + 1) * t + 1].t().contiguous())
                            for k in range(self.WINDOWS)]
            self.k, self.state = 0, None
        self.opt = None
        if train:
            self.opt = make_sgd(torch, self.net.parameters(), spec["lr"], sgd_impl, spec["momentum"])

    def step(self):
        torch, F, net = self.torch, self.F, self.net
        if self.spec["kind"] == "cnn":
            if self.train:
                self.opt.zero_grad(set_to_none=True)
                with self.amp():
                    loss = F.cross_entropy(net(self.x), self.y)
                loss.backward()
                self.opt.step()
            else:
                with torch.no_grad(), self.amp():
                    net(self.x)
            return
        x, y = self.windows[self.k]
        self.k = (self.k + 1) % self.WINDOWS
        if self.train:
            self.opt.zero_grad(set_to_none=True)
            state = None if self.state is None else tuple(s.detach() for s in self.state)
            with self.amp():
                logits, self.state = net(x, state)                     # [T, B, V]
                v = logits.shape[-1]
                loss = F.cross_entropy(logits.reshape(-1, v), y.reshape(-1), reduction="sum") / self.batch
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), self.spec["clip"])
            self.opt.step()
        else:
            with torch.no_grad(), self.amp():
                _, self.state = net(x, self.state)

    def macs_per_sample(self) -> float:
        if self.spec["kind"] == "cnn":
            was = self.net.training
            self.net.eval()  # no BN running-stat update from the count
            try:
                macs = count_macs(self.torch, self.net, lambda: self.net(self.x[:1]))
            finally:
                self.net.train(was)
            return macs
        x = self.windows[0][0][:1]
        return count_macs(self.torch, self.net, lambda: self.net(x))


def make_sgd(torch, params, lr: float, impl: str, momentum: float = 0.0):
    kw = {"lr": lr, "momentum": momentum, "weight_decay": 0.0}
    if impl == "foreach":
        kw["foreach"] = True
    elif impl == "fused":
        kw["fused"] = True
    else:
        kw["foreach"] = False
    return torch.optim.SGD(params, **kw)


def autocast_of(torch, precision: str):
    """A factory of the context the forward and loss run in: torch.autocast on the CPU for bf16
    (its CPU op lists: conv and linear in bf16, the losses and reductions in fp32), nothing for
    fp32. Returns (factory, description) -- the description goes into the row's config."""
    import contextlib
    if precision == "fp32":
        return contextlib.nullcontext, None
    if precision == "bf16":
        return (lambda: torch.autocast("cpu", dtype=torch.bfloat16),
                'torch.autocast("cpu", dtype=torch.bfloat16) around forward + loss')
    sys.exit(f"--precision {precision}: the CPU peer runs fp32 or bf16 (fp16 needs GradScaler, not wired)")


def model_params_and_flops(torch, net, batch: int) -> tuple[int, float]:
    """Parameter count and forward FLOPs of an FCN/MLP (a Sequential of nn.Linear and
    activations) at `batch`: 2 * MACs of the Linear layers. Training is counted as 3x forward by
    the caller, the nominal count anvil_bench uses, so that pct_peak is comparable (autograd
    actually skips the input gradient of the first layer, which x does not need). Call it on the
    dense model, before any to_mkldnn conversion."""
    params = sum(p.numel() for p in net.parameters())
    fwd_flops = 2.0 * batch * sum(m.in_features * m.out_features for m in net if isinstance(m, torch.nn.Linear))
    if params == 0 or fwd_flops == 0:
        raise RuntimeError(f"model_params_and_flops: {params} parameters, {fwd_flops} FLOPs: not a dense "
                           "nn.Linear model (count before the mkldnn conversion)")
    return params, fwd_flops
