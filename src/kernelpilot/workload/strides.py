"""The stride pattern of a call's tensors as one canonical string (a key of the config store, :mod:`kernelpilot.store`).

A config tuned for row-major inputs may be slow (or, for a kernel that assumes unit stride, wrong) on a transposed
or sliced view (Triton #9822), so a decided config is stored under the pattern its tensors had. The pattern keeps
what changes the answer — which dimension is innermost, which are broadcast, whether there are gaps — and drops the
sizes (they are the shape's business):

- one tensor: ``c`` when it is row-major contiguous (size-1 dimensions ignored: their stride never matters);
  otherwise ``p`` followed by its dimensions ordered from the largest stride to the smallest (``p10``: a
  transposed matrix), then ``b<index>`` for each broadcast dimension (stride 0, size > 1; left out of the order:
  ``p0b1`` is a column expanded along dimension 1), and a final ``g`` when the tensor is not dense (its strides
  skip elements: a slice of a wider tensor). Dimensions of equal stride keep their index order. Ranks over 10 write indices separated by ``.``.
- a call: its tensors' patterns joined with ``,`` in argument order; ``contiguous`` when every tensor is ``c``
  (the common case, and what :mod:`kernelpilot.store` takes by default).

Pure Python, no torch: the shapes and strides come as lists of ints (the profiler's ``input_shapes`` and
``structured_input_strides``, or ``tensor.shape``/``tensor.stride()``).
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["CONTIGUOUS", "tensor_pattern", "stride_pattern"]

#: The pattern of a call whose tensors are all row-major contiguous.
CONTIGUOUS = "contiguous"


def tensor_pattern(sizes: Sequence[int], strides: Sequence[int]) -> str:
    """The pattern of one tensor (module docstring): ``c``, or ``p<order>[b<i>...][g]``.

    Args:
        sizes, strides: the tensor's sizes and strides in elements (equal lengths; a 0-d tensor is ``c``).

    Raises:
        ValueError: ``sizes`` and ``strides`` differ in length, or a stride is negative.
    """
    if len(sizes) != len(strides):
        raise ValueError(f"sizes {list(sizes)} and strides {list(strides)} differ in length")
    if any(s < 0 for s in strides):
        raise ValueError(f"negative stride in {list(strides)}")
    live = [i for i, n in enumerate(sizes) if n != 1]
    expected = 1
    contiguous = True
    for i in reversed(live):
        if strides[i] != expected:
            contiguous = False
            break
        expected *= sizes[i]
    if contiguous:
        return "c"
    broadcast = {i for i in live if strides[i] == 0}
    moving = sorted((i for i in live if i not in broadcast), key=lambda i: (-strides[i], i))
    dense, expected = True, 1
    for i in reversed(moving):
        if strides[i] != expected:
            dense = False
        expected *= sizes[i]
    sep = "." if len(sizes) > 10 else ""
    order = sep.join(str(i) for i in moving)
    marks = "".join(f"b{i}" for i in sorted(broadcast))
    return "p" + order + marks + ("" if dense else "g")


def stride_pattern(sizes: Sequence[Sequence[int]], strides: Sequence[Sequence[int]]) -> str:
    """The pattern of a call's tensors (module docstring): ``contiguous``, or the tensors' patterns joined by ``,``.

    Args:
        sizes, strides: one list per tensor argument, in argument order (non-tensor arguments left out).

    Raises:
        ValueError: the two lists differ in length, or :func:`tensor_pattern` refuses a tensor.
    """
    if len(sizes) != len(strides):
        raise ValueError(f"{len(sizes)} size lists but {len(strides)} stride lists")
    parts = [tensor_pattern(a, b) for a, b in zip(sizes, strides)]
    return CONTIGUOUS if all(p == "c" for p in parts) else ",".join(parts)
