"""The thread count of a PyTorch peer, set everywhere PyTorch computes.

torch.set_num_threads sizes ATen's OpenMP pool and oneDNN, but not OpenBLAS's own pthread pool,
which Debian's torch calls for every matmul and for the convolutions oneDNN does not take (a 1x1
on a batch under 16 at 1 thread runs as a matrix product). Left alone, OpenBLAS uses every core,
so a "1-thread" peer ran its products on 2 cores (measured 2026-11-28: a 64x256x3136 product at
190 GFLOP/s on a core whose AVX2 peak is 113). set_threads sets both."""
import ctypes

import torch


def openblas():
    """The OpenBLAS that torch loaded (libopenblas.so.0), or None."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib
    except (OSError, AttributeError):
        return None


def set_threads(t):
    """torch.set_num_threads(t) and the same count for OpenBLAS's pool."""
    torch.set_num_threads(t)
    lib = openblas()
    if lib is not None:
        lib.openblas_set_num_threads(t)
