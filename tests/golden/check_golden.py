#!/usr/bin/python3
"""Consistency check for tests/golden/ops.json and tests/golden/optim.json.

Usage: /usr/bin/python3 tests/golden/check_golden.py [ops.json] [optim.json]

For every op case it re-runs the op in float64 torch from the JSON alone
(op name + attrs + inputs), the same way a C++ test would map it, and checks
output shapes/dtypes/values and the gradients against the stored ones.  It
also checks the T records (data length == prod(shape), dtype of the values)
and the null pattern of grad_outputs / grads.
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

F64 = torch.float64
DT = {"float32": F64, "int64": torch.int64, "bool": torch.bool}


def check_T(t, where):
    assert set(t) == {"shape", "dtype", "data"}, where
    n = math.prod(t["shape"])
    assert len(t["data"]) == n, (where, n, len(t["data"]))
    ty = {"float32": float, "int64": int, "bool": bool}[t["dtype"]]
    for v in t["data"]:
        assert type(v) is ty or (ty is float and type(v) is int), (where, v)
    if t["dtype"] == "float32":
        for v in t["data"]:
            assert abs(v) < 1e30 and math.isfinite(v), where


def to_t(t):
    return torch.tensor(t["data"], dtype=DT[t["dtype"]]).reshape(t["shape"])


def slice_op(x, dim, start, end, step):
    idx = [slice(None)] * x.dim()
    idx[dim] = slice(start, end, step)
    return x[tuple(idx)]


def batch_norm(x, w, b, rm, rv, a):
    rm, rv = rm.clone(), rv.clone()
    y = F.batch_norm(x, rm, rv, w, b, a["training"], a["momentum"], a["eps"])
    return y, rm, rv


def sdpa_ref(q, k, v, mask, is_causal, scale):
    """PyTorch 2's documented reference of F.scaled_dot_product_attention."""
    L, S = q.size(-2), k.size(-2)
    sc = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=q.dtype)
    if is_causal:
        bias = bias.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(0), float("-inf"))
    if mask is not None:
        bias = bias.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else bias + mask
    return torch.softmax(q @ k.transpose(-2, -1) * sc + bias, dim=-1) @ v


def rotary_tables(positions, dim, base, offset):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=F64) / dim))
    pos = torch.arange(offset, offset + positions, dtype=F64)
    sinusoid = pos[:, None] * inv_freq[None, :]
    return sinusoid.sin(), sinusoid.cos()


