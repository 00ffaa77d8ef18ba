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
