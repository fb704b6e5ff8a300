#!/usr/bin/python3
"""Generate golden reference data for ipuml's op tests with PyTorch.

Usage (Debian's PyTorch 1.13, not the pyenv python):
    /usr/bin/python3 tests/golden/gen_ops.py > tests/golden/ops.json
    /usr/bin/python3 tests/golden/gen_ops.py tests/golden/ops.json

Format:
  {"generator": ..., "torch_version": ..., "cases": [CASE, ...]}
  CASE = {"name", "op", "inputs": [T...], "attrs": {...}, "outputs": [T...],
          "grad_outputs": [T|null...], "grads": [T|null...]}
  T = {"shape": [...], "dtype": "float32"|"int64"|"bool", "data": [flat row-major]}

grads[i] = d(sum_j <outputs[j], grad_outputs[j]>)/d inputs[i], null for
integer/bool inputs, for inputs marked non-differentiable (batch_norm running
stats) and for ops with no differentiable output (argmax/argmin).

Everything is computed in float64 from float32-representable inputs; floats
are stored rounded to float32 with 9 significant digits.  Each case seeds the
RNG from a CRC32 of its name, so cases are independent of each other's order.
"""
import json
import math
import sys
import zlib

import torch
import torch.nn.functional as F

F64 = torch.float64
CASES = []
NAMES = set()


# ---------------------------------------------------------------- helpers
def f32(t):
    """Round to float32, return float64 (float32-representable values)."""
    return t.to(torch.float32).to(F64)


def randn(*shape):
    return f32(torch.randn(tuple(shape), dtype=torch.float32))


def uniform(lo, hi, *shape):
    return f32(torch.rand(tuple(shape), dtype=torch.float32) * (hi - lo) + lo)


def away0(*shape, margin=0.05):
    """randn with |x| >= margin (safe around kinks at 0)."""
    x = torch.randn(tuple(shape), dtype=torch.float32)
    x = x + torch.sign(x) * margin
    return f32(x)


def signed_uniform(lo, hi, *shape):
    """Values with |x| in [lo, hi] and random sign (safe denominators)."""
    mag = torch.rand(tuple(shape), dtype=torch.float32) * (hi - lo) + lo
    sgn = torch.where(torch.rand(tuple(shape)) < 0.5, -1.0, 1.0)
    return f32(mag * sgn)


def distinct(*shape):
    """Distinct values (pairwise gaps >= 0.1), random order, roughly centred."""
    n = 1
    for s in shape:
        n *= s
    perm = torch.randperm(n).to(torch.float32)
    u = torch.rand(n, dtype=torch.float32) * 0.5
    x = (perm + u - n / 2.0) * 0.2
    return f32(x.reshape(*shape) if shape else x.reshape(()))


def grid(offset, *shape):
    """Values on the grid 0.2*k + offset, k in [-10, 10] (used for max/min ties)."""
    k = torch.randint(-10, 11, shape if shape else ()).to(torch.float32)
    return f32(k * 0.2 + offset)


def randint(lo, hi, *shape):
    return torch.randint(lo, hi, shape if shape else (), dtype=torch.int64)


def randbool(*shape):
    return torch.rand(tuple(shape)) < 0.5


def fmt_float(v):
    v = float(v)
    if not math.isfinite(v):
        raise ValueError("non-finite value in golden data")
    return float("%.9g" % v)


def T(t):
    t = t.detach()
    if t.dtype == torch.bool:
        dtype, data = "bool", [bool(v) for v in t.reshape(-1).tolist()]
    elif t.dtype in (torch.int64, torch.int32):
        dtype, data = "int64", [int(v) for v in t.reshape(-1).tolist()]
    else:
        dtype = "float32"
        data = [fmt_float(v) for v in t.to(torch.float32).reshape(-1).tolist()]
    return {"shape": list(t.shape), "dtype": dtype, "data": data}


def is_float(t):
    return t.dtype.is_floating_point


def case(name, op, attrs, make_inputs, fn, nodiff_in=(), nograd_out=()):
    """Register one case.

    make_inputs(): returns the list of input tensors (called after seeding).
    fn(*inputs): returns a tensor or a tuple/list of tensors.
    nodiff_in: input indices whose grads are null even if float.
    nograd_out: output indices whose grad_outputs are null even if float.
    """
    assert name not in NAMES, name
    NAMES.add(name)
    torch.manual_seed(zlib.crc32(name.encode()))
    raw = make_inputs()
    ins = []
    for i, t in enumerate(raw):
        t = t.detach().clone()
        if is_float(t) and i not in nodiff_in:
            t.requires_grad_(True)
        ins.append(t)
    outs = fn(*ins)
    if isinstance(outs, torch.Tensor):
        outs = [outs]
    outs = list(outs)
    gouts = []
    loss = None
    for j, o in enumerate(outs):
        if is_float(o) and j not in nograd_out and o.requires_grad:
            g = randn(*o.shape)
            gouts.append(g)
            term = (o * g).sum()
            loss = term if loss is None else loss + term
        else:
            gouts.append(None)
    diff = [t for t in ins if t.requires_grad]
    if loss is not None and diff:
        gl = torch.autograd.grad(loss, diff, allow_unused=True)
        gmap = {id(t): g for t, g in zip(diff, gl)}
    else:
        gmap = {}
    grads = []
    for t in ins:
        if t.requires_grad and loss is not None:
            g = gmap[id(t)]
            grads.append(T(g if g is not None else torch.zeros_like(t)))
        else:
            grads.append(None)
    CASES.append({
        "name": name,
        "op": op,
        "inputs": [T(t) for t in raw],
        "attrs": attrs,
        "outputs": [T(o) for o in outs],
        "grad_outputs": [None if g is None else T(g) for g in gouts],
        "grads": grads,
    })


def shp(s):
    return "x".join(str(v) for v in s) if s else "scalar"


# ---------------------------------------------------------------- binary
BIN_SHAPES = [([2, 3], [2, 3]), ([2, 3], [3]), ([2, 1, 4], [3, 1]), ([], [2, 3]), ([2, 3], [])]

BINARY = {
    "add": (torch.add, lambda s: randn(*s), lambda s: randn(*s)),
    "sub": (torch.sub, lambda s: randn(*s), lambda s: randn(*s)),
    "mul": (torch.mul, lambda s: randn(*s), lambda s: randn(*s)),
    "div": (torch.div, lambda s: randn(*s), lambda s: signed_uniform(0.5, 2.0, *s)),
    "pow": (torch.pow, lambda s: uniform(0.5, 2.0, *s), lambda s: randn(*s)),
    # a on the grid 0.2k, b on 0.2k+0.1: never within 0.1 of each other
    "maximum": (torch.maximum, lambda s: grid(0.0, *s), lambda s: grid(0.1, *s)),
    "minimum": (torch.minimum, lambda s: grid(0.0, *s), lambda s: grid(0.1, *s)),
}

