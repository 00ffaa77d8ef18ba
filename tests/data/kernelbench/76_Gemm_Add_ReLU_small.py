"""A KernelBench-style level-2 problem written for kernelpilot's tests (the form of KernelBench's
level2/76_Gemm_Add_ReLU.py: constructor arguments from get_init_inputs, parameters drawn at construction), small."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x @ W^T + bias)."""

    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.gemm(x)
        x = x + self.bias
        return torch.relu(x)


batch_size = 8
in_features = 32
out_features = 48
bias_shape = (out_features,)


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]
