"""What the newer golden generators (gen_fc_mnist.py, gen_unet.py, gen_gptj.py,
gen_sambanova_starters.py) share: float32 rounding inside float64 computation, the JSON tensor
form, and the deterministic weights both they and the C++ tests compute (tests/support/golden.hpp,
formula_weights)."""

import json
import sys

import torch

F64 = torch.float64


def f32(t):
    """Rounds to float32 and computes on in float64."""
    return t.to(torch.float32).to(F64)


def num(v):
    return float("%.9g" % v)


def T(t):
    """{"shape", "dtype": "float32" | "int64", "data": [flat row-major]}."""
    t = t.detach()
    if t.dtype == torch.int64:
        return {"shape": list(t.shape), "dtype": "int64", "data": t.reshape(-1).tolist()}
    return {"shape": list(t.shape), "dtype": "float32",
            "data": [num(v) for v in t.reshape(-1).tolist()]}


def formula(k, shape):
    """Parameter k, element i = sin(0.37 i + 1.3 k) / sqrt(fan_in), rounded to float32."""
    n = 1
    for s in shape:
        n *= s
    fan_in = n // shape[0] if len(shape) > 1 else shape[0]
    i = torch.arange(n, dtype=F64)
    return f32(torch.sin(0.37 * i + 1.3 * k) / fan_in ** 0.5).reshape(shape)


def dump(doc, out):
    """Writes a golden document as the C++ tests read it: compact JSON, one line."""
    json.dump(doc, out, allow_nan=False, separators=(",", ":"))
    out.write("\n")


def cli(main):
    """Runs main(out) on the file named by the first argument, else on standard output."""
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            main(f)
    else:
        main(sys.stdout)
