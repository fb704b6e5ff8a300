#!/usr/bin/python3
"""Peer benchmark: PyTorch (Debian python3-torch) training steps of GPT-2 small and BERT-base on
the CPU, the models written out here as ipuml's zoo has them (models/gpt2.hpp, models/bert.hpp):

- GPT-2 small: 12 pre-LN blocks, n_embd 768, 12 heads, 1024 positions, vocab 50257, tanh GELU,
  causal attention written out (scores, mask, softmax, product), LM head tied to the token
  embedding; next-token cross entropy; AdamW. 124,439,808 parameters.
- BERT-base pre-training: 12 post-LN layers, hidden 768, 12 heads, FFN 3072, exact GELU, vocab
  30522, 512 positions, 2 token types, LayerNorm eps 1e-12, additive attention mask; the MLM head
  (transform + decoder tied to the word embeddings + its own bias) at the masked positions only,
  as ipuml's example and Graphcore's BERT feed it, and the NSP head on the pooled [CLS]; loss =
  MLM cross entropy (ignore_index -100) + NSP cross entropy; AdamW or LAMB (written here: PyTorch
  has none). 110,106,428 parameters.

Both with dropout 0 by default (the ipuml examples' default; --dropout sets it), lr 1e-4, weight
decay 0.01, random token ids. Each thread count runs --warmup untimed steps, then --steps steps
timed one by one; the median is printed:
  torch gpt2|bert train batch=B seq=S threads=T optimizer=O params=P step_ms=X samples_per_s=Y
  tokens_per_s=Z
OpenBLAS does PyTorch's matrix products here (Debian builds it with BLAS=generic): its thread
count is set with PyTorch's, and OPENBLAS_CORETYPE is set to the CPU's real core type (as
bench-vs-peers.sh does for the sgemm peer) unless the caller set it, since OpenBLAS 0.3.21 takes
recent AVX-512 CPUs for Haswell and runs its AVX2 kernels.
Usage: /usr/bin/python3 benchmarks/peers/torch_transformer.py [--model gpt2|bert] [--batch 1 4]
       [--seq 128] [--threads 1 2] [--steps 5] [--warmup 2] [--optimizer adamw|lamb]
       [--dropout 0] [--profile]"""
import argparse
import math
import os
import statistics
import time


def _cpu_has(flag):
    try:
        with open("/proc/cpuinfo") as f:
            return any(flag in line.split() for line in f if line.startswith("flags"))
    except OSError:
        return False


# Must be set before OpenBLAS loads (with torch).
if "OPENBLAS_CORETYPE" not in os.environ:
    if _cpu_has("avx512f"):
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif _cpu_has("avx2"):
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from peer_threads import openblas, set_threads  # noqa: E402

GPT2_PARAMS = 124439808
BERT_PARAMS = 110106428


# ---- GPT-2 ----------------------------------------------------------------------------------

class GPT2Block(nn.Module):
    def __init__(self, e, heads, p):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(e, eps=1e-5)
        self.c_attn = nn.Linear(e, 3 * e)
        self.c_proj = nn.Linear(e, e)
        self.ln_2 = nn.LayerNorm(e, eps=1e-5)
        self.c_fc = nn.Linear(e, 4 * e)
        self.mlp_proj = nn.Linear(4 * e, e)
        self.drop = nn.Dropout(p)

    def attn(self, x, mask):
        b, s, e = x.shape
        d = e // self.heads
        q, k, v = self.c_attn(x).split(e, dim=2)
        q, k, v = (t.view(b, s, self.heads, d).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(2, 3)) / math.sqrt(d)
        scores = scores.masked_fill(mask[:s, :s], torch.finfo(scores.dtype).min)
        probs = self.drop(F.softmax(scores, dim=-1))
        ctx = (probs @ v).transpose(1, 2).reshape(b, s, e)
        return self.drop(self.c_proj(ctx))

    def forward(self, x, mask):
        x = x + self.attn(self.ln_1(x), mask)
        h = self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x + self.drop(h)


