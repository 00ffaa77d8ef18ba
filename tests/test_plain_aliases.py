"""The harness reads tensors only through objects of its own (kernelpilot.kernels.plain): a subclass from setup,
a class or a storage changed by run_kernel on the object it was handed, or by setup on objects it kept, never
reaches what the check reads."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch

from kernelpilot.kernels.contract import load_kernel, make_case, run_kernel
from kernelpilot.kernels.plain import plain_alias

KERNEL = '''
import torch
SHAPE = {"N": 8}
TUNABLES = {"B": [1]}
KEPT = []

class Loud(torch.Tensor):
    pass

def setup(N, seed=0, device="cpu", **_):
    x = torch.arange(N, dtype=torch.float32)
    y = torch.zeros(N).as_subclass(Loud)
    KEPT.extend([x, y])
    return {"inputs": {"x": x, "y": y, "pair": [x, y], "N": N}, "outputs": ["y"]}

def run_kernel(x, y, pair, N, **_):
    y.copy_(x * 2)                       # the work, into the storage it was given
    y.__class__ = Loud                   # then the object changed: class, storage, shape
    y.set_(torch.full((N,), 7.0))
    KEPT[1].__class__ = Loud             # and the objects setup kept
    for t in (y, x):                     # and whatever an alias links back to
        if t._base is not None:
            t._base.__class__ = Loud
    pair[0].resize_(1)

def reference(x, y, pair, N, **_):
    return x * 2
'''


def test_the_case_holds_plain_aliases_and_each_launch_gets_fresh_ones(tmp_path: Path) -> None:
    path = tmp_path / "k.py"
    path.write_text(textwrap.dedent(KERNEL))
    kf = load_kernel(path, interpreted=True)
    case = make_case(kf, {"N": 8}, 0, "cpu")
    x, y = case.inputs["x"], case.inputs["y"]
    kept = kf.module.KEPT
    assert type(y) is torch.Tensor and type(x) is torch.Tensor
    assert y is not kept[1] and y.data_ptr() == kept[1].data_ptr()  # the same storage, not the same object
    assert all(type(t) is torch.Tensor for t in case.inputs["pair"])
    run_kernel(kf, case.inputs, {})
    assert type(y) is torch.Tensor and y.shape == (8,) and case.inputs["y"] is y
    assert torch.equal(y, torch.arange(8, dtype=torch.float32) * 2)  # what the launch wrote, not the 7.0 set_
    assert case.inputs["pair"][0].shape == (8,)
    assert plain_alias(3) == 3 and plain_alias("s") == "s"


WRAPPER = """
import torch
SHAPE = {"N": 4}
TUNABLES = {"B": [1]}

class Wrapped(torch.Tensor):
    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        args = [a.inner if isinstance(a, Wrapped) else a for a in args]
        return Wrapped(func(*args, **(kwargs or {})))  # keeps its class through any op

def setup(N, seed=0, device="cpu", **_):
    return {"inputs": {"x": torch.ones(N), "y": Wrapped(torch.zeros(N)), "N": N}, "outputs": ["y"]}

def run_kernel(x, y, N, **_):
    pass

def reference(x, y, N, **_):
    return x
"""


def test_a_subclass_with_its_own_dispatch_is_refused_with_a_hint(tmp_path: Path) -> None:
    """A wrapper subclass keeps its class through any alias (its dispatch runs below torch functions): the harness
    would read it through code of the kernel file, so make_case refuses it and says what to return instead."""
    import pytest

    from kernelpilot.errors import ContractError

    path = tmp_path / "w.py"
    path.write_text(WRAPPER)
    kf = load_kernel(path, interpreted=True)
    with pytest.raises(ContractError) as err:
        make_case(kf, {"N": 4}, 0, "cpu")
    assert "'y' as Wrapped" in str(err.value) and "plain torch.Tensor" in err.value.hint


BROADCAST = """
import torch
SHAPE = {"M": 4, "N": 8}
TUNABLES = {"B": [1]}

def setup(M, N, seed=0, device="cpu", **_):
    gen = torch.Generator().manual_seed(seed)
    row = torch.randn(N, generator=gen)
    return {"inputs": {"x": row.expand(M, N), "y": torch.empty(M, N), "M": M, "N": N}, "outputs": ["y"]}

def run_kernel(x, y, M, N, **_):
    y.copy_(torch.softmax(x, dim=-1))

def reference(x, y, M, N, **_):
    return torch.softmax(x, dim=-1)
"""


def test_a_broadcast_input_takes_new_values_through_its_storage_and_stays_broadcast(tmp_path: Path) -> None:
    """An input built with expand (stride 0: every row the same memory) is refreshed through its storage: each
    timed launch sees new values with the structure setup built, where copy_ into the view raised and the timing
    stage refused an honest kernel."""
    from kernelpilot.kernels.case import draw_values

    path = tmp_path / "b.py"
    path.write_text(BROADCAST)
    kf = load_kernel(path, interpreted=True)
    case = make_case(kf, {"M": 4, "N": 8}, 0, "cpu")
    x = case.inputs["x"]
    before = x[0].clone()
    assert x.stride() == (0, 1)
    draw = draw_values(case)
    assert x.stride() == (0, 1) and not torch.equal(x[0], before)
    assert all(torch.equal(x[i], x[0]) for i in range(4))
    assert torch.allclose(draw.values(case)["x"], x)  # the launch's inputs rebuilt for the reference: the same values