for op, (fn, ga, gb) in BINARY.items():
    for sa, sb in BIN_SHAPES:
        case("%s_%s_%s" % (op, shp(sa), shp(sb)), op, {},
             lambda ga=ga, gb=gb, sa=sa, sb=sb: [ga(sa), gb(sb)], fn)

for e in [2.0, 3.0, 0.5, -1.5, 1.0]:
    case("pow_scalar_%g" % e, "pow_scalar", {"exponent": e},
         lambda: [uniform(0.5, 2.0, 3, 4)], lambda x, e=e: torch.pow(x, e))
case("pow_scalar_2_neg_base", "pow_scalar", {"exponent": 2.0},
     lambda: [randn(2, 5)], lambda x: torch.pow(x, 2.0))

# ---------------------------------------------------------------- unary
UNARY = {
    "neg": (torch.neg, lambda s: randn(*s)),
    "exp": (torch.exp, lambda s: randn(*s)),
    "log": (torch.log, lambda s: uniform(0.5, 2.0, *s)),
    "sqrt": (torch.sqrt, lambda s: uniform(0.5, 2.0, *s)),
    "rsqrt": (torch.rsqrt, lambda s: uniform(0.5, 2.0, *s)),
    "abs": (torch.abs, lambda s: away0(*s)),
    "tanh": (torch.tanh, lambda s: randn(*s)),
    "sigmoid": (torch.sigmoid, lambda s: randn(*s)),
    "relu": (F.relu, lambda s: away0(*s)),
}
for op, (fn, g) in UNARY.items():
    for s in ([2, 3, 4], [7], []):
        case("%s_%s" % (op, shp(s)), op, {}, lambda g=g, s=s: [g(s)], fn)
for appr in ("none", "tanh"):
    for s in ([2, 3, 4], [7], []):
        case("gelu_%s_%s" % (appr, shp(s)), "gelu", {"approximate": appr},
             lambda s=s: [randn(*s) * 2], lambda x, a=appr: F.gelu(x, approximate=a))

# ---------------------------------------------------------------- reductions
for op, fn in (("sum", torch.sum), ("mean", torch.mean)):
    for dims, keep in ((None, False), ([1], False), ([-1], True), ([0, 2], False),
                       ([0, 2], True), ([0, 1, 2], False), ([-3], True)):
        def f(x, dims=dims, keep=keep, fn=fn):
            if dims is None:
                return fn(x)
            return fn(x, dim=dims, keepdim=keep)
        case("%s_dims%s_keep%d" % (op, "all" if dims is None else "_".join(map(str, dims)), keep),
             op, {"dims": dims, "keepdim": keep}, lambda: [randn(2, 3, 4)], f)
    case("%s_2d_dims0" % op, op, {"dims": [0], "keepdim": False},
         lambda: [randn(5, 3)], lambda x, fn=fn: fn(x, dim=[0], keepdim=False))

for op, fn in (("amax", torch.amax), ("amin", torch.amin)):
    for dims, keep in (([0], False), ([1], True), ([-1], False), ([2], True), ([0, 2], False)):
        case("%s_dims%s_keep%d" % (op, "_".join(map(str, dims)), keep), op,
             {"dims": dims, "keepdim": keep}, lambda: [distinct(2, 3, 4)],
             lambda x, d=dims, k=keep, fn=fn: fn(x, dim=d, keepdim=k))

for op, fn in (("max_dim", torch.max), ("min_dim", torch.min)):
    for dim, keep in ((0, False), (1, True), (-1, False), (2, True)):
        case("%s_dim%d_keep%d" % (op, dim, keep), op, {"dim": dim, "keepdim": keep},
             lambda: [distinct(2, 3, 4)],
             lambda x, d=dim, k=keep, fn=fn: tuple(fn(x, d, k)))

for op, fn in (("argmax", torch.argmax), ("argmin", torch.argmin)):
    for dim, keep in ((0, False), (1, True), (-1, False)):
        case("%s_dim%d_keep%d" % (op, dim, keep), op, {"dim": dim, "keepdim": keep},
             lambda: [distinct(2, 3, 4)],
             lambda x, d=dim, k=keep, fn=fn: fn(x, dim=d, keepdim=k))

for dims, corr, keep in ((None, 1, False), (None, 0, False), ([1], 1, False), ([1], 0, True),
                         ([-1], 1, True), ([0, 2], 0, False), ([0, 2], 1, False)):
    case("var_dims%s_corr%d_keep%d" % ("all" if dims is None else "_".join(map(str, dims)), corr, keep),
         "var", {"dims": dims, "correction": corr, "keepdim": keep}, lambda: [randn(2, 3, 4)],
         lambda x, d=dims, c=corr, k=keep: torch.var(x, dim=d, correction=c, keepdim=k))

# ---------------------------------------------------------------- matmul / linear
for sa, sb in (([3], [3]), ([2, 3], [3]), ([3], [3, 4]), ([2, 3], [3, 4]),
               ([2, 2, 3], [3, 4]), ([2, 1, 2, 3], [3, 3, 2]), ([3], [2, 3, 4])):
    case("matmul_%s_%s" % (shp(sa), shp(sb)), "matmul", {},
         lambda sa=sa, sb=sb: [randn(*sa), randn(*sb)], torch.matmul)

case("linear_bias_2d", "linear", {}, lambda: [randn(4, 3), randn(5, 3), randn(5)], F.linear)
case("linear_bias_3d", "linear", {}, lambda: [randn(2, 3, 4), randn(2, 4), randn(2)], F.linear)
case("linear_nobias_2d", "linear", {}, lambda: [randn(4, 3), randn(5, 3)], F.linear)
case("linear_bias_1d", "linear", {}, lambda: [randn(3), randn(5, 3), randn(5)], F.linear)

# ---------------------------------------------------------------- convolutions
CONV1D = [
    ("basic", [2, 4, 9], [6, 4, 3], 1, 0, 1, 1, True),
    ("stride2", [2, 4, 9], [6, 4, 3], 2, 0, 1, 1, True),
    ("pad1", [2, 4, 9], [6, 4, 3], 1, 1, 1, 1, True),
    ("dil2", [2, 4, 9], [6, 4, 3], 1, 0, 2, 1, True),
    ("groups2", [2, 4, 9], [6, 2, 3], 1, 0, 1, 2, True),
    ("nobias", [2, 4, 9], [6, 4, 3], 1, 0, 1, 1, False),
    ("mixed", [2, 4, 10], [4, 2, 3], 2, 2, 2, 2, True),
]
for nm, xs, ws, st, pd, dl, g, bias in CONV1D:
    attrs = {"stride": [st], "padding": [pd], "dilation": [dl], "groups": g}

    def mk(xs=xs, ws=ws, bias=bias):
        r = [randn(*xs), randn(*ws) * 0.5]
        if bias:
            r.append(randn(ws[0]))
        return r

    case("conv1d_" + nm, "conv1d", attrs, mk,
         lambda x, w, b=None, st=st, pd=pd, dl=dl, g=g: F.conv1d(x, w, b, st, pd, dl, g))

