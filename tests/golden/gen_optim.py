#!/usr/bin/python3
"""Generate golden reference data for ipuml's optimizers and LR schedulers.

Usage (Debian's PyTorch 1.13, not the pyenv python):
    /usr/bin/python3 tests/golden/gen_optim.py > tests/golden/optim.json
    /usr/bin/python3 tests/golden/gen_optim.py tests/golden/optim.json

Problem: parameters w [3,4], b [4]; fixed data x [5,3], y [5,4] (seeded randn,
float32-representable).  Every step: zero grads, loss = ((x @ w + b - y)**2).mean(),
backward, optimizer.step().  steps[k] holds w and b after k+1 steps.
Computed in float64, stored rounded to float32 (9 significant digits).
"""
import json
import math
import sys

import torch

F64 = torch.float64
NSTEPS = 5


def fmt_float(v):
    v = float(v)
    assert math.isfinite(v)
    return float("%.9g" % v)


def T(t):
    t = t.detach()
    return {"shape": list(t.shape), "dtype": "float32",
            "data": [fmt_float(v) for v in t.to(torch.float32).reshape(-1).tolist()]}


torch.manual_seed(1234)
X = torch.randn(5, 3).to(F64)
Y = torch.randn(5, 4).to(F64)
W0 = torch.randn(3, 4).to(F64)
B0 = torch.randn(4).to(F64)


def loss_fn(w, b):
    return ((X @ w + b - Y) ** 2).mean()


