#!/usr/bin/python3
"""Generate golden data for Tensor::index / index_put_ (LibTorch's x.index({...})) with PyTorch.

Usage (Debian's PyTorch 1.13, not the pyenv python):
    /usr/bin/python3 tests/golden/gen_indexing.py > tests/golden/indexing.json

Format:
  {"generator": ..., "torch_version": ..., "cases": [CASE, ...]}
  CASE = {"name", "input": T, "index": [I...], "output": T, "grad_output": T, "grad": T,
          "value": T, "put": T, "put_grad_output": T, "put_grad": T, "put_grad_value": T}
  I = {"int": n} | {"slice": [start|null, stop|null, step|null]} | {"none": true}
      | {"ellipsis": true} | {"bool": b} | {"tensor": T}
  T = {"shape": [...], "dtype": "float32"|"int64"|"bool", "data": [flat row-major]}

output = input[index]; grad = d(sum(output * grad_output))/d input; put = input after
input[index] = value (value broadcast to output's shape), null where an index tensor repeats a
position (which write wins is unspecified). put_grad and put_grad_value are the gradients of
sum(y * put_grad_output) for y = input.clone(); y[index] = value, with respect to input and to
value (recorded by autograd, as LibTorch's index_put_ is). Values are float32-representable;
each case seeds the RNG from a CRC32 of its name.
"""
import json
import sys
import zlib

import torch

CASES = []


def T(t):
    t = t.detach()
    if t.dtype == torch.bool:
        dtype, data = "bool", [bool(v) for v in t.reshape(-1).tolist()]
    elif t.dtype in (torch.int64, torch.int32):
        dtype, data = "int64", [int(v) for v in t.reshape(-1).tolist()]
    else:
        dtype, data = "float32", [float("%.9g" % v) for v in t.reshape(-1).tolist()]
    return {"shape": list(t.shape), "dtype": dtype, "data": data}


def spec(i):
    if i is None:
        return {"none": True}
    if i is Ellipsis:
        return {"ellipsis": True}
    if isinstance(i, bool):
        return {"bool": i}
    if isinstance(i, int):
        return {"int": i}
    if isinstance(i, slice):
        return {"slice": [i.start, i.stop, i.step]}
    return {"tensor": T(i)}


def case(name, shape, index, value_shape=None, put=True):
    torch.manual_seed(zlib.crc32(name.encode()))
    x = torch.randn(shape, dtype=torch.float32).requires_grad_()
    index = tuple(index(x.detach()) if callable(index) else index)
    out = x[index]
    g = torch.randn(out.shape, dtype=torch.float32)
    (out * g).sum().backward()
    value = torch.randn(value_shape if value_shape is not None else out.shape, dtype=torch.float32)
    result = x.detach().clone()
    result[index] = value
    # The write recorded by autograd (drawn after the rest, so the older fields keep their values).
    gp = torch.randn(shape, dtype=torch.float32)
    x2 = x.detach().clone().requires_grad_()
    v2 = value.clone().requires_grad_()
    y = x2.clone()
    y[index] = v2
    (y * gp).sum().backward()
    CASES.append({"name": name, "input": T(x), "index": [spec(i) for i in index],
                  "output": T(out), "grad_output": T(g), "grad": T(x.grad), "value": T(value),
                  "put": T(result) if put else None, "put_grad_output": T(gp),
                  "put_grad": T(x2.grad), "put_grad_value": T(v2.grad)})


case("int", [2, 3, 4], [1])
case("int int", [2, 3, 4], [-1, 2])
case("slice", [2, 3, 4], [slice(None), slice(1, None, 2)])
case("negative slice bounds", [5, 4], [slice(-4, -1), slice(None, -2)])
case("clamped slice", [3, 4], [slice(1, 100), slice(-100, 2)])
case("empty slice", [3, 4], [slice(2, 1)])
case("none", [2, 3, 4], [None, 0, slice(None), None])
case("ellipsis", [2, 3, 4], [Ellipsis, 1])
case("ellipsis middle", [2, 3, 4, 2], [0, Ellipsis, slice(1, None)])
case("ellipsis none", [2, 3], [Ellipsis, None])
case("true", [2, 3], [True])
case("false", [2, 3], [False, slice(None)])
case("int tensor", [4, 3], [slice(None), torch.tensor([2, 0, -1, 2])], put=False)
case("int tensor 2d", [5, 3], [torch.tensor([[0, 4], [1, 1], [3, 0]])], put=False)
case("int tensor 2d distinct", [6, 3], [torch.tensor([[0, 4], [5, 1], [3, 2]])])
case("int tensor after int", [2, 5, 3], [1, torch.tensor([4, 0, 4])], put=False)
case("int tensor then slice", [4, 5], [torch.tensor([3, 1]), slice(1, 4)])
case("mask all", [3, 4], lambda x: [x > 0.2])
case("mask leading", [3, 4, 2], lambda x: [x[:, :, 0] > 0])
case("mask middle", [2, 4, 3], lambda x: [slice(None), torch.tensor([True, False, True, True])])
case("mask after ellipsis", [2, 3, 4], lambda x: [Ellipsis, torch.tensor([False, True, True, False])])
case("int slice none ellipsis", [3, 4, 5], [1, None, Ellipsis, slice(None, None, 3)])
case("put broadcast row", [3, 4], [slice(None), slice(None, None, 2)], value_shape=[2])
case("put scalar", [3, 4], [1], value_shape=[])
case("put mask scalar", [3, 4], lambda x: [x < 0], value_shape=[])
case("put int tensor broadcast", [4, 3], [torch.tensor([3, 0])], value_shape=[3])

if __name__ == "__main__":
    out = open(sys.argv[1], "w") if len(sys.argv) > 1 else sys.stdout
    out.write('{"generator": "tests/golden/gen_indexing.py", "torch_version": %s, "cases": [\n'
              % json.dumps(torch.__version__))
    out.write(",\n".join(json.dumps(c, allow_nan=False, separators=(",", ":")) for c in CASES))
    out.write("\n]}\n")