CONV2D = [
    ("basic", [2, 4, 5, 6], [6, 4, 3, 3], [1, 1], [0, 0], [1, 1], 1, True),
    ("stride2", [2, 4, 5, 6], [6, 4, 3, 3], [2, 2], [0, 0], [1, 1], 1, True),
    ("pad1", [2, 4, 5, 6], [4, 4, 3, 3], [1, 1], [1, 1], [1, 1], 1, True),
    ("dil2", [2, 4, 5, 6], [6, 4, 2, 2], [1, 1], [0, 0], [2, 2], 1, True),
    ("groups2", [2, 4, 5, 6], [6, 2, 3, 3], [1, 1], [0, 0], [1, 1], 2, True),
    ("nobias", [2, 4, 5, 6], [4, 4, 3, 3], [1, 1], [1, 1], [1, 1], 1, False),
    ("asym", [1, 3, 6, 7], [4, 3, 2, 3], [2, 1], [1, 0], [1, 2], 1, True),
    ("mixed", [2, 4, 6, 6], [4, 2, 3, 3], [2, 2], [1, 1], [2, 2], 2, True),
]
for nm, xs, ws, st, pd, dl, g, bias in CONV2D:
    attrs = {"stride": st, "padding": pd, "dilation": dl, "groups": g}

    def mk(xs=xs, ws=ws, bias=bias):
        r = [randn(*xs), randn(*ws) * 0.5]
        if bias:
            r.append(randn(ws[0]))
        return r

    case("conv2d_" + nm, "conv2d", attrs, mk,
         lambda x, w, b=None, st=st, pd=pd, dl=dl, g=g: F.conv2d(x, w, b, st, pd, dl, g))

# F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation); the weight is
# [C_in, C_out / groups, kH, kW]. "dil*_op*" cases have output_padding >= stride (allowed below
# the dilation), whose last rows or columns no kernel tap reaches.
CONV_T2D = [
    # name, x, w, stride, padding, output_padding, groups, dilation, bias
    ("unet_k2s2", [2, 4, 5, 6], [4, 3, 2, 2], [2, 2], [0, 0], [0, 0], 1, [1, 1], True),
    ("unet_k2s2_nobias", [2, 4, 5, 6], [4, 3, 2, 2], [2, 2], [0, 0], [0, 0], 1, [1, 1], False),
    ("k3s2p1op1", [2, 4, 5, 4], [4, 3, 3, 3], [2, 2], [1, 1], [1, 1], 1, [1, 1], True),
    ("k3s2p1op1_nobias", [1, 3, 4, 5], [3, 2, 3, 3], [2, 2], [1, 1], [1, 1], 1, [1, 1], False),
    ("groups2", [2, 4, 5, 6], [4, 3, 3, 3], [1, 1], [0, 0], [0, 0], 2, [1, 1], True),
    ("groups2_s2_nobias", [2, 6, 3, 4], [6, 2, 2, 3], [2, 2], [0, 1], [1, 0], 2, [1, 1], False),
    ("dil2", [2, 3, 4, 5], [3, 4, 3, 3], [1, 1], [1, 1], [0, 0], 1, [2, 2], True),
    ("dil2_nobias", [1, 3, 4, 5], [3, 2, 2, 3], [1, 1], [0, 0], [0, 0], 1, [2, 2], False),
    ("asym", [1, 3, 4, 5], [3, 4, 3, 2], [2, 1], [1, 0], [1, 0], 1, [1, 1], True),
    ("mixed", [2, 4, 4, 3], [4, 2, 3, 3], [2, 2], [1, 1], [1, 1], 2, [2, 2], True),
    ("dil2_op1_s1", [1, 3, 4, 5], [3, 2, 3, 3], [1, 1], [0, 0], [1, 1], 1, [2, 2], True),
    ("dil3_op2_p1", [2, 2, 3, 4], [2, 3, 2, 3], [1, 2], [1, 1], [2, 1], 1, [3, 3], True),
    ("dil3_s2_op2_p2", [1, 4, 3, 3], [4, 1, 3, 2], [2, 2], [2, 0], [2, 0], 2, [3, 1], True),
]
for nm, xs, ws, st, pd, op, g, dl, bias in CONV_T2D:
    attrs = {"stride": st, "padding": pd, "output_padding": op, "groups": g, "dilation": dl}

    def mk(xs=xs, ws=ws, g=g, bias=bias):
        r = [randn(*xs), randn(*ws) * 0.5]
        if bias:
            r.append(randn(ws[1] * g))
        return r

    case("conv_transpose2d_" + nm, "conv_transpose2d", attrs, mk,
         lambda x, w, b=None, st=st, pd=pd, op=op, g=g, dl=dl:
         F.conv_transpose2d(x, w, b, st, pd, op, g, dl))

# ---------------------------------------------------------------- pooling
for nm, xs, k, s, p in (("k2s2", [2, 3, 8], [2], [2], [0]),
                        ("k3s2p1", [2, 3, 9], [3], [2], [1]),
                        ("k3s1", [1, 2, 7], [3], [1], [0])):
    case("max_pool1d_" + nm, "max_pool1d", {"kernel_size": k, "stride": s, "padding": p},
         lambda xs=xs: [distinct(*xs)],
         lambda x, k=k, s=s, p=p: F.max_pool1d(x, k, s, p))

for nm, xs, k, s, p in (("k2s2", [2, 3, 4, 6], [2, 2], [2, 2], [0, 0]),
                        ("k3s2p1", [2, 2, 5, 7], [3, 3], [2, 2], [1, 1]),
                        ("k3s1", [1, 2, 5, 5], [3, 3], [1, 1], [0, 0]),
                        ("asym", [1, 3, 6, 7], [2, 3], [2, 1], [1, 1])):
    case("max_pool2d_" + nm, "max_pool2d", {"kernel_size": k, "stride": s, "padding": p},
         lambda xs=xs: [distinct(*xs)],
         lambda x, k=k, s=s, p=p: F.max_pool2d(x, k, s, p))