def rotary_ref(x, a):
    """GPT-J's rotate_every_two or GPT-NeoX's rotate_half on the first rotary_dim features, as
    HF applies them (the tables in float64), along x's seq_dim."""
    rd = x.shape[-1] if a["rotary_dim"] is None else a["rotary_dim"]
    x_rot, x_pass = x[..., :rd], x[..., rd:]
    sin, cos = rotary_tables(x.shape[a["seq_dim"]], rd, a["base"], a["offset"])
    if a["style"] == "gptj":
        sin, cos = sin.repeat_interleave(2, -1), cos.repeat_interleave(2, -1)
        rot = torch.stack((-x_rot[..., 1::2], x_rot[..., ::2]), -1).flatten(-2)
    else:
        sin, cos = torch.cat((sin, sin), -1), torch.cat((cos, cos), -1)
        rot = torch.cat((-x_rot[..., rd // 2:], x_rot[..., :rd // 2]), -1)
    shape = [1] * x.dim()
    shape[a["seq_dim"]], shape[-1] = sin.shape
    sin, cos = sin.reshape(shape), cos.reshape(shape)
    return torch.cat((x_rot * cos + rot * sin, x_pass), -1)


OPS = {
    "add": lambda a, x, y: torch.add(x, y),
    "sub": lambda a, x, y: torch.sub(x, y),
    "mul": lambda a, x, y: torch.mul(x, y),
    "div": lambda a, x, y: torch.div(x, y),
    "pow": lambda a, x, y: torch.pow(x, y),
    "pow_scalar": lambda a, x: torch.pow(x, a["exponent"]),
    "maximum": lambda a, x, y: torch.maximum(x, y),
    "minimum": lambda a, x, y: torch.minimum(x, y),
    "neg": lambda a, x: torch.neg(x),
    "exp": lambda a, x: torch.exp(x),
    "log": lambda a, x: torch.log(x),
    "sqrt": lambda a, x: torch.sqrt(x),
    "rsqrt": lambda a, x: torch.rsqrt(x),
    "abs": lambda a, x: torch.abs(x),
    "tanh": lambda a, x: torch.tanh(x),
    "sigmoid": lambda a, x: torch.sigmoid(x),
    "relu": lambda a, x: F.relu(x),
    "gelu": lambda a, x: F.gelu(x, approximate=a["approximate"]),
    "sum": lambda a, x: torch.sum(x) if a["dims"] is None else torch.sum(x, a["dims"], a["keepdim"]),
    "mean": lambda a, x: torch.mean(x) if a["dims"] is None else torch.mean(x, a["dims"], a["keepdim"]),
    "amax": lambda a, x: torch.amax(x, a["dims"], a["keepdim"]),
    "amin": lambda a, x: torch.amin(x, a["dims"], a["keepdim"]),
    "max_dim": lambda a, x: tuple(torch.max(x, a["dim"], a["keepdim"])),
    "min_dim": lambda a, x: tuple(torch.min(x, a["dim"], a["keepdim"])),
    "argmax": lambda a, x: torch.argmax(x, a["dim"], a["keepdim"]),
    "argmin": lambda a, x: torch.argmin(x, a["dim"], a["keepdim"]),
    "var": lambda a, x: torch.var(x, dim=a["dims"], correction=a["correction"], keepdim=a["keepdim"]),
    "matmul": lambda a, x, y: torch.matmul(x, y),
    "linear": lambda a, x, w, b=None: F.linear(x, w, b),
    "conv1d": lambda a, x, w, b=None: F.conv1d(x, w, b, a["stride"], a["padding"], a["dilation"], a["groups"]),
    "conv2d": lambda a, x, w, b=None: F.conv2d(x, w, b, a["stride"], a["padding"], a["dilation"], a["groups"]),
    "conv_transpose2d": lambda a, x, w, b=None: F.conv_transpose2d(
        x, w, b, a["stride"], a["padding"], a["output_padding"], a["groups"], a["dilation"]),
    "rotary_embedding": lambda a, x: rotary_ref(x, a),
    "max_pool1d": lambda a, x: F.max_pool1d(x, a["kernel_size"], a["stride"], a["padding"]),
    "max_pool2d": lambda a, x: F.max_pool2d(x, a["kernel_size"], a["stride"], a["padding"]),
    "avg_pool2d": lambda a, x: F.avg_pool2d(x, a["kernel_size"], a["stride"], a["padding"],
                                            ceil_mode=a["ceil_mode"], count_include_pad=a["count_include_pad"]),
    "adaptive_avg_pool2d": lambda a, x: F.adaptive_avg_pool2d(x, a["output_size"]),
    "softmax": lambda a, x: F.softmax(x, a["dim"]),
    "log_softmax": lambda a, x: F.log_softmax(x, a["dim"]),
    "cross_entropy": lambda a, x, t, w=None: F.cross_entropy(
        x, t, weight=w, ignore_index=a.get("ignore_index", -100), reduction=a["reduction"],
        label_smoothing=a["label_smoothing"]),
    "nll_loss": lambda a, x, t, w=None: F.nll_loss(x, t, weight=w, reduction=a["reduction"],
                                                   ignore_index=a.get("ignore_index", -100)),
    "triu": lambda a, x: torch.triu(x, a["diagonal"]),
    "tril": lambda a, x: torch.tril(x, a["diagonal"]),
    "bmm": lambda a, x, y: torch.bmm(x, y),
    "baddbmm": lambda a, i, x, y: torch.baddbmm(i, x, y, beta=a["beta"], alpha=a["alpha"]),
    "einsum": lambda a, *xs: torch.einsum(a["equation"], *xs),
    "scaled_dot_product_attention": lambda a, q, k, v, m=None: sdpa_ref(q, k, v, m, a["is_causal"],
                                                                        a["scale"]),
    "mse_loss": lambda a, x, y: F.mse_loss(x, y, reduction=a["reduction"]),
    "batch_norm": lambda a, x, w, b, rm, rv: batch_norm(x, w, b, rm, rv, a),
    "layer_norm": lambda a, x, w=None, b=None: F.layer_norm(x, a["normalized_shape"], w, b,
                                                             a["eps"]),
    "group_norm": lambda a, x, w, b: F.group_norm(x, a["num_groups"], w, b, a["eps"]),
    "embedding": lambda a, w, i: F.embedding(i, w),
    "embedding_opts": lambda a, w, i: F.embedding(i, w.clone() if a["max_norm"] else w,
                                                  padding_idx=a["padding_idx"],
                                                  max_norm=a["max_norm"],
                                                  norm_type=a["norm_type"],
                                                  scale_grad_by_freq=a["scale_grad_by_freq"]),
    "cat": lambda a, *xs: torch.cat(xs, a["dim"]),
    "stack": lambda a, *xs: torch.stack(xs, a["dim"]),
    "split": lambda a, x: tuple(torch.split(x, a["split_size"], a["dim"])),
    "chunk": lambda a, x: tuple(torch.chunk(x, a["chunks"], a["dim"])),
    "where": lambda a, c, x, y: torch.where(c, x, y),
    "masked_fill": lambda a, x, m: x.masked_fill(m, a["value"]),
    "index_select": lambda a, x, i: torch.index_select(x, a["dim"], i),
    "gather": lambda a, x, i: torch.gather(x, a["dim"], i),
    "clamp": lambda a, x: torch.clamp(x, a["min"], a["max"]),
    "reshape": lambda a, x: x.reshape(a["shape"]),
    "permute": lambda a, x: x.permute(a["dims"]),
    "transpose": lambda a, x: x.transpose(a["dim0"], a["dim1"]),
    "narrow": lambda a, x: x.narrow(a["dim"], a["start"], a["length"]),
    "slice": lambda a, x: slice_op(x, a["dim"], a["start"], a["end"], a["step"]),
    "expand": lambda a, x: x.expand(a["shape"]),
    "squeeze": lambda a, x: x.squeeze(a["dim"]),
    "unsqueeze": lambda a, x: x.unsqueeze(a["dim"]),
    "interpolate": lambda a, x: F.interpolate(x, size=a["size"], scale_factor=a["scale_factor"],
                                              mode=a["mode"], align_corners=a["align_corners"],
                                              recompute_scale_factor=a["recompute_scale_factor"]),
}
NODIFF_IN = {"batch_norm": (3, 4), "cross_entropy": (2,), "nll_loss": (2,)}
NOGRAD_OUT = {"batch_norm": (1, 2)}


def close(a, b, tol=2e-6):
    return torch.allclose(a.to(F64), b.to(F64), rtol=tol, atol=tol)


def check_ops(path):
    d = json.load(open(path))
    assert set(d) == {"generator", "torch_version", "cases"}
    names = set()
    ops = {}
    for c in d["cases"]:
        nm = c["name"]
        assert nm not in names, nm
        names.add(nm)
        assert set(c) == {"name", "op", "inputs", "attrs", "outputs", "grad_outputs", "grads"}, nm
        ops.setdefault(c["op"], []).append(c)
        for k in ("inputs", "outputs"):
            for t in c[k]:
                check_T(t, nm)
        assert len(c["grad_outputs"]) == len(c["outputs"]), nm
        assert len(c["grads"]) == len(c["inputs"]), nm
        for t in c["grad_outputs"] + c["grads"]:
            if t is not None:
                check_T(t, nm)
                assert t["dtype"] == "float32", nm
        for o, g in zip(c["outputs"], c["grad_outputs"]):
            if g is not None:
                assert g["shape"] == o["shape"], nm
            elif o["dtype"] == "float32":
                assert c["op"] in NOGRAD_OUT, nm
        # recompute from the JSON alone
        ins = []
        for i, t in enumerate(c["inputs"]):
            x = to_t(t)
            if t["dtype"] == "float32" and i not in NODIFF_IN.get(c["op"], ()):
                x.requires_grad_(True)
            ins.append(x)
        outs = OPS[c["op"]](c["attrs"], *ins)
        if isinstance(outs, torch.Tensor):
            outs = [outs]
        assert len(outs) == len(c["outputs"]), nm
        loss = None
        for o, ref, g in zip(outs, c["outputs"], c["grad_outputs"]):
            assert list(o.shape) == ref["shape"], (nm, list(o.shape), ref["shape"])
            want_dt = {torch.float64: "float32", torch.int64: "int64", torch.bool: "bool"}[o.dtype]
            assert want_dt == ref["dtype"], nm
            if o.dtype == F64:
                assert close(o.detach(), to_t(ref)), nm
            else:
                assert torch.equal(o, to_t(ref)), nm
            if g is not None:
                term = (o * to_t(g)).sum()
                loss = term if loss is None else loss + term
        for x, t, g in zip(ins, c["inputs"], c["grads"]):
            if g is None:
                assert t["dtype"] != "float32" or not x.requires_grad or loss is None, nm
                continue
            assert g["shape"] == t["shape"], nm
        diff = [x for x, g in zip(ins, c["grads"]) if g is not None]
        if diff:
            gs = torch.autograd.grad(loss, diff, allow_unused=True)
            refs = [g for g in c["grads"] if g is not None]
            for gx, ref in zip(gs, refs):
                gx = torch.zeros(ref["shape"], dtype=F64) if gx is None else gx
                assert close(gx, to_t(ref), 1e-5), (nm, (gx - to_t(ref)).abs().max())
    return d, ops


def check_optim(path):
    d = json.load(open(path))
    for c in d["cases"]:
        for k in ("x", "y", "w0", "b0"):
            check_T(c[k], c["name"])
        assert c["x"]["shape"] == [5, 3] and c["y"]["shape"] == [5, 4]
        assert c["w0"]["shape"] == [3, 4] and c["b0"]["shape"] == [4]
        assert len(c["steps"]) == 5, c["name"]
        for s in c["steps"]:
            check_T(s["w"], c["name"])
            check_T(s["b"], c["name"])
            assert s["w"]["shape"] == [3, 4] and s["b"]["shape"] == [4]
    for s in d["schedulers"]:
        assert all(isinstance(v, float) for v in s["lrs"]), s["name"]
        if "losses" in s:
            assert len(s["losses"]) == len(s["lrs"]), s["name"]
    return d


if __name__ == "__main__":
    ops_path = sys.argv[1] if len(sys.argv) > 1 else "tests/golden/ops.json"
    optim_path = sys.argv[2] if len(sys.argv) > 2 else "tests/golden/optim.json"
    d, ops = check_ops(ops_path)
    print("ops.json: %d cases, %d ops, torch %s" % (len(d["cases"]), len(ops), d["torch_version"]))
    for op, cs in ops.items():
        keys = sorted({k for c in cs for k in c["attrs"]})
        print("  %-20s %3d  attrs=%s" % (op, len(cs), keys))
    o = check_optim(optim_path)
    print("optim.json: %d optimizer cases, %d schedulers" % (len(o["cases"]), len(o["schedulers"])))
    print("OK")