class Lamb(torch.optim.Optimizer):
    """LAMB (You et al. 2019), per-parameter-tensor trust ratio, see LAMB_NOTE."""

    def __init__(self, params, lr=0.01, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["m"] = torch.zeros_like(p)
                    st["v"] = torch.zeros_like(p)
                st["step"] += 1
                t = st["step"]
                m, v = st["m"], st["v"]
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                m_hat = m / (1 - b1 ** t)
                v_hat = v / (1 - b2 ** t)
                r = m_hat / (v_hat.sqrt() + group["eps"]) + group["weight_decay"] * p
                wn = p.norm().item()
                rn = r.norm().item()
                trust = wn / rn if (wn > 0 and rn > 0) else 1.0
                p.add_(r, alpha=-group["lr"] * trust)


LAMB_NOTE = ("LAMB, implemented in gen_optim.py (PyTorch has none). Per parameter tensor p "
             "(w and b separately, weight decay applied to both), step t = 1, 2, ...: "
             "m = beta1*m + (1-beta1)*g; v = beta2*v + (1-beta2)*g*g; "
             "m_hat = m/(1-beta1^t); v_hat = v/(1-beta2^t); "
             "r = m_hat/(sqrt(v_hat)+eps) + weight_decay*p; "
             "trust_ratio = ||p||_2/||r||_2 if both norms > 0 else 1 (norms over the whole tensor); "
             "p = p - lr*trust_ratio*r. m, v start at 0.")

OPTIMIZERS = [
    ("sgd_lr0.1", "SGD",
     dict(lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False),
     "torch.optim.SGD"),
    ("sgd_momentum0.9_wd0.01", "SGD",
     dict(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.01, nesterov=False),
     "torch.optim.SGD: g += wd*p; buf = g on the first step, else momentum*buf + (1-dampening)*g; p -= lr*buf"),
    ("sgd_nesterov0.9", "SGD",
     dict(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=True),
     "torch.optim.SGD: buf as above; p -= lr*(g + momentum*buf)"),
    ("adam_lr0.01", "Adam",
     dict(lr=0.01, betas=[0.9, 0.999], eps=1e-8, weight_decay=0.0, amsgrad=False),
     "torch.optim.Adam: p -= lr*m_hat/(sqrt(v_hat)+eps)"),
    ("adam_lr0.01_wd0.1", "Adam",
     dict(lr=0.01, betas=[0.9, 0.999], eps=1e-8, weight_decay=0.1, amsgrad=False),
     "torch.optim.Adam with L2 weight decay: g += wd*p before the moment updates"),
    ("adamw_lr0.01_wd0.1", "AdamW",
     dict(lr=0.01, betas=[0.9, 0.999], eps=1e-8, weight_decay=0.1, amsgrad=False),
     "torch.optim.AdamW, decoupled weight decay: p *= (1 - lr*wd), then the Adam update"),
    ("lamb_lr0.01_wd0.01", "LAMB",
     dict(lr=0.01, betas=[0.9, 0.999], eps=1e-6, weight_decay=0.01),
     LAMB_NOTE),
]


def make_opt(kind, params, o):
    if kind == "SGD":
        return torch.optim.SGD(params, **o)
    o = dict(o, betas=tuple(o["betas"]))
    if kind == "Adam":
        return torch.optim.Adam(params, **o)
    if kind == "AdamW":
        return torch.optim.AdamW(params, **o)
    if kind == "LAMB":
        return Lamb(params, **o)
    raise ValueError(kind)


def run_optimizer(name, kind, options, note):
    w = W0.clone().requires_grad_(True)
    b = B0.clone().requires_grad_(True)
    opt = make_opt(kind, [w, b], options)
    steps = []
    for _ in range(NSTEPS):
        opt.zero_grad()
        loss_fn(w, b).backward()
        opt.step()
        steps.append({"w": T(w), "b": T(b)})
    return {"name": name, "optimizer": kind, "options": options, "note": note,
            "x": T(X), "y": T(Y), "w0": T(W0), "b0": T(B0), "steps": steps}


def dummy_opt(lr):
    return torch.optim.SGD([torch.zeros(1, dtype=F64, requires_grad=True)], lr=lr)


def schedulers():
    out = []
    base = 0.1
    # StepLR
    opt = dummy_opt(base)
    sch = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    lrs = []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sch.step()
    out.append({"name": "step_lr", "options": {"lr": base, "step_size": 2, "gamma": 0.5},
                "note": "torch.optim.lr_scheduler.StepLR; lrs[i] = lr used at step i (after i calls "
                        "to scheduler.step()) = lr * gamma^floor(i/step_size)",
                "lrs": [fmt_float(v) for v in lrs]})
    # cosine with linear warm-up
    warmup, total = 2, 10

    def factor(step):
        if step < warmup:
            return step / warmup
        progress = (step - warmup) / (total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    opt = dummy_opt(base)
    sch = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    lrs = []
    for _ in range(total):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sch.step()
    out.append({"name": "cosine_warmup", "options": {"lr": base, "warmup_steps": warmup, "total_steps": total},
                "note": "lrs[i] = lr used at step i (i = 0..total-1) = lr * (i/warmup_steps if i < warmup_steps "
                        "else 0.5*(1 + cos(pi*(i - warmup_steps)/(total_steps - warmup_steps)))); "
                        "computed with torch LambdaLR (HuggingFace get_cosine_schedule_with_warmup form)",
                "lrs": [fmt_float(v) for v in lrs]})
    # ReduceLROnPlateau
    losses = [1.0, 0.9, 0.95, 0.97, 0.96, 0.98, 0.99, 1.0, 0.5, 0.6, 0.7, 0.8]
    opt = dummy_opt(base)
    sch = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1, cooldown=2,
                                                     threshold=1e-4, threshold_mode="rel", min_lr=0.0, eps=1e-8)
    lrs = []
    for l in losses:
        sch.step(l)
        lrs.append(opt.param_groups[0]["lr"])
    out.append({"name": "reduce_on_plateau",
                "options": {"lr": base, "mode": "min", "factor": 0.5, "patience": 1, "cooldown": 2,
                            "threshold": 1e-4, "threshold_mode": "rel", "min_lr": 0.0, "eps": 1e-8},
                "note": "torch.optim.lr_scheduler.ReduceLROnPlateau; lrs[i] = lr after calling step(losses[i]). "
                        "Improvement: loss < best*(1-threshold). num_bad_epochs > patience -> lr *= factor, "
                        "cooldown_counter = cooldown, num_bad_epochs = 0; while cooldown_counter > 0 each step "
                        "decrements it and resets num_bad_epochs to 0 (best is still updated).",
                "losses": losses, "lrs": [fmt_float(v) for v in lrs]})
    return out


def dump(fh):
    cases = [run_optimizer(*o) for o in OPTIMIZERS]
    doc = {"generator": "tests/golden/gen_optim.py", "torch_version": torch.__version__,
           "loss": "((x @ w + b - y)**2).mean()", "cases": cases, "schedulers": schedulers()}
    fh.write('{"generator": %s, "torch_version": %s, "loss": %s, "cases": [\n'
             % (json.dumps(doc["generator"]), json.dumps(doc["torch_version"]), json.dumps(doc["loss"])))
    fh.write(",\n".join(json.dumps(c, allow_nan=False, separators=(",", ":")) for c in cases))
    fh.write('\n], "schedulers": [\n')
    fh.write(",\n".join(json.dumps(s, allow_nan=False, separators=(",", ":")) for s in doc["schedulers"]))
    fh.write("\n]}\n")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            dump(fh)
    else:
        dump(sys.stdout)