for nm, xs, k, s, p in (("k2s2", [2, 3, 4, 6], [2, 2], [2, 2], [0, 0]),
                        ("k3s2p1", [2, 2, 5, 7], [3, 3], [2, 2], [1, 1]),
                        ("k3s1p1", [1, 2, 5, 5], [3, 3], [1, 1], [1, 1]),
                        ("asym", [1, 3, 6, 7], [2, 3], [2, 1], [1, 1])):
    for cip in ((True, False) if p[0] or p[1] else (True,)):
        attrs = {"kernel_size": k, "stride": s, "padding": p,
                 "count_include_pad": cip, "ceil_mode": False}
        case("avg_pool2d_%s_cip%d" % (nm, cip), "avg_pool2d", attrs,
             lambda xs=xs: [randn(*xs)],
             lambda x, k=k, s=s, p=p, cip=cip: F.avg_pool2d(x, k, s, p, ceil_mode=False,
                                                           count_include_pad=cip))

for nm, xs, os in (("5x7_to_3x2", [2, 3, 5, 7], [3, 2]),
                   ("6x6_to_3x3", [1, 2, 6, 6], [3, 3]),
                   ("4x5_to_1x1", [2, 3, 4, 5], [1, 1]),
                   ("3x4_to_5x6", [1, 2, 3, 4], [5, 6]),
                   ("7x5_to_4x3", [1, 2, 7, 5], [4, 3])):
    case("adaptive_avg_pool2d_" + nm, "adaptive_avg_pool2d", {"output_size": os},
         lambda xs=xs: [randn(*xs)], lambda x, os=os: F.adaptive_avg_pool2d(x, os))

# ---------------------------------------------------------------- softmax
for op, fn in (("softmax", F.softmax), ("log_softmax", F.log_softmax)):
    for xs, dim in (([3, 5], 1), ([3, 5], 0), ([2, 3, 4], -1), ([2, 3, 4], 1), ([6], 0)):
        case("%s_%s_dim%d" % (op, shp(xs), dim), op, {"dim": dim},
             lambda xs=xs: [randn(*xs) * 2], lambda x, d=dim, fn=fn: fn(x, dim=d))

# ---------------------------------------------------------------- losses
for red in ("mean", "sum", "none"):
    for ls in (0.0, 0.1):
        case("cross_entropy_NC_%s_ls%g" % (red, ls), "cross_entropy",
             {"reduction": red, "label_smoothing": ls},
             lambda: [randn(6, 5) * 2, randint(0, 5, 6)],
             lambda x, t, r=red, l=ls: F.cross_entropy(x, t, reduction=r, label_smoothing=l))
for red, ls in (("mean", 0.0), ("none", 0.1), ("sum", 0.1)):
    case("cross_entropy_NCd_%s_ls%g" % (red, ls), "cross_entropy",
         {"reduction": red, "label_smoothing": ls},
         lambda: [randn(3, 4, 5) * 2, randint(0, 4, 3, 5)],
         lambda x, t, r=red, l=ls: F.cross_entropy(x, t, reduction=r, label_smoothing=l))

for red in ("mean", "sum", "none"):
    case("nll_loss_%s" % red, "nll_loss", {"reduction": red},
         lambda: [F.log_softmax(randn(6, 5) * 2, dim=1).to(torch.float32).to(F64), randint(0, 5, 6)],
         lambda x, t, r=red: F.nll_loss(x, t, reduction=r))
    case("mse_loss_%s" % red, "mse_loss", {"reduction": red},
         lambda: [randn(3, 4), randn(3, 4)], lambda a, b, r=red: F.mse_loss(a, b, reduction=r))
case("mse_loss_3d_mean", "mse_loss", {"reduction": "mean"},
     lambda: [randn(2, 3, 4), randn(2, 3, 4)], lambda a, b: F.mse_loss(a, b, reduction="mean"))

# ---------------------------------------------------------------- normalization
def bn_fn(training):
    def f(x, w, b, rm, rv):
        rm2, rv2 = rm.clone(), rv.clone()
        y = F.batch_norm(x, rm2, rv2, w, b, training=training, momentum=0.1, eps=1e-5)
        return y, rm2, rv2
    return f


for xs in ([6, 3], [2, 3, 4, 4]):
    for training in (True, False):
        C = xs[1]
        case("batch_norm_%s_train%d" % (shp(xs), training), "batch_norm",
             {"training": training, "momentum": 0.1, "eps": 1e-5},
             lambda xs=xs, C=C: [randn(*xs) * 1.5 + 0.3, randn(C), randn(C),
                                 randn(C) * 0.5, uniform(0.5, 2.0, C)],
             bn_fn(training), nodiff_in=(3, 4), nograd_out=(1, 2))

for xs, ns in (([4, 5], [5]), ([2, 3, 4], [3, 4]), ([2, 3, 4], [4])):
    case("layer_norm_%s_ns%s" % (shp(xs), shp(ns)), "layer_norm",
         {"normalized_shape": ns, "eps": 1e-5},
         lambda xs=xs, ns=ns: [randn(*xs) * 2 + 0.5, randn(*ns), randn(*ns)],
         lambda x, w, b, ns=ns: F.layer_norm(x, ns, w, b, eps=1e-5))

for xs, g in (([2, 6, 3, 3], 2), ([2, 6, 3, 3], 3), ([2, 6, 3, 3], 1), ([2, 6, 3, 3], 6), ([2, 4, 5], 2)):
    case("group_norm_%s_g%d" % (shp(xs), g), "group_norm", {"num_groups": g, "eps": 1e-5},
         lambda xs=xs: [randn(*xs) * 2 + 0.5, randn(xs[1]), randn(xs[1])],
         lambda x, w, b, g=g: F.group_norm(x, g, w, b, eps=1e-5))

# ---------------------------------------------------------------- embedding
case("embedding_10x4_idx3x5", "embedding", {},
     lambda: [randn(10, 4), randint(0, 10, 3, 5)], lambda w, i: F.embedding(i, w))
case("embedding_6x3_idx2x4_repeats", "embedding", {},
     lambda: [randn(6, 3), torch.tensor([[0, 1, 1, 5], [5, 5, 2, 0]])],
     lambda w, i: F.embedding(i, w))
