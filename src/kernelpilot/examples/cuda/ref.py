"""Reference of softmax.cu in the seed form: reference(**kwargs) writes the outputs in place."""
import torch

atol, rtol = 1e-5, 1e-4


def reference(input, output, rows, cols, **_):
    x = input[: rows * cols].view(rows, cols)
    output[: rows * cols].copy_(torch.softmax(x.double(), dim=1).to(output.dtype).view(-1))
