"""A KernelBench-style level-1 problem written for kernelpilot's tests (the form of KernelBench's level1/19_ReLU.py,
small sizes so that the Triton interpreter runs it in a second)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU of one tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16
dim = 300


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