# F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq), as LibTorch's
# F::embedding(input, weight, F::EmbeddingFuncOptions()...); inputs are [weight, indices].
# max_norm rescales the weight's picked rows in place (outside autograd) before the lookup.
for nm, w_shape, idx, opts in (
        ("padding2", [6, 3], [[0, 2, 1, 2], [5, 2, 2, 0]], {"padding_idx": 2}),
        ("padding_neg1", [5, 2], [4, 0, 4, 1], {"padding_idx": -1}),
        ("scale_freq", [6, 3], [[0, 1, 1, 5], [5, 5, 2, 0]], {"scale_grad_by_freq": True}),
        ("padding_scale_freq", [6, 3], [[0, 1, 1, 5], [5, 5, 2, 1]],
         {"padding_idx": 5, "scale_grad_by_freq": True}),
        ("max_norm1", [8, 4], [[0, 3, 3], [7, 1, 0]], {"max_norm": 1.0}),
        ("max_norm1.5_p1", [8, 4], [2, 6, 5, 2], {"max_norm": 1.5, "norm_type": 1.0})):
    attrs = {"padding_idx": None, "max_norm": None, "norm_type": 2.0, "scale_grad_by_freq": False}
    attrs.update(opts)
    case("embedding_opts_" + nm, "embedding_opts", attrs,
         lambda w_shape=w_shape, idx=idx: [randn(*w_shape) * 1.5, torch.tensor(idx)],
         lambda w, i, a=attrs: F.embedding(i, w, padding_idx=a["padding_idx"],
                                           max_norm=a["max_norm"], norm_type=a["norm_type"],
                                           scale_grad_by_freq=a["scale_grad_by_freq"]))

# ---------------------------------------------------------------- cat / stack / split / chunk
for nm, shapes, dim in (("dim0", [[2, 3], [1, 3], [3, 3]], 0),
                        ("dim1", [[2, 3], [2, 1], [2, 2]], 1),
                        ("dimneg1", [[2, 3, 2], [2, 3, 1]], -1),
                        ("3d_dim1", [[2, 1, 4], [2, 3, 4]], 1)):
    case("cat_" + nm, "cat", {"dim": dim}, lambda shapes=shapes: [randn(*s) for s in shapes],
         lambda *xs, d=dim: torch.cat(xs, dim=d))
for nm, s, n, dim in (("dim0", [2, 3], 3, 0), ("dim1", [2, 3], 2, 1), ("dimneg1", [2, 3], 2, -1),
                      ("dim2", [2, 3], 3, 2)):
    case("stack_" + nm, "stack", {"dim": dim}, lambda s=s, n=n: [randn(*s) for _ in range(n)],
         lambda *xs, d=dim: torch.stack(xs, dim=d))
for nm, s, ss, dim in (("even_dim0", [4, 3], 2, 0), ("uneven_dim1", [2, 5], 2, 1),
                       ("uneven_dimneg1", [2, 3, 7], 3, -1), ("bigger_than_dim", [2, 3], 5, 1)):
    case("split_" + nm, "split", {"split_size": ss, "dim": dim}, lambda s=s: [randn(*s)],
         lambda x, ss=ss, d=dim: tuple(torch.split(x, ss, dim=d)))
for nm, s, c, dim in (("even_dim0", [4, 3], 2, 0), ("7by3_dim1", [2, 7], 3, 1),
                      ("6by4_gives3_dimneg1", [2, 6], 4, -1), ("5by5_dim1", [1, 5], 5, 1)):
    case("chunk_" + nm, "chunk", {"chunks": c, "dim": dim}, lambda s=s: [randn(*s)],
         lambda x, c=c, d=dim: tuple(torch.chunk(x, c, dim=d)))

# ---------------------------------------------------------------- where / masked_fill / index ops / clamp
case("where_same_shape", "where", {}, lambda: [randbool(3, 4), randn(3, 4), randn(3, 4)], torch.where)
case("where_broadcast", "where", {}, lambda: [randbool(3, 1), randn(4), randn(3, 4)], torch.where)
case("where_broadcast_scalar_b", "where", {}, lambda: [randbool(2, 3), randn(2, 3), randn()], torch.where)

for nm, xs, ms, v in (("same", [3, 4], [3, 4], -1.5), ("bcast_row", [3, 4], [4], 0.0),
                      ("bcast_col", [2, 3, 4], [3, 1], 2.25)):
    case("masked_fill_" + nm, "masked_fill", {"value": v},
         lambda xs=xs, ms=ms: [randn(*xs), randbool(*ms)],
         lambda x, m, v=v: x.masked_fill(m, v))

for nm, xs, idx, dim in (("dim0", [4, 5], [3, 0, 3], 0), ("dim1", [4, 5], [4, 1], 1),
                         ("dimneg1", [2, 3, 4], [0, 3, 3, 1, 2], -1)):
    case("index_select_" + nm, "index_select", {"dim": dim},
         lambda xs=xs, idx=idx: [randn(*xs), torch.tensor(idx, dtype=torch.int64)],
         lambda x, i, d=dim: torch.index_select(x, d, i))

for nm, xs, ishape, dim in (("dim1", [3, 4], [3, 2], 1), ("dim0", [3, 4], [2, 4], 0),
                            ("dimneg1_3d", [2, 3, 4], [2, 3, 5], -1), ("dim1_smaller", [3, 4], [2, 3], 1)):
    def mk(xs=xs, ishape=ishape, dim=dim):
        return [randn(*xs), randint(0, xs[dim], *ishape)]
    case("gather_" + nm, "gather", {"dim": dim}, mk, lambda x, i, d=dim: torch.gather(x, d, i))


def clamp_input(lo, hi, *shape):
    x = torch.randn(tuple(shape), dtype=torch.float32)
    for b in (lo, hi):
        if b is not None:
            near = (x - b).abs() < 0.05
            x = torch.where(near, x + 0.1 * torch.sign(x - b + 1e-6), x)
    return f32(x)


for nm, lo, hi in (("both", -0.5, 0.7), ("min_only", 0.0, None), ("max_only", None, 0.25)):
    case("clamp_" + nm, "clamp", {"min": lo, "max": hi},
         lambda lo=lo, hi=hi: [clamp_input(lo, hi, 4, 5)],
         lambda x, lo=lo, hi=hi: torch.clamp(x, min=lo, max=hi))

# ---------------------------------------------------------------- view ops
for nm, xs, s in (("to_6x_neg1", [2, 3, 4], [6, -1]), ("flatten", [2, 3, 4], [-1]),
                  ("to_4x3x2", [2, 3, 4], [4, 3, 2]), ("add_unit_dims", [3, 4], [1, 3, 1, 4]),
                  ("neg1_first", [2, 6], [-1, 4])):
    case("reshape_" + nm, "reshape", {"shape": s}, lambda xs=xs: [randn(*xs)],
         lambda x, s=s: x.reshape(s))
for dims in ([2, 0, 1], [1, 0, 2], [-1, 0, 1], [0, 1, 2]):
    case("permute_%s" % "_".join(map(str, dims)), "permute", {"dims": dims},
         lambda: [randn(2, 3, 4)], lambda x, d=dims: x.permute(*d))
for d0, d1 in ((0, 1), (0, 2), (-1, -2), (1, 1)):
    case("transpose_%d_%d" % (d0, d1), "transpose", {"dim0": d0, "dim1": d1},
         lambda: [randn(2, 3, 4)], lambda x, a=d0, b=d1: x.transpose(a, b))
