#!/usr/bin/python3
"""Generate golden reference data for ipuml's nn module tests with PyTorch.

Usage (Debian's PyTorch 1.13, not the pyenv python):
    /usr/bin/python3 tests/golden/gen_nn.py > tests/golden/nn.json
    /usr/bin/python3 tests/golden/gen_nn.py tests/golden/nn.json

Format (T = {"shape", "dtype": "float32"|"int64", "data": [flat row-major]}):
  reprs:     [{"name", "repr"}]      str(module) for one instance of each module with
                                     non-default options; test_nn_repr.cpp builds the same by name.
  mnist:     {"repr", "keys", "input": T, "output": T}
             the PopTorch MNIST tutorial network (two Block submodules), eval mode, with
             parameter k set to formula(k, shape) (see below; not stored).
  batchnorm: [{"name", "module", "options", "state": {key: T}, "steps": [STEP]}]
             STEP = {"train": bool, "input": T, "output": T, "buffers": {key: T}}
  forward:   [{"name", "module", "options", "state": {key: T}, "input": T, "output": T}]
             modules whose forward adds logic over the op ('same' padding, divisor_override).
  losses:    [{"name", "module", "options", "input": T, "target": T, "output": T}]

Computations run in float64 from float32-representable inputs; floats are stored with 9
significant digits. Every section seeds the RNG itself, so the output is deterministic.
"""
import json
import sys
import warnings

import torch
import torch.nn as nn

F64 = torch.float64


def f32(t):
    return t.to(torch.float32).to(F64)


def randn(*shape):
    return f32(torch.randn(tuple(shape), dtype=torch.float32))


def num(v):
    return float("%.9g" % v)


def T(t):
    t = t.detach()
    if t.dtype == torch.bool:
        return {"shape": list(t.shape), "dtype": "bool", "data": [bool(v) for v in t.reshape(-1).tolist()]}
    if t.dtype in (torch.int64, torch.int32):
        return {"shape": list(t.shape), "dtype": "int64", "data": [int(v) for v in t.reshape(-1).tolist()]}
    return {"shape": list(t.shape), "dtype": "float32", "data": [num(v) for v in t.reshape(-1).tolist()]}


def state(m):
    return {k: T(v) for k, v in m.state_dict().items()}


def randomise(m):
    """float32-representable random parameters (so norms are not just weight 1, bias 0)."""
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(randn(*p.shape) * 0.5 + (1.0 if p.dim() == 1 else 0.0))
    return m