class GPT2LMHead(nn.Module):
    def __init__(self, vocab=50257, positions=1024, e=768, layers=12, heads=12, p=0.0):
        super().__init__()
        self.wte = nn.Embedding(vocab, e)
        self.wpe = nn.Embedding(positions, e)
        self.drop = nn.Dropout(p)
        self.h = nn.ModuleList(GPT2Block(e, heads, p) for _ in range(layers))
        self.ln_f = nn.LayerNorm(e, eps=1e-5)
        # True above the diagonal: key j after query i is masked.
        self.register_buffer("causal", torch.ones(positions, positions).triu(1).bool(),
                             persistent=False)
        for name, q in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(q)
            elif "ln" not in name:
                std = 0.02 / math.sqrt(2 * layers) if "proj" in name else 0.02
                nn.init.normal_(q, 0.0, std)

    def forward(self, ids):
        s = ids.shape[1]
        x = self.drop(self.wte(ids) + self.wpe(torch.arange(s)))
        for blk in self.h:
            x = blk(x, self.causal)
        return F.linear(self.ln_f(x), self.wte.weight)  # the tied LM head


# ---- BERT -----------------------------------------------------------------------------------

class BertLayer(nn.Module):
    def __init__(self, e, heads, ffn, p):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = nn.Linear(e, e), nn.Linear(e, e), nn.Linear(e, e)
        self.attn_out = nn.Linear(e, e)
        self.attn_ln = nn.LayerNorm(e, eps=1e-12)
        self.inter = nn.Linear(e, ffn)
        self.out = nn.Linear(ffn, e)
        self.out_ln = nn.LayerNorm(e, eps=1e-12)
        self.drop = nn.Dropout(p)

    def forward(self, x, mask_bias):
        b, s, e = x.shape
        d = e // self.heads

        def split(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = (q @ k.transpose(2, 3)) / math.sqrt(d) + mask_bias
        ctx = (self.drop(F.softmax(scores, dim=-1)) @ v).transpose(1, 2).reshape(b, s, e)
        a = self.attn_ln(self.drop(self.attn_out(ctx)) + x)
        return self.out_ln(self.drop(self.out(F.gelu(self.inter(a)))) + a)


class BertForPreTraining(nn.Module):
    def __init__(self, vocab=30522, positions=512, types=2, e=768, layers=12, heads=12, ffn=3072,
                 p=0.0):
        super().__init__()
        self.word = nn.Embedding(vocab, e, padding_idx=0)
        self.position = nn.Embedding(positions, e)
        self.token_type = nn.Embedding(types, e)
        self.emb_ln = nn.LayerNorm(e, eps=1e-12)
        self.drop = nn.Dropout(p)
        self.layers = nn.ModuleList(BertLayer(e, heads, ffn, p) for _ in range(layers))
        self.pooler = nn.Linear(e, e)
        self.transform = nn.Linear(e, e)
        self.transform_ln = nn.LayerNorm(e, eps=1e-12)
        self.decoder_bias = nn.Parameter(torch.zeros(vocab))
        self.nsp = nn.Linear(e, 2)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0.0, 0.02)
                    nn.init.zeros_(m.bias)
                elif isinstance(m, nn.Embedding):
                    m.weight.mul_(0.02)

    def forward(self, ids, types, mask, positions):
        b, s = ids.shape
        x = self.word(ids) + self.token_type(types) + self.position(torch.arange(s))
        x = self.drop(self.emb_ln(x))
        mask_bias = ((1.0 - mask.float()) * -10000.0).view(b, 1, 1, s)
        for layer in self.layers:
            x = layer(x, mask_bias)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        picked = torch.gather(x, 1, positions.unsqueeze(2).expand(b, positions.shape[1], x.shape[2]))
        h = self.transform_ln(F.gelu(self.transform(picked)))
        return F.linear(h, self.word.weight, self.decoder_bias), self.nsp(pooled)