for dim, st, ln in ((1, 1, 2), (0, 0, 1), (-1, 2, 2), (2, 0, 4)):
    case("narrow_dim%d_s%d_l%d" % (dim, st, ln), "narrow", {"dim": dim, "start": st, "length": ln},
         lambda: [randn(2, 3, 4)], lambda x, d=dim, s=st, l=ln: x.narrow(d, s, l))


def slice_fn(dim, start, end, step):
    def f(x):
        idx = [slice(None)] * x.dim()
        idx[dim] = slice(start, end, step)
        return x[tuple(idx)]
    return f


for xs, dim, st, en, sp in (([3, 6], 1, 1, 5, 2), ([5, 2], 0, 0, 5, 1), ([2, 3, 7], -1, 2, 7, 3),
                            ([2, 5, 3], 1, 1, 4, 1), ([4, 6], 1, 0, 6, 4)):
    case("slice_%s_dim%d_%d_%d_%d" % (shp(xs), dim, st, en, sp), "slice",
         {"dim": dim, "start": st, "end": en, "step": sp}, lambda xs=xs: [randn(*xs)],
         slice_fn(dim, st, en, sp))
for nm, xs, s in (("3x1_to_3x4", [3, 1], [3, 4]), ("1x4_to_2x3x4", [1, 4], [2, 3, 4]),
                  ("neg1_keep", [2, 1, 4], [2, 3, -1]), ("1d_to_2d", [4], [3, 4]),
                  ("scalar", [], [2, 3])):
    case("expand_" + nm, "expand", {"shape": s}, lambda xs=xs: [randn(*xs)],
         lambda x, s=s: x.expand(*s))
for xs, dim in (([3, 1, 4], 1), ([3, 4, 1], -1), ([1, 3], 0), ([3, 4], 1)):
    case("squeeze_%s_dim%d" % (shp(xs), dim), "squeeze", {"dim": dim}, lambda xs=xs: [randn(*xs)],
         lambda x, d=dim: x.squeeze(d))
for xs, dim in (([3, 4], 0), ([3, 4], -1), ([3, 4], 2), ([3, 4], 1), ([], 0)):
    case("unsqueeze_%s_dim%d" % (shp(xs), dim), "unsqueeze", {"dim": dim}, lambda xs=xs: [randn(*xs)],
         lambda x, d=dim: x.unsqueeze(d))


# ---------------------------------------------------------------- triu / tril
for nm, xs, d in (("4x5_d0", [4, 5], 0), ("4x5_d1", [4, 5], 1), ("4x5_dneg1", [4, 5], -1),
                  ("2x3x4_d0", [2, 3, 4], 0), ("2x3x4_d2", [2, 3, 4], 2),
                  ("5x3_dneg2", [5, 3], -2), ("3x3_d5", [3, 3], 5)):
    for op, fn in (("triu", torch.triu), ("tril", torch.tril)):
        case("%s_%s" % (op, nm), op, {"diagonal": d}, lambda xs=xs: [randn(*xs)],
             lambda x, d=d, fn=fn: fn(x, d))

# ---------------------------------------------------------------- bmm / baddbmm / einsum
case("bmm_2x3x4_2x4x5", "bmm", {}, lambda: [randn(2, 3, 4), randn(2, 4, 5)], torch.bmm)
case("bmm_1x1x3_1x3x2", "bmm", {}, lambda: [randn(1, 1, 3), randn(1, 3, 2)], torch.bmm)
for nm, ins, beta, alpha in (("full", [2, 3, 5], 1.0, 1.0), ("row", [5], 0.5, 2.0),
                             ("bcast", [1, 3, 1], -1.0, 0.25), ("mat", [3, 5], 2.0, 1.0)):
    case("baddbmm_%s_b%g_a%g" % (nm, beta, alpha), "baddbmm", {"beta": beta, "alpha": alpha},
         lambda ins=ins: [randn(*ins), randn(2, 3, 4), randn(2, 4, 5)],
         lambda i, a, b, be=beta, al=alpha: torch.baddbmm(i, a, b, beta=be, alpha=al))
# beta = 0: the input is ignored (PyTorch gives it a zero gradient)
case("baddbmm_beta0", "baddbmm", {"beta": 0.0, "alpha": 1.5},
     lambda: [randn(2, 3, 5), randn(2, 3, 4), randn(2, 4, 5)],
     lambda i, a, b: torch.baddbmm(i, a, b, beta=0.0, alpha=1.5))

EINSUM = [
    ("ij,jk->ik", [[3, 4], [4, 5]]),
    ("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]]),
    ("bhqd,bhkd->bhqk", [[2, 2, 3, 4], [2, 2, 5, 4]]),
    ("bhqk,bhkd->bhqd", [[2, 2, 3, 5], [2, 2, 5, 4]]),
    ("bi,bi->b", [[3, 4], [3, 4]]),
    ("i,j->ij", [[3], [4]]),
    ("ii->i", [[4, 4]]),
    ("ii->", [[4, 4]]),
    ("ij->ji", [[3, 4]]),
    ("ij->", [[3, 4]]),
    ("ijk->kij", [[2, 3, 4]]),
    ("ij,jk", [[3, 4], [4, 5]]),
    ("ba,ca", [[3, 4], [5, 4]]),
    ("i,i", [[5], [5]]),
    ("bqd,bkd->bqk", [[2, 3, 4], [2, 5, 4]]),
    ("ij,jk,kl->il", [[2, 3], [3, 4], [4, 5]]),
    ("bn,anm,bm->ba", [[2, 3], [4, 3, 5], [2, 5]]),
    ("iij->j", [[3, 3, 4]]),
    ("ik,jk->ijk", [[2, 3], [4, 3]]),
    ("bid,bjd->bij", [[1, 3, 2], [1, 4, 2]]),
]
for eq, shapes in EINSUM:
    nm = "einsum_" + eq.replace("->", "_to_").replace(",", "_")
    case(nm, "einsum", {"equation": eq}, lambda shapes=shapes: [randn(*s) for s in shapes],
         lambda *xs, eq=eq: torch.einsum(eq, *xs))


# ---------------------------------------------------------------- scaled dot-product attention
# PyTorch 1.13 has no F.scaled_dot_product_attention: PyTorch 2's documented reference, in float64.
def sdpa_ref(q, k, v, mask=None, is_causal=False, scale=None):
    L, S = q.size(-2), k.size(-2)
    sc = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=q.dtype)
    if is_causal:
        bias = bias.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(0), float("-inf"))
    if mask is not None:
        if mask.dtype == torch.bool:
            bias = bias.masked_fill(~mask, float("-inf"))
        else:
            bias = bias + mask
    w = torch.softmax(q @ k.transpose(-2, -1) * sc + bias, dim=-1)
    return w @ v