# ---------------------------------------------------------------- reprs
def reprs():
    mods = [
        ("linear", nn.Linear(1600, 128)),
        ("linear_nobias", nn.Linear(3, 4, bias=False)),
        ("identity", nn.Identity()),
        ("conv1d", nn.Conv1d(4, 30, 4)),
        ("conv1d_opts", nn.Conv1d(4, 8, 5, stride=2, padding=1, dilation=3, groups=2, bias=False)),
        ("conv2d", nn.Conv2d(1, 32, 3)),
        ("conv2d_opts", nn.Conv2d(3, 8, (3, 5), stride=2, padding=(1, 2), dilation=2, bias=False)),
        ("conv2d_groups", nn.Conv2d(4, 8, 3, padding=1, groups=2)),
        ("conv2d_same", nn.Conv2d(1, 2, 4, padding="same")),
        ("conv2d_valid", nn.Conv2d(1, 2, 3, padding="valid")),
        ("convtranspose2d_unet", nn.ConvTranspose2d(64, 32, kernel_size=2, stride=2)),
        ("convtranspose2d_outpad", nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1,
                                                      output_padding=1)),
        ("convtranspose2d_opts", nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 1), padding=1,
                                                    output_padding=(1, 0), groups=2, bias=False,
                                                    dilation=2)),
        ("maxpool1d", nn.MaxPool1d(4)),
        ("maxpool1d_opts", nn.MaxPool1d(3, stride=2, padding=1)),
        ("maxpool2d", nn.MaxPool2d(2)),
        ("maxpool2d_opts", nn.MaxPool2d((2, 3), stride=1, padding=1)),
        ("avgpool2d", nn.AvgPool2d(2)),
        ("avgpool2d_opts", nn.AvgPool2d(3, stride=(2, 1), padding=1, count_include_pad=False)),
        ("adaptiveavgpool2d", nn.AdaptiveAvgPool2d((1, 1))),
        ("adaptiveavgpool2d_int", nn.AdaptiveAvgPool2d(7)),
        ("batchnorm1d", nn.BatchNorm1d(4320)),
        ("batchnorm1d_opts", nn.BatchNorm1d(4320, track_running_stats=False)),
        ("batchnorm2d_opts", nn.BatchNorm2d(16, eps=1e-3, momentum=None, affine=False)),
        ("groupnorm", nn.GroupNorm(2, 4)),
        ("groupnorm_opts", nn.GroupNorm(4, 8, eps=1e-6, affine=False)),
        ("layernorm", nn.LayerNorm(768)),
        ("layernorm_opts", nn.LayerNorm([3, 4], eps=1e-3, elementwise_affine=False)),
        ("embedding", nn.Embedding(30522, 768)),
        ("embedding_pad", nn.Embedding(10, 3, padding_idx=-1)),
        ("dropout", nn.Dropout(0.5)),
        ("dropout_opts", nn.Dropout(0.05)),
        ("relu", nn.ReLU()),
        ("relu_inplace", nn.ReLU(inplace=True)),
        ("gelu", nn.GELU()),
        ("gelu_tanh", nn.GELU(approximate="tanh")),
        ("tanh", nn.Tanh()),
        ("sigmoid", nn.Sigmoid()),
        ("softmax", nn.Softmax(dim=1)),
        ("logsoftmax", nn.LogSoftmax(dim=-1)),
        ("flatten", nn.Flatten()),
        ("flatten_opts", nn.Flatten(0, 2)),
        ("crossentropyloss", nn.CrossEntropyLoss()),
        ("crossentropyloss_opts", nn.CrossEntropyLoss(reduction="sum", label_smoothing=0.1)),
        ("nllloss", nn.NLLLoss()),
        ("mseloss", nn.MSELoss(reduction="none")),
        ("crossentropyloss_weight", nn.CrossEntropyLoss(weight=torch.ones(3), ignore_index=2)),
        ("multiheadattention", nn.MultiheadAttention(8, 2)),
        ("multiheadattention_opts", nn.MultiheadAttention(8, 4, dropout=0.1, bias=False, kdim=6,
                                                          vdim=4, batch_first=True)),
        ("sequential", nn.Sequential(nn.Conv1d(4, 30, 4), nn.MaxPool1d(4), nn.ReLU(),
                                     nn.Flatten(), nn.BatchNorm1d(4320, track_running_stats=False),
                                     nn.Linear(4320, 512), nn.ReLU(), nn.Dropout(0.05))),
        ("modulelist", nn.ModuleList([nn.Linear(2, 3), nn.ReLU(),
                                      nn.Sequential(nn.Linear(3, 3), nn.Tanh())])),
    ]
    return [{"name": n, "repr": str(m)} for n, m in mods]


# ---------------------------------------------------------------- the MNIST network
class Block(nn.Module):
    def __init__(self, in_channels, num_filters, kernel_size, pool_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, num_filters, kernel_size=kernel_size)
        self.pool = nn.MaxPool2d(kernel_size=pool_size)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.pool(self.conv(x)))


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = Block(1, 32, 3, 2)
        self.layer2 = Block(32, 64, 3, 2)
        self.layer3 = nn.Linear(1600, 128)
        self.layer3_act = nn.ReLU()
        self.layer3_dropout = torch.nn.Dropout(0.5)
        self.layer4 = nn.Linear(128, 10)
        self.softmax = nn.Softmax(1)

    def forward(self, x):
        x = self.layer1(x)
        x = self.layer2(x)
        x = x.view(-1, 1600)
        x = self.layer3_act(self.layer3(x))
        x = self.layer4(self.layer3_dropout(x))
        return self.softmax(x)


def formula(k, shape):
    """Parameter k of a model, element i: float32(sin(0.37 i + 1.3 k) / sqrt(fan_in)). The C++ test
    computes the same values, so the MNIST weights need not be stored."""
    n = 1
    for s in shape:
        n *= s
    fan_in = n // shape[0] if len(shape) > 1 else shape[0]
    i = torch.arange(n, dtype=F64)
    return f32(torch.sin(0.37 * i + 1.3 * k) / fan_in ** 0.5).reshape(shape)


