"""The helpers every converted file carries (written into it as text by :mod:`kernelpilot.inductor.convert`, so the
file needs nothing of kernelpilot at run time): the launcher that stands in for Inductor's CachingAutotuner, and the
``_h`` object the host code allocates and launches through."""

from __future__ import annotations

__all__ = ["RUNTIME"]

RUNTIME = '''

def _cdiv(n, b):
    return -(n // -b)


def _scratch(size, align, stream):
    """Triton's global scratch allocator (``triton.set_allocator``): device-side tensor descriptors
    (``tl.make_tensor_descriptor``, Inductor's persistent TMA GEMM template) need ``size`` bytes of it per launch; a
    fresh int8 buffer on the current CUDA device (the CPU under the interpreter, which asks for none)."""
    return torch.empty(size, dtype=torch.int8, device="cuda" if torch.cuda.is_available() else "cpu")


class _Launcher:
    """One kernel launched as Inductor's launcher does, at a config of this file: ``.run(*args, stream=...)`` takes
    the kernel's arguments less its block sizes (``params``), in order; the grid is Inductor's for ``grid_type``
    (torch._inductor.runtime.triton_heuristics: ``Grid1D`` (ceildiv(xnumel, XBLOCK),), ``Grid2D`` adds
    ceildiv(ynumel, YBLOCK), ``Grid3D`` ceildiv(znumel, ZBLOCK); an axis without its block in the config: its numel;
    ``FixedGrid``, a template's: the values the host code passes after the kernel's arguments, computed for
    Inductor's tiles; a persistent template whose tiles are tunables: ``programs`` (its ``NUM_SMS``) programs, which
    stride over the tiles of any tile size).
    Before each launch it sets :func:`_scratch` as Triton's allocator, which kernels that build tensor descriptors on
    the device need. The launch goes to the current stream, the one whose handle Inductor's code passes as ``stream``."""

    def __init__(self, fn, params, grid_type, blocks, num_warps, num_stages, programs=None):
        self.fn, self.params, self.grid_type, self.blocks = fn, params, grid_type, blocks
        self.num_warps, self.num_stages, self.programs = num_warps, num_stages, programs

    def run(self, *args, stream=None):
        if hasattr(triton, "set_allocator"):  # as Inductor's launcher does before every launch
            triton.set_allocator(_scratch)
        if self.grid_type == "FixedGrid":
            n = len(self.params)
            grid = tuple(args[n:]) if self.programs is None else (self.programs, 1, 1)
            self.fn[grid](*args[:n], **self.blocks, num_warps=self.num_warps, num_stages=self.num_stages)
            return
        named = dict(zip(self.params, args))
        grid = [_cdiv(named["xnumel"], self.blocks.get("XBLOCK", 1))]
        if self.grid_type in ("Grid2D", "Grid3D"):
            grid.append(_cdiv(named["ynumel"], self.blocks.get("YBLOCK", 1)))
        if self.grid_type == "Grid3D":
            grid.append(_cdiv(named["znumel"], self.blocks.get("ZBLOCK", 1)))
        self.fn[tuple(grid)](*args, **self.blocks, num_warps=self.num_warps, num_stages=self.num_stages)


class _Host:
    """What Inductor's host code allocates and launches through (``_h``): ``empty`` allocates on the inputs'
    device, ``out(j, ...)`` hands over the caller's j-th output tensor where its size, stride, dtype and device are
    the buffer's (else allocates), ``guard``/``set_device`` select the inputs' device (never a fixed index),
    ``stream`` is None (the launcher uses the current stream), and each kernel name is its launcher."""

    def __init__(self, device, outs, launchers):
        self.device, self.outs, self.launchers = device, outs, launchers

    def __getattr__(self, name):
        try:
            return self.__dict__["launchers"][name]
        except KeyError:
            raise AttributeError(name) from None

    def empty(self, size, stride, dtype):
        return torch.empty_strided(size, stride, dtype=dtype, device=self.device)

    def out(self, j, size, stride, dtype):
        t = self.outs[j]
        if (t is not None and tuple(t.shape) == tuple(size) and tuple(t.stride()) == tuple(stride)
                and t.dtype == dtype and t.device == self.device):
            return t
        return self.empty(size, stride, dtype)

    def guard(self, index):
        return torch.cuda.device(self.device) if self.device.type == "cuda" else contextlib.nullcontext()

    def set_device(self, index):
        pass

    def stream(self, index):
        return None
'''