def allowed_mask(*shape):
    """A random bool mask (True = attend) whose rows are never all False."""
    m = torch.rand(tuple(shape)) < 0.6
    m[..., 0] = True
    return m


SDPA = [
    ("plain_4d", [2, 3, 4, 8], [2, 3, 5, 8], [2, 3, 5, 6], None, False, None),
    ("plain_3d", [2, 4, 8], [2, 6, 8], [2, 6, 3], None, False, None),
    ("causal", [2, 2, 5, 4], [2, 2, 5, 4], [2, 2, 5, 4], None, True, None),
    ("bool_mask", [2, 2, 4, 4], [2, 2, 6, 4], [2, 2, 6, 4], ("bool", [4, 6]), False, None),
    ("bool_mask_batched", [2, 2, 4, 4], [2, 2, 6, 4], [2, 2, 6, 4], ("bool", [2, 1, 4, 6]),
     False, None),
    ("float_mask", [2, 2, 4, 4], [2, 2, 6, 4], [2, 2, 6, 4], ("float", [2, 1, 1, 6]), False, None),
    ("scale", [1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], None, False, 0.3),
    ("causal_scale_long", [1, 1, 9, 4], [1, 1, 9, 4], [1, 1, 9, 2], None, True, 0.7),
]
for nm, qs, ks, vs, mask, causal, scale in SDPA:
    def mk(qs=qs, ks=ks, vs=vs, mask=mask):
        r = [randn(*qs), randn(*ks), randn(*vs)]
        if mask is not None:
            r.append(allowed_mask(*mask[1]) if mask[0] == "bool" else randn(*mask[1]))
        return r
    case("sdpa_" + nm, "scaled_dot_product_attention",
         {"is_causal": causal, "scale": scale}, mk,
         lambda q, k, v, m=None, c=causal, sc=scale: sdpa_ref(q, k, v, m, c, sc))


# ---------------------------------------------------------------- rotary position embedding
# HF's GPT-J and GPT-NeoX code, in float64 like every case here: inv_freq = 1 / base **
# (arange(0, dim, 2) / dim), the angles the outer product of the positions with it. (HF builds
# the tables in float32, whose angles drift by up to position * 2**-24 rad from these; GPT-J's
# own training code built them in float64 with numpy.)
def rotary_tables(positions, dim, base, offset):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=F64) / dim))
    pos = torch.arange(offset, offset + positions, dtype=F64)
    sinusoid = pos[:, None] * inv_freq[None, :]
    return sinusoid.sin(), sinusoid.cos()


def rotate_every_two(x):
    """GPT-J: (x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...)."""
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


def rotate_half(x):
    """GPT-NeoX: halves (a, b) -> (-b, a)."""
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def gptj_rotary(x, rotary_dim, offset, base=10000.0):
    """GPT-J on [batch, seq, heads, head_dim]: the first rotary_dim features rotate by pairs."""
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
    sin, cos = rotary_tables(x.shape[1], rotary_dim, base, offset)
    sin = sin.repeat_interleave(2, dim=-1)[None, :, None, :]
    cos = cos.repeat_interleave(2, dim=-1)[None, :, None, :]
    return torch.cat((x_rot * cos + rotate_every_two(x_rot) * sin, x_pass), dim=-1)


def neox_rotary(x, rotary_dim, offset, base=10000.0):
    """GPT-NeoX on [batch, heads, seq, head_dim]: the first rotary_dim features rotate by halves."""
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
    sin, cos = rotary_tables(x.shape[2], rotary_dim, base, offset)
    sin = torch.cat((sin, sin), dim=-1)[None, None, :, :]
    cos = torch.cat((cos, cos), dim=-1)[None, None, :, :]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)


def rotary_ref(x, a):
    """The case's layout moved to the model's own ([b, s, h, d] for GPT-J, [b, h, s, d] for NeoX)."""
    rd = x.shape[-1] if a["rotary_dim"] is None else a["rotary_dim"]
    own = 1 if a["style"] == "gptj" else 2
    fn = gptj_rotary if a["style"] == "gptj" else neox_rotary
    if x.dim() == 3:  # [batch, seq, head_dim]: one head, at dim 2 for GPT-J and 1 for NeoX
        heads = 2 if own == 1 else 1
        return fn(x.unsqueeze(heads), rd, a["offset"], a["base"]).squeeze(heads)
    if a["seq_dim"] != own:
        return fn(x.transpose(1, 2), rd, a["offset"], a["base"]).transpose(1, 2)
    return fn(x, rd, a["offset"], a["base"])


ROTARY = [
    # name, x, style, rotary_dim, offset, seq_dim, base
    ("gptj_full", [2, 5, 3, 8], "gptj", None, 0, 1, 10000.0),
    ("gptj_partial_offset3", [2, 4, 2, 16], "gptj", 8, 3, 1, 10000.0),
    ("gptj_6b_ratio_offset7", [1, 3, 2, 32], "gptj", 8, 7, 1, 10000.0),
    ("gptj_long_offset", [1, 6, 1, 12], "gptj", 12, 2041, 1, 10000.0),
    ("gptj_bhsd", [2, 3, 4, 8], "gptj", 6, 1, 2, 10000.0),
    ("gptj_3d", [2, 5, 6], "gptj", 4, 2, 1, 10000.0),
    ("neox_full", [1, 2, 4, 6], "neox", None, 0, 2, 10000.0),
    ("neox_partial_offset2", [2, 3, 5, 8], "neox", 4, 2, 2, 10000.0),
    ("neox_bshd", [2, 4, 3, 10], "neox", 6, 5, 1, 10000.0),
    ("neox_base500", [1, 2, 3, 8], "neox", 8, 1, 2, 500.0),
]
for nm, xs, style, rd, off, sd, base in ROTARY:
    attrs = {"style": style, "rotary_dim": rd, "offset": off, "seq_dim": sd, "base": base}
    case("rotary_embedding_" + nm, "rotary_embedding", attrs, lambda xs=xs: [randn(*xs)],
         lambda x, a=attrs: rotary_ref(x, a))


# ---------------------------------------------------------------- losses with weight / ignore_index
def with_ignored(t, idx, every=3):
    t = t.clone()
    t.view(-1)[::every] = idx
    return t


for red in ("mean", "sum", "none"):
    for ls in (0.0, 0.2):
        for w in (False, True):
            for ign in (-100, 1):
                nm = "cross_entropy_opts_%s_ls%g_w%d_ign%d" % (red, ls, w, ign)

                def mk(w=w, ign=ign):
                    r = [randn(7, 4) * 2, with_ignored(randint(0, 4, 7), ign)]
                    if w:
                        r.append(uniform(0.2, 2.0, 4))
                    return r
                case(nm, "cross_entropy",
                     {"reduction": red, "label_smoothing": ls, "ignore_index": ign}, mk,
                     lambda x, t, wt=None, r=red, l=ls, i=ign: F.cross_entropy(
                         x, t, weight=wt, ignore_index=i, reduction=r, label_smoothing=l),
                     nodiff_in=(2,))