def mnist():
    net = Network().to(F64).eval()
    with torch.no_grad():
        for k, p in enumerate(net.parameters()):
            p.copy_(formula(k, list(p.shape)))
    torch.manual_seed(1)
    x = f32(torch.rand(2, 1, 28, 28))
    with torch.no_grad():
        y = net(x)
    return {"repr": str(net), "keys": list(net.state_dict().keys()), "input": T(x), "output": T(y)}


# ---------------------------------------------------------------- batch norm over steps
def batchnorm():
    cases = []

    def run(name, module, options, m, shapes, modes):
        torch.manual_seed(len(cases) + 10)
        randomise(m)
        m = m.to(F64)
        c = {"name": name, "module": module, "options": options, "state": state(m), "steps": []}
        for shape, train in zip(shapes, modes):
            m.train(train)
            x = randn(*shape) * 2.0 + 0.5
            with torch.no_grad():
                y = m(x)
            c["steps"].append({"train": train, "input": T(x), "output": T(y),
                               "buffers": {k: T(v) for k, v in m.named_buffers()}})
        cases.append(c)

    run("bn2d_two_steps_then_eval", "BatchNorm2d", {"num_features": 3},
        nn.BatchNorm2d(3), [(4, 3, 5, 5), (2, 3, 4, 6), (3, 3, 2, 2)], [True, True, False])
    run("bn2d_momentum", "BatchNorm2d", {"num_features": 2, "momentum": 0.3, "eps": 1e-3},
        nn.BatchNorm2d(2, momentum=0.3, eps=1e-3), [(3, 2, 3, 3), (3, 2, 3, 3), (2, 2, 3, 3)],
        [True, True, False])
    run("bn1d_cumulative_3d", "BatchNorm1d", {"num_features": 4, "momentum": None},
        nn.BatchNorm1d(4, momentum=None), [(5, 4, 7), (3, 4, 2), (6, 4, 7), (2, 4, 3)],
        [True, True, True, False])
    run("bn1d_no_running_stats", "BatchNorm1d", {"num_features": 5, "track_running_stats": False},
        nn.BatchNorm1d(5, track_running_stats=False), [(6, 5), (4, 5)], [True, False])
    run("bn1d_not_affine", "BatchNorm1d", {"num_features": 3, "affine": False},
        nn.BatchNorm1d(3, affine=False), [(8, 3), (5, 3)], [True, False])
    return cases


# ---------------------------------------------------------------- forwards with module logic
def forward():
    cases = []

    def run(name, module, options, m, shape):
        torch.manual_seed(len(cases) + 100)
        randomise(m)
        m = m.to(F64)
        x = randn(*shape)
        with torch.no_grad():
            y = m(x)
        cases.append({"name": name, "module": module, "options": options, "state": state(m),
                      "input": T(x), "output": T(y)})

    run("conv2d_same_even_kernel", "Conv2d",
        {"in": 2, "out": 3, "kernel": [4, 3], "padding": "same", "dilation": [1, 2]},
        nn.Conv2d(2, 3, (4, 3), padding="same", dilation=(1, 2)), (2, 2, 7, 6))
    run("conv1d_same_even_kernel", "Conv1d", {"in": 3, "out": 2, "kernel": [4], "padding": "same"},
        nn.Conv1d(3, 2, 4, padding="same"), (2, 3, 9))
    run("conv2d_unbatched_strided", "Conv2d",
        {"in": 2, "out": 4, "kernel": [3, 3], "stride": [2, 1], "padding": [1, 0], "groups": 2},
        nn.Conv2d(2, 4, 3, stride=(2, 1), padding=(1, 0), groups=2), (2, 7, 6))
    run("avgpool2d_divisor_override", "AvgPool2d",
        {"kernel": [3, 2], "stride": [2, 2], "padding": [1, 1], "divisor_override": 5},
        nn.AvgPool2d((3, 2), stride=2, padding=1, divisor_override=5), (2, 3, 7, 6))
    run("avgpool2d_exclude_pad", "AvgPool2d",
        {"kernel": [3, 3], "stride": [2, 2], "padding": [1, 1], "count_include_pad": False},
        nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (1, 2, 6, 5))
    run("maxpool1d_unbatched", "MaxPool1d", {"kernel": [3], "stride": [2], "padding": [1]},
        nn.MaxPool1d(3, stride=2, padding=1), (4, 11))
    run("groupnorm_affine", "GroupNorm", {"num_groups": 2, "num_channels": 6},
        nn.GroupNorm(2, 6), (3, 6, 4))
    run("layernorm_2d", "LayerNorm", {"normalized_shape": [3, 4]}, nn.LayerNorm([3, 4]), (2, 5, 3, 4))
    run("convtranspose2d_unet", "ConvTranspose2d",
        {"in": 4, "out": 3, "kernel": [2, 2], "stride": [2, 2]},
        nn.ConvTranspose2d(4, 3, 2, stride=2), (2, 4, 3, 5))
    run("convtranspose2d_unbatched_opts", "ConvTranspose2d",
        {"in": 4, "out": 6, "kernel": [3, 2], "stride": [2, 1], "padding": [1, 0],
         "output_padding": [1, 0], "groups": 2, "dilation": [1, 2], "bias": False},
        nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), output_padding=(1, 0),
                           groups=2, dilation=(1, 2), bias=False), (4, 3, 4))
    return cases


