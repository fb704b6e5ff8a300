#!/usr/bin/python3
"""Generate golden data for GPT-J (models/gptj.hpp) with PyTorch.

Usage (Debian's PyTorch 1.13, not the pyenv python):
    /usr/bin/python3 tests/golden/gen_gptj.py > tests/golden/gptj.json
    /usr/bin/python3 tests/golden/gen_gptj.py tests/golden/gptj.json

transformers is not used: the network is written here after Hugging Face's modeling_gptj.py
(GPTJForCausalLM): rotate_every_two on the first rotary_dim features of each head with sin/cos
of base 10000 over rotary_dim, q/k/v/out_proj without bias, the causal mask filled with the
dtype's lowest value, scores divided by sqrt(head_dim), fc_in -> gelu_new -> fc_out, the
parallel residual x + attn(ln_1(x)) + mlp(ln_1(x)), ln_f, lm_head with bias, and the loss of
logits[:, :-1] against labels[:, 1:]. Module names are HF's, so the keys are its checkpoints'.
Weights and inputs come from formulas the C++ test computes too (nothing large is stored):
  parameter k (state_dict order), element i, s = sin(0.37 i + 1.3 k):
    LayerNorm weights     float32(1 + 0.1 s)
    other 1-d (biases)    float32(0.1 s)
    matrices, embedding   float32(s / sqrt(fan_in)), fan_in = numel / shape[0]
  input_ids [2, 8]: (7 i + 3) mod vocab_size, labels = input_ids

Format (T = {"shape", "dtype", "data": [flat row-major]}):
  {"config": {...}, "keys": [...], "shapes": {key: [..]},
   "input_ids": T, "logits": T, "loss": float, "grads": {key: T} (d loss / d parameter),
   "num_parameters_6b": int}   GPT-J-6B's parameter count, from this module built on the meta
                               device at HF's GPT-J-6B config

Computations run in float64 from float32-representable values; floats are stored with 9
significant digits. The output is deterministic.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from goldenlib import F64, T, f32, num, cli, dump  # noqa: E402 (beside this script)

TINY = {"vocab_size": 64, "n_positions": 32, "n_embd": 32, "n_layer": 2, "n_head": 4,
        "rotary_dim": 4, "n_inner": None, "layer_norm_epsilon": 1e-5}
GPTJ_6B = {"vocab_size": 50400, "n_positions": 2048, "n_embd": 4096, "n_layer": 28, "n_head": 16,
           "rotary_dim": 64, "n_inner": None, "layer_norm_epsilon": 1e-5}
GRAD_KEYS = ["transformer.wte.weight", "transformer.h.0.ln_1.weight",
             "transformer.h.0.attn.q_proj.weight", "transformer.h.0.attn.k_proj.weight",
             "transformer.h.1.attn.out_proj.weight", "transformer.h.1.mlp.fc_in.bias",
             "transformer.h.1.mlp.fc_out.weight", "transformer.ln_f.bias", "lm_head.bias"]


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def create_sinusoidal_positions(num_pos, dim):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=F64) / dim))
    sinusoid = torch.einsum("i,j->ij", torch.arange(num_pos, dtype=F64), inv_freq)
    return torch.sin(sinusoid), torch.cos(sinusoid)


def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rotary_pos_emb(x, sin, cos):
    # x [B, S, H, r]; sin, cos [S, r / 2] -> [1, S, 1, r], each angle for its pair
    sin = torch.repeat_interleave(sin[None, :, None, :], 2, 3)
    cos = torch.repeat_interleave(cos[None, :, None, :], 2, 3)
    return x * cos + rotate_every_two(x) * sin


class GPTJAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn_dropout = nn.Dropout(0.0)
        self.resid_dropout = nn.Dropout(0.0)
        self.embed_dim = c["n_embd"]
        self.num_heads = c["n_head"]
        self.head_dim = self.embed_dim // self.num_heads
        self.rotary_dim = c["rotary_dim"]
        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.v_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.q_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        split = lambda t: t.view(b, s, self.num_heads, self.head_dim)  # noqa: E731
        query, key, value = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        sin, cos = create_sinusoidal_positions(s, self.rotary_dim)
        r = self.rotary_dim
        key = torch.cat([apply_rotary_pos_emb(key[..., :r], sin, cos), key[..., r:]], dim=-1)
        query = torch.cat([apply_rotary_pos_emb(query[..., :r], sin, cos), query[..., r:]],
                          dim=-1)
        query, key, value = (t.permute(0, 2, 1, 3) for t in (query, key, value))
        w = torch.matmul(query, key.transpose(-1, -2))
        causal = torch.tril(torch.ones(s, s, dtype=torch.bool))
        w = torch.where(causal, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        w = w / math.sqrt(self.head_dim)
        w = self.attn_dropout(F.softmax(w, dim=-1))
        out = torch.matmul(w, value).permute(0, 2, 1, 3).reshape(b, s, self.embed_dim)
        return self.resid_dropout(self.out_proj(out))


class GPTJMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        inner = c["n_inner"] or 4 * c["n_embd"]
        self.fc_in = nn.Linear(c["n_embd"], inner)
        self.fc_out = nn.Linear(inner, c["n_embd"])
        self.dropout = nn.Dropout(0.0)

    def forward(self, x):
        return self.dropout(self.fc_out(gelu_new(self.fc_in(x))))


class GPTJBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["n_embd"], eps=c["layer_norm_epsilon"])
        self.attn = GPTJAttention(c)
        self.mlp = GPTJMLP(c)

    def forward(self, x):
        h = self.ln_1(x)
        return self.attn(h) + self.mlp(h) + x


class GPTJModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab_size"], c["n_embd"])
        self.drop = nn.Dropout(0.0)
        self.h = nn.ModuleList([GPTJBlock(c) for _ in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(c["n_embd"], eps=c["layer_norm_epsilon"])

    def forward(self, ids):
        x = self.drop(self.wte(ids))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPTJForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = GPTJModel(c)
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"])

    def forward(self, ids, labels):
        logits = self.lm_head(self.transformer(ids))
        loss = F.cross_entropy(logits[:, :-1, :].reshape(-1, logits.size(-1)),
                               labels[:, 1:].reshape(-1))
        return logits, loss


def formula(k, name, shape):
    n = 1
    for s in shape:
        n *= s
    s = torch.sin(0.37 * torch.arange(n, dtype=F64) + 1.3 * k)
    if len(shape) == 1:
        is_ln_weight = ".ln_" in name and name.endswith(".weight")
        return f32(1.0 + 0.1 * s if is_ln_weight else 0.1 * s).reshape(shape)
    return f32(s / (n // shape[0]) ** 0.5).reshape(shape)


def main(out):
    net = GPTJForCausalLM(TINY).to(F64)
    state = net.state_dict()
    with torch.no_grad():
        for k, (name, p) in enumerate(net.named_parameters()):
            p.copy_(formula(k, name, list(p.shape)))
    b, s = 2, 8
    ids = ((7 * torch.arange(b * s) + 3) % TINY["vocab_size"]).reshape(b, s)
    logits, loss = net(ids, ids)
    loss.backward()
    params = dict(net.named_parameters())
    doc = {"config": TINY, "keys": list(state.keys()),
           "shapes": {k: list(v.shape) for k, v in state.items()},
           "input_ids": T(ids), "logits": T(logits), "loss": num(loss.item()),
           "grads": {k: T(params[k].grad) for k in GRAD_KEYS},
           "num_parameters_6b": count_6b()}
    dump(doc, out)


def count_6b():
    # Every parameter created on the meta device: shapes only, nothing allocated.
    orig = torch.empty

    def meta_empty(*args, **kwargs):
        kwargs["device"] = "meta"
        return orig(*args, **kwargs)
    torch.empty = meta_empty
    try:
        big = GPTJForCausalLM(GPTJ_6B)
    finally:
        torch.empty = orig
    return sum(p.numel() for p in big.parameters())


if __name__ == "__main__":
    cli(main)