for red, ls in (("mean", 0.1), ("sum", 0.0), ("none", 0.1)):
    case("cross_entropy_opts_NCd_%s_ls%g" % (red, ls), "cross_entropy",
         {"reduction": red, "label_smoothing": ls, "ignore_index": -100},
         lambda: [randn(2, 4, 3) * 2, with_ignored(randint(0, 4, 2, 3), -100, 4),
                  uniform(0.2, 2.0, 4)],
         lambda x, t, wt, r=red, l=ls: F.cross_entropy(x, t, weight=wt, reduction=r,
                                                       label_smoothing=l),
         nodiff_in=(2,))
for red in ("mean", "sum", "none"):
    for w in (False, True):
        def mk(w=w):
            r = [F.log_softmax(randn(6, 5) * 2, dim=1).to(torch.float32).to(F64),
                 with_ignored(randint(0, 5, 6), -100, 4)]
            if w:
                r.append(uniform(0.2, 2.0, 5))
            return r
        case("nll_loss_opts_%s_w%d" % (red, w), "nll_loss",
             {"reduction": red, "ignore_index": -100}, mk,
             lambda x, t, wt=None, r=red: F.nll_loss(x, t, weight=wt, reduction=r),
             nodiff_in=(2,))
case("nll_loss_opts_ignore_class2", "nll_loss", {"reduction": "mean", "ignore_index": 2},
     lambda: [F.log_softmax(randn(8, 3), dim=1).to(torch.float32).to(F64),
              torch.tensor([0, 2, 1, 2, 2, 0, 1, 1])],
     lambda x, t: F.nll_loss(x, t, ignore_index=2))

case("layer_norm_noaffine_3x4", "layer_norm", {"normalized_shape": [4], "eps": 1e-5},
     lambda: [randn(3, 4) * 2 + 0.5], lambda x: F.layer_norm(x, [4], eps=1e-5))
case("layer_norm_eps1e-3_2x3x8", "layer_norm", {"normalized_shape": [8], "eps": 1e-3},
     lambda: [randn(2, 3, 8) * 0.1, randn(8), randn(8)],
     lambda x, w, b: F.layer_norm(x, [8], w, b, eps=1e-3))


# ---------------------------------------------------------------- interpolate
# F.interpolate(x, size | scale_factor, mode, align_corners, recompute_scale_factor), as
# LibTorch's F::interpolate(x, F::InterpolateFuncOptions()...). PyTorch computes nearest indices
# in float32 whatever the dtype, and linear/cubic coordinates in the input's dtype (float64 here).
def interp_case(nm, shape, mode, size=None, scale=None, align=None, recompute=None):
    attrs = {"size": size, "scale_factor": scale, "mode": mode, "align_corners": align,
             "recompute_scale_factor": recompute}
    case("interpolate_" + nm, "interpolate", attrs, lambda: [randn(*shape)],
         lambda x: F.interpolate(x, size=size, scale_factor=scale, mode=mode, align_corners=align,
                                 recompute_scale_factor=recompute))


interp_case("nearest_1d_up", [2, 3, 4], "nearest", size=[9])
interp_case("nearest_1d_down", [1, 2, 7], "nearest", size=[3])
interp_case("nearest_2d_up", [2, 2, 2, 3], "nearest", size=[5, 7])
interp_case("nearest_2d_x2", [1, 2, 3, 2], "nearest", scale=[2.0, 2.0])
interp_case("nearest_2d_scale1.7", [1, 1, 3, 4], "nearest", scale=[1.7, 1.7])
interp_case("nearest_2d_scale1.7_recompute", [1, 1, 3, 4], "nearest", scale=[1.7, 1.7],
            recompute=True)
interp_case("nearest_2d_down", [1, 2, 7, 5], "nearest", size=[3, 2])
interp_case("nearest_3d", [1, 2, 2, 3, 2], "nearest", size=[3, 4, 5])
interp_case("nearest_exact_2d_up", [1, 2, 3, 4], "nearest-exact", size=[7, 6])
interp_case("nearest_exact_2d_down", [1, 1, 7, 5], "nearest-exact", size=[3, 2])
interp_case("nearest_exact_1d_scale1.5", [2, 1, 4], "nearest-exact", scale=[1.5])
for align in (False, True):
    a = "ac%d" % align
    interp_case("linear_up_" + a, [2, 3, 4], "linear", size=[9], align=align)
    interp_case("linear_down_" + a, [1, 2, 9], "linear", size=[4], align=align)
    interp_case("linear_to1_" + a, [1, 2, 5], "linear", size=[1], align=align)
    interp_case("linear_scale2.5_" + a, [1, 2, 3], "linear", scale=[2.5], align=align)
    interp_case("linear_scale2.5_recompute_" + a, [1, 2, 3], "linear", scale=[2.5], align=align,
                recompute=True)
    interp_case("bilinear_up_" + a, [2, 2, 3, 4], "bilinear", size=[5, 7], align=align)
    interp_case("bilinear_down_" + a, [1, 2, 7, 6], "bilinear", size=[3, 4], align=align)
    interp_case("bilinear_mixed_" + a, [1, 3, 4, 5], "bilinear", size=[4, 9], align=align)
    interp_case("bilinear_scale1.5_" + a, [1, 2, 4, 3], "bilinear", scale=[1.5, 1.5],
                align=align)
    interp_case("bilinear_scale2_0.5_" + a, [1, 1, 3, 8], "bilinear", scale=[2.0, 0.5],
                align=align)
    interp_case("bicubic_up_" + a, [2, 2, 3, 4], "bicubic", size=[6, 9], align=align)
    interp_case("bicubic_down_" + a, [1, 2, 8, 7], "bicubic", size=[3, 4], align=align)
    interp_case("bicubic_scale1.7_" + a, [1, 1, 4, 4], "bicubic", scale=[1.7, 1.7], align=align)
    interp_case("trilinear_" + a, [1, 2, 2, 3, 4], "trilinear", size=[3, 5, 3], align=align)
interp_case("area_2d", [1, 2, 7, 6], "area", size=[3, 4])
interp_case("area_1d", [2, 2, 9], "area", size=[4])


# ---------------------------------------------------------------- output
def dump(out):
    out.write('{"generator": "tests/golden/gen_ops.py", "torch_version": %s, "cases": [\n'
              % json.dumps(torch.__version__))
    out.write(",\n".join(json.dumps(c, allow_nan=False, separators=(",", ":")) for c in CASES))
    out.write("\n]}\n")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            dump(fh)
    else:
        dump(sys.stdout)