# ---------------------------------------------------------------- losses
def losses():
    torch.manual_seed(7)
    cases = []
    logits = randn(6, 5)
    tgt = torch.randint(0, 5, (6,))
    for red in ("mean", "sum", "none"):
        for ls in (0.0, 0.1):
            y = nn.CrossEntropyLoss(reduction=red, label_smoothing=ls)(logits, tgt)
            cases.append({"name": "ce_%s_%g" % (red, ls), "module": "CrossEntropyLoss",
                          "options": {"reduction": red, "label_smoothing": ls},
                          "input": T(logits), "target": T(tgt), "output": T(y)})
    logp = torch.log_softmax(randn(4, 3, 2), 1)
    tgt2 = torch.randint(0, 3, (4, 2))
    y = nn.NLLLoss()(logp, tgt2)
    cases.append({"name": "nll_mean_3d", "module": "NLLLoss", "options": {"reduction": "mean"},
                  "input": T(logp), "target": T(tgt2), "output": T(y)})
    # class weights and ignored targets (-100, and a valid class used as ignore_index)
    logits2 = randn(7, 4)
    tgt3 = torch.tensor([0, -100, 3, 1, -100, 2, 1])
    tgt4 = torch.tensor([0, 2, 3, 1, 2, 2, 1])
    w = f32(torch.rand(4) * 1.8 + 0.2)
    for red in ("mean", "sum", "none"):
        for ls in (0.0, 0.1):
            y = nn.CrossEntropyLoss(weight=w, reduction=red, label_smoothing=ls)(logits2, tgt3)
            cases.append({"name": "ce_weight_ignore_%s_%g" % (red, ls), "module": "CrossEntropyLoss",
                          "options": {"reduction": red, "label_smoothing": ls, "weight": T(w)},
                          "input": T(logits2), "target": T(tgt3), "output": T(y)})
    y = nn.CrossEntropyLoss(ignore_index=2, label_smoothing=0.2)(logits2, tgt4)
    cases.append({"name": "ce_ignore_class2", "module": "CrossEntropyLoss",
                  "options": {"reduction": "mean", "label_smoothing": 0.2, "ignore_index": 2},
                  "input": T(logits2), "target": T(tgt4), "output": T(y)})
    logp2 = torch.log_softmax(logits2, 1)
    for red in ("mean", "sum"):
        y = nn.NLLLoss(weight=w, reduction=red)(logp2, tgt3)
        cases.append({"name": "nll_weight_ignore_%s" % red, "module": "NLLLoss",
                      "options": {"reduction": red, "weight": T(w)},
                      "input": T(logp2), "target": T(tgt3), "output": T(y)})
    a, b = randn(3, 4), randn(3, 4)
    y = nn.MSELoss(reduction="sum")(a, b)
    cases.append({"name": "mse_sum", "module": "MSELoss", "options": {"reduction": "sum"},
                  "input": T(a), "target": T(b), "output": T(y)})
    return cases