def bert_batch(b, s, vocab, gen):
    masked = (s * 15 + 99) // 100  # ceil(15 % of S), the example's default
    ids = torch.randint(1, vocab, (b, s), generator=gen)
    types = (torch.arange(s) >= s // 2).long().expand(b, s).contiguous()
    mask = torch.ones(b, s, dtype=torch.long)
    positions = torch.stack([torch.randperm(s - 1, generator=gen)[:masked].sort().values + 1
                             for _ in range(b)])
    labels = torch.randint(1, vocab, (b, masked), generator=gen)
    labels[:, -1] = -100  # the last slot unused, as a row with fewer maskable tokens has
    nsp = torch.randint(0, 2, (b,), generator=gen)
    return (ids, types, mask, positions), (labels, nsp)


class Lamb(torch.optim.Optimizer):
    """LAMB as ipuml's optim::LAMB: Adam moments with bias correction, decoupled weight decay in
    the update, the step scaled by ||w|| / ||update|| (1 where either is 0)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            b1, b2 = g["betas"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                st["step"] += 1
                t = st["step"]
                m, v = st["exp_avg"], st["exp_avg_sq"]
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                r = (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt_().add_(g["eps"]))
                if g["weight_decay"]:
                    r.add_(p, alpha=g["weight_decay"])
                wn, rn = p.norm(), r.norm()
                ratio = torch.where((wn > 0) & (rn > 0), wn / rn, torch.ones_like(wn))
                p.add_(r * ratio, alpha=-g["lr"])


def make_optimizer(name, params):
    if name == "lamb":
        return Lamb(params, lr=1e-4, weight_decay=0.01)
    return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)


def print_profile(step, phase, steps):
    print("  phases (ms per step, mean): forward+loss %.1f, backward %.1f, optimizer %.1f"
          % tuple(1e3 * p / steps for p in phase))
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    rows = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    rows.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in rows)
    print("  op profile of one step (ms, % of the ops' self time):")
    for e in rows:
        if e.self_cpu_time_total / total >= 0.005:
            print(f"  {e.key:<40} {e.self_cpu_time_total / 1e3:9.2f} ms "
                  f"{100 * e.self_cpu_time_total / total:5.1f}% {e.count:6d} calls")
    print(f"  {'total':<40} {total / 1e3:9.2f} ms", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["gpt2", "bert"], default="gpt2")
    ap.add_argument("--batch", type=int, nargs="+", default=[4])
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--optimizer", choices=["adamw", "lamb"], default="adamw")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--profile", action="store_true",
                    help="after each line: the phases of the timed steps, then one more step's "
                         "time per ATen op (torch.profiler)")
    a = ap.parse_args()
    blas = openblas()
    core = blas.openblas_get_corename().decode() if blas else "unknown"
    print(f"# torch {torch.__version__}, OpenBLAS core {core}", flush=True)
    for b in a.batch:
        for t in a.threads:
            set_threads(t)
            torch.manual_seed(0)
            gen = torch.Generator().manual_seed(0)
            if a.model == "gpt2":
                net = GPT2LMHead(p=a.dropout)
                want = GPT2_PARAMS
                tokens = torch.randint(0, 50257, (b, a.seq + 1), generator=gen)
                inputs, targets = (tokens[:, :-1].contiguous(),), (tokens[:, 1:].contiguous(),)

                def loss_of(out, y):
                    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            else:
                net = BertForPreTraining(p=a.dropout)
                want = BERT_PARAMS
                inputs, targets = bert_batch(b, a.seq, 30522, gen)

                def loss_of(out, labels, nsp_labels):
                    mlm, nsp = out
                    return (F.cross_entropy(mlm.reshape(-1, mlm.shape[-1]), labels.reshape(-1),
                                            ignore_index=-100)
                            + F.cross_entropy(nsp, nsp_labels))
            params = sum(q.numel() for q in net.parameters())
            assert params == want, f"{a.model}: {params} parameters, expected {want}"
            net.train()
            opt = make_optimizer(a.optimizer, net.parameters())

            phase = [0.0, 0.0, 0.0]  # forward + loss, backward, optimizer

            def step():
                t0 = time.perf_counter()
                opt.zero_grad()
                loss = loss_of(net(*inputs), *targets)
                t1 = time.perf_counter()
                loss.backward()
                t2 = time.perf_counter()
                opt.step()
                t3 = time.perf_counter()
                for i, d in enumerate((t1 - t0, t2 - t1, t3 - t2)):
                    phase[i] += d

            for _ in range(a.warmup):
                step()
            phase[:] = [0.0, 0.0, 0.0]
            times = []
            for _ in range(a.steps):
                t0 = time.perf_counter()
                step()
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            print(f"torch {a.model} train batch={b} seq={a.seq} threads={t} "
                  f"optimizer={a.optimizer} params={params} step_ms={1e3 * med:.1f} "
                  f"samples_per_s={b / med:.3f} tokens_per_s={b * a.seq / med:.1f}", flush=True)
            if a.profile:
                print_profile(step, phase, a.steps)
            del net, opt


if __name__ == "__main__":
    main()