# ---------------------------------------------------------------- multi-head attention
def attention():
    """nn.MultiheadAttention with random parameters, each mask kind, outputs and gradients."""
    cases = []

    def keep_one(m):
        """A bool mask (True = masked) that leaves every row at least one key."""
        m = m.clone()
        m[..., 0] = False
        return m

    def run(name, opts, L, S, N, self_attn=False, kpm=None, am=None, need_weights=True,
            average=True, is_causal=False):
        torch.manual_seed(1000 + len(cases))
        E, H = opts["embed_dim"], opts["num_heads"]
        kdim, vdim = opts.get("kdim", E), opts.get("vdim", E)
        bf = opts.get("batch_first", False)
        m = nn.MultiheadAttention(E, H, bias=opts.get("bias", True), kdim=kdim, vdim=vdim,
                                  batch_first=bf)
        randomise(m)
        m = m.to(F64).eval()
        batched = N is not None

        def shape(T_, D):
            if not batched:
                return (T_, D)
            return (N, T_, D) if bf else (T_, N, D)
        q = randn(*shape(L, E))
        k = q if self_attn else randn(*shape(S, kdim))
        v = q if self_attn else randn(*shape(S, vdim))
        masks = {}
        if kpm == "bool":
            masks["key_padding_mask"] = keep_one(torch.rand(*((N, S) if batched else (S,))) < 0.4)
        elif kpm == "float":
            masks["key_padding_mask"] = randn(*((N, S) if batched else (S,)))
        if am == "bool":
            masks["attn_mask"] = keep_one(torch.rand(L, S) < 0.4)
        elif am == "float":
            masks["attn_mask"] = randn(L, S)
        elif am == "float3d":
            masks["attn_mask"] = randn(N * H, L, S)
        elif am == "causal":
            masks["attn_mask"] = torch.ones(L, S, dtype=torch.bool).triu(1)
        ins = [q] if self_attn else [q, k, v]
        for t in ins:
            t.requires_grad_(True)
        out, w = m(q, k, v, need_weights=need_weights, average_attn_weights=average, **masks)
        g = randn(*out.shape)
        params = dict(m.named_parameters())
        grads = torch.autograd.grad((out * g).sum(), ins + list(params.values()))
        names = (["query"] if self_attn else ["query", "key", "value"]) + list(params)
        c = {"name": name, "options": opts, "state": state(m), "self": self_attn,
             "query": T(q), "key": T(k), "value": T(v),
             "key_padding_mask": T(masks["key_padding_mask"]) if "key_padding_mask" in masks else None,
             "attn_mask": None if am in (None, "causal") else T(masks["attn_mask"]),
             "is_causal": am == "causal", "need_weights": need_weights,
             "average_attn_weights": average, "output": T(out),
             "weights": T(w) if w is not None else None, "grad_output": T(g),
             "grads": {n: T(t) for n, t in zip(names, grads)}}
        cases.append(c)

    E8 = {"embed_dim": 8, "num_heads": 2}
    run("self_batch_first", dict(E8, batch_first=True), 5, 5, 2, self_attn=True)
    run("bool_attn_mask_per_head_weights", E8, 4, 6, 2, am="bool", average=False)
    run("bool_key_padding_mask", E8, 4, 6, 2, kpm="bool")
    run("float_attn_mask_3d", E8, 4, 6, 2, am="float3d")
    run("bool_kpm_and_float_attn_mask", E8, 4, 6, 3, kpm="bool", am="float")
    run("float_key_padding_mask", E8, 3, 5, 2, kpm="float")
    run("causal", E8, 5, 5, 2, am="causal", self_attn=True)
    run("kdim_vdim_nobias", {"embed_dim": 8, "num_heads": 4, "kdim": 6, "vdim": 4, "bias": False},
        3, 5, 2, kpm="bool")
    run("unbatched", E8, 5, 4, None, kpm="bool")
    run("no_weights", dict(E8, batch_first=True), 4, 6, 2, am="bool", kpm="bool",
        need_weights=False)
    return cases


def main(out):
    warnings.filterwarnings("ignore", message="Using padding='same'")
    doc = {"generator": "tests/golden/gen_nn.py", "torch_version": torch.__version__,
           "reprs": reprs(), "mnist": mnist(), "batchnorm": batchnorm(), "forward": forward(),
           "losses": losses(), "attention": attention()}
    json.dump(doc, out, allow_nan=False, separators=(",", ":"))
    out.write("\n")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            main(fh)
    else:
        main(sys.stdout)
