#!/usr/bin/env python3
"""Capture the Nsight Compute fixtures of issue 3: six small Triton kernels, one bottleneck pattern each.

Each case is a kernel written for this script, launched at a shape where its pattern is unmistakable on an
H200 (sm_90, 132 SMs), and profiled with ``ncu --set full --clock-control none`` into
``OUT_DIR/h200_<case>.ncu-rep`` (default ``$OUT/fixtures``). The approach is kernelpilot's own (:mod:`kernelpilot.profile.target`,
:mod:`kernelpilot.profile.ncu_run`): the script runs itself as ncu's target (``--case NAME``), warms up
(compilation, caches) outside the NVTX range ``kp_profile``, launches once inside it, and ncu profiles only
that launch (``--nvtx --nvtx-include kp_profile/ --launch-count 1``). The interpreter is passed to ncu by its
full path (``sys.executable``), as the device README asks.

Usage::

    python3 scripts/capture_fixtures.py --list
    python3 scripts/capture_fixtures.py --dry-run                  # CPU: every kernel under TRITON_INTERPRET=1
    python3 scripts/capture_fixtures.py --out $OUT/fixtures [--cases stream_copy_fp32,strided_uncoalesced]

The GPU run has two phases. Preflight: every selected case runs once without ncu, all in parallel; this
fills Triton's on-disk cache (so ncu's runs do not compile) and checks each kernel's output against a torch
reference. Profile: one ncu process per case, in turn, each under its own timeout; a failed case is
reported and the loop goes on. A summary table (case, rc, seconds, report size) ends the output.

Exit status: 0 when every selected case left a report, 1 otherwise (2 for a usage error). In target mode
(``--case``): 0 ok, 3 when the output check failed (the launch was still profiled).

On the device, ``--deadline-s`` bounds the whole capture (cases shrink their timeouts to fit, and the
table always prints); a timed-out case's process group (ncu and its target) is killed.

Sources for the numbers quoted below: PRODUCT.md ("Occupancy": Hopper limits 65,536 registers/SM, 64
warps/SM, 132 SMs; measured H200 copy 4.22 TB/s; the SOL rule and pattern thresholds of "Diagnosing").
Registers, shared memory and SASS instruction counts were read from cubins compiled on a CPU machine for
sm_90 with Triton 3.6.0 (the device's version) and its bundled ptxas/cuobjdump (``-res-usage``, ``-sass``).
"""

from __future__ import annotations

import os
import sys

# The interpreter must be chosen before triton is first imported (kernelpilot.kernels.contract.use_interpreter).
if "--dry-run" in sys.argv[1:]:
    os.environ["TRITON_INTERPRET"] = "1"

import argparse
import concurrent.futures
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl

try:  # stay in step with kernelpilot's profile target when the package is importable
    from kernelpilot.profile.target import NVTX_RANGE
except ImportError:  # the script also runs with torch and triton alone
    NVTX_RANGE = "kp_profile"

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
SCRIPT = Path(__file__).resolve()
REPORT_PREFIX = "h200_"


# ----------------------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------------------

@triton.jit
def stream_axpb_kernel(x_ptr, y_ptr, a, b, N, BLOCK: tl.constexpr):
    """y = a * x + b over N fp32 elements; BLOCK consecutive elements per program (memory-bound streaming)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, a * x + b, mask=mask)


@triton.jit
def _swizzled_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(tile row, tile column) of program ``pid``, walking GROUP_M tile rows column by column (L2 reuse)."""
    tiles_m = M // BLOCK_M
    tiles_n = N // BLOCK_N
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)
    local = pid % per_group
    return first_m + local % rows_in_group, local // rows_in_group


@triton.jit
def gemm_bf16_tc_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr, UPCAST: tl.constexpr):
    """C = A @ B for row-major bf16 A (M x K), B (K x N), fp32 accumulation on tensor cores via tl.dot.

    M, N, K must be multiples of the tiles (checked by the host), so there are no masks in the main loop.
    ``UPCAST`` (interpreter only) converts the tiles to fp32 before tl.dot, whose interpreter version may
    multiply bf16 bit patterns (see examples/matmul.py).
    """
    pid_m, pid_n = _swizzled_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty))


@triton.jit
def gemm_fp32_fma_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr):
    """C = A @ B for row-major fp32 matrices with ``tl.dot(..., input_precision="ieee")``: FFMA, no tensor cores.

    On NVIDIA GPUs fp32 x fp32 tensor-core MMA exists only as TF32 (``input_precision="tf32"``, Triton's
    default, or the 3-pass "tf32x3"). With "ieee" Triton's accelerate-matmul pass leaves the dot on the
    blocked (FMA) path, which lowers to FFMA instructions (Triton 3.6 docstring of ``tl.dot``: options
    "tf32", "tf32x3", "ieee"; checked in the cubin's SASS, see the ``--list`` notes).
    M, N, K must be multiples of the tiles (checked by the host).
    """
    pid_m, pid_n = _swizzled_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc)


@triton.jit
def small_grid_row_sum_kernel(x_ptr, out_ptr, N, stride_xm, BLOCK: tl.constexpr):
    """out[row] = sum(x[row, :N]); one program per row, looping over the row BLOCK elements at a time."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, N, BLOCK):
        c = start + cols
        acc += tl.load(x_ptr + row * stride_xm + c, mask=c < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def occupancy_registers_kernel(x_ptr, nxt_ptr, out_ptr, STEPS, CHAIN_LEN, BLOCK: tl.constexpr):
    """out = 2 * x + j, where j is the end of a STEPS-long pointer chase through ``nxt`` (int32).

    Each program loads its BLOCK values of x *before* the chase and uses them only *after* it, so every
    thread keeps BLOCK / (32 * num_warps) fp32 values live in registers across the loop (128 at BLOCK 8192
    with 2 warps). The chase is a chain of dependent scalar loads (``.cg``: L2, not L1): almost no memory
    traffic and no arithmetic, just latency that more resident warps would hide, and registers cap how many
    warps are resident.
    """
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    keep = tl.load(x_ptr + offs)
    j = pid % CHAIN_LEN
    for _ in range(STEPS):
        j = tl.load(nxt_ptr + j, cache_modifier=".cg")
    tl.store(out_ptr + offs, keep * 2.0 + j.to(tl.float32))


@triton.jit
def strided_gather_kernel(x_ptr, y_ptr, N, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    """y[i] = x[i * STRIDE] for i < N: neighbouring threads read fp32 values STRIDE * 4 bytes apart."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(y_ptr + offs, tl.load(x_ptr + offs * STRIDE, mask=mask), mask=mask)


# ----------------------------------------------------------------------------------------------------------
# Cases: inputs, launch, reference
# ----------------------------------------------------------------------------------------------------------

def _rand(shape: tuple[int, ...], gen: torch.Generator, device: str, dtype: torch.dtype = torch.float32,
          ) -> torch.Tensor:
    """Standard-normal values (never zeros: PRODUCT.md "Correctness"), made in fp32 then cast."""
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)


def _generator(device: str, seed: int = 0) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def _stream_setup(shape: dict[str, int], device: str) -> dict[str, Any]:
    x = _rand((shape["N"],), _generator(device), device)
    return {"x": x, "y": torch.full_like(x, float("nan")), "a": 1.5, "b": -0.25}


def _stream_launch(t: dict[str, Any], cfg: dict[str, int]) -> None:
    n = t["x"].numel()
    stream_axpb_kernel[(triton.cdiv(n, cfg["BLOCK"]),)](t["x"], t["y"], t["a"], t["b"], n, BLOCK=cfg["BLOCK"],
                                                       num_warps=cfg["num_warps"])


def _stream_check(t: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    return t["y"], t["a"] * t["x"].double() + t["b"]


def _gemm_setup(dtype: torch.dtype) -> Callable[[dict[str, int], str], dict[str, Any]]:
    def setup(shape: dict[str, int], device: str) -> dict[str, Any]:
        gen = _generator(device)
        m, n, k = shape["M"], shape["N"], shape["K"]
        return {"a": _rand((m, k), gen, device, dtype), "b": _rand((k, n), gen, device, dtype),
                "c": torch.full((m, n), float("nan"), device=device, dtype=dtype)}
    return setup


def _gemm_launch(kernel: Any, extra: dict[str, Any]) -> Callable[[dict[str, Any], dict[str, int]], None]:
    def launch(t: dict[str, Any], cfg: dict[str, int]) -> None:
        a, b, c = t["a"], t["b"], t["c"]
        (m, k), n = a.shape, b.shape[1]
        bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
        if m % bm or n % bn or k % bk:
            raise ValueError(f"M, N, K = {m}, {n}, {k} must be multiples of the tile {bm}x{bn}x{bk}")
        kernel[((m // bm) * (n // bn),)](
            a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg["GROUP_M"], **extra,
            num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return launch


def _gemm_check(t: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    return t["c"], t["a"].double() @ t["b"].double()


def _row_sum_setup(shape: dict[str, int], device: str) -> dict[str, Any]:
    x = _rand((shape["M"], shape["N"]), _generator(device), device)
    return {"x": x, "out": torch.full((shape["M"],), float("nan"), device=device)}


def _row_sum_launch(t: dict[str, Any], cfg: dict[str, int]) -> None:
    x = t["x"]
    small_grid_row_sum_kernel[(x.shape[0],)](x, t["out"], x.shape[1], x.stride(0), BLOCK=cfg["BLOCK"],
                                             num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])


def _row_sum_check(t: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    return t["out"], t["x"].double().sum(dim=1)


def _chase_setup(shape: dict[str, int], device: str) -> dict[str, Any]:
    """x: programs * BLOCK fp32; nxt: one random cycle through all CHAIN_LEN entries (int32), so no chase
    settles into a short loop that L1 or the compiler could exploit."""
    gen = _generator(device)
    progs, block, length = shape["PROGRAMS"], shape["BLOCK"], shape["CHAIN_LEN"]
    order = torch.randperm(length, generator=_generator("cpu", 1))
    nxt = torch.empty(length, dtype=torch.int64)
    nxt[order] = torch.roll(order, -1)
    x = _rand((progs * block,), gen, device)
    return {"x": x, "nxt": nxt.to(torch.int32).to(device), "out": torch.full_like(x, float("nan")),
            "steps": shape["STEPS"], "programs": progs, "block": block}


def _chase_launch(t: dict[str, Any], cfg: dict[str, int]) -> None:
    if cfg["BLOCK"] != t["block"]:
        raise ValueError(f"BLOCK {cfg['BLOCK']} differs from the inputs' {t['block']}")
    occupancy_registers_kernel[(t["programs"],)](t["x"], t["nxt"], t["out"], t["steps"], t["nxt"].numel(),
                                                 BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])


def _chase_check(t: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    nxt = t["nxt"].long()
    j = torch.arange(t["programs"], device=nxt.device) % nxt.numel()
    for _ in range(t["steps"]):
        j = nxt[j]
    ends = j.double().repeat_interleave(t["block"])
    return t["out"], 2.0 * t["x"].double() + ends


def _strided_setup(shape: dict[str, int], device: str) -> dict[str, Any]:
    n, stride = shape["N"], shape["STRIDE"]
    return {"x": _rand((n * stride,), _generator(device), device),
            "y": torch.full((n,), float("nan"), device=device), "stride": stride}


def _strided_launch(t: dict[str, Any], cfg: dict[str, int]) -> None:
    n = t["y"].numel()
    strided_gather_kernel[(triton.cdiv(n, cfg["BLOCK"]),)](t["x"], t["y"], n, STRIDE=t["stride"],
                                                          BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])


def _strided_check(t: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    return t["y"], t["x"][:: t["stride"]].double()


@dataclass(frozen=True)
class Case:
    """One fixture: a kernel, the GPU shape and config it is profiled at, and what its card should say.

    Attributes:
        name: the case's name; the report is ``h200_<name>.ncu-rep``.
        kernel: the Triton kernel's name (as ncu shows it).
        shape / tiny_shape: problem sizes on the GPU and for ``--dry-run`` under the interpreter.
        config: tile sizes, ``num_warps``, ``num_stages``.
        why: why the pattern must show (the arithmetic behind it, units in the text).
        expect: the card a correct diagnosis gives (SOL branch, patterns), as a reading guide.
        rel_tol: largest accepted ||out - ref|| / ||ref|| against a float64 reference (PRODUCT.md tolerances).
    """

    name: str
    kernel: str
    setup: Callable[[dict[str, int], str], dict[str, Any]]
    launch: Callable[[dict[str, Any], dict[str, int]], None]
    check: Callable[[dict[str, Any]], tuple[torch.Tensor, torch.Tensor]]
    shape: dict[str, int]
    tiny_shape: dict[str, int]
    config: dict[str, int]
    why: str
    expect: str
    rel_tol: float = 1e-5
    tiny_config: dict[str, int] = field(default_factory=dict)


_GEMM_BF16 = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}
_GEMM_FP32 = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 16, "GROUP_M": 8, "num_warps": 4, "num_stages": 2}

CASES: dict[str, Case] = {c.name: c for c in [
    Case(
        "stream_copy_fp32", "stream_axpb_kernel", _stream_setup, _stream_launch, _stream_check,
        shape={"N": 132 * 16 * 31 * 1024}, tiny_shape={"N": 5000}, config={"BLOCK": 1024, "num_warps": 4},
        why="~2^26 fp32 (255.75 MiB read + written each), 2 FLOP per 8 bytes (0.25 FLOP/B, far under the "
            "ridge); 65,472 programs of 128 threads = exactly 31 waves at 16 blocks/SM (no partial wave, so no "
            "tail-effect pattern); ~0.13 ms at the measured 4.22 TB/s "
            "(Triton 3.6, sm_90: 18 registers, 2 LDG.E.128 + 2 STG.E.128 per thread).",
        expect="memory SOL >= 80 % (high throughput), DRAM the busiest unit; compute SOL low; overall "
               "memory-bound; no uncoalesced/sparse patterns (128-bit loads and stores)."),
    Case(
        "gemm_bf16_tc_compute", "gemm_bf16_tc_kernel", _gemm_setup(torch.bfloat16),
        _gemm_launch(gemm_bf16_tc_kernel, {"UPCAST": INTERPRETED}), _gemm_check,
        shape={"M": 8448, "N": 8192, "K": 8192}, tiny_shape={"M": 256, "N": 512, "K": 128}, config=_GEMM_BF16,
        why="8448x8192x8192 bf16 = 1.13 TFLOP, AI ~ 2700 FLOP/B (ridge ~ 190); 128x256x64 tiles, 8 warps (two "
            "warpgroups: wgmma/HGMMA on sm_90), 3 stages (144 KiB shared), GROUP_M 8 for L2 reuse; 66 x 32 = "
            "2112 tiles = exactly 16 waves at 1 block/SM (M = 66 x 128 so no partial wave); the config of Triton's Hopper matmul tutorial (Triton 3.6, sm_90: "
            "196 registers, 147,456 B shared, HGMMA + LDGSTS in SASS, no spills).",
        expect="compute SOL high (>= 80 % or >= 10 points above memory), tensor (gmma) pipe busy, HGMMA in SASS; "
               "no 'no tensor cores' pattern.",
        rel_tol=1e-2),
    Case(
        "small_grid_latency", "small_grid_row_sum_kernel", _row_sum_setup, _row_sum_launch, _row_sum_check,
        shape={"M": 16, "N": 2**18}, tiny_shape={"M": 3, "N": 5000},
        config={"BLOCK": 2048, "num_warps": 4, "num_stages": 2},
        why="16 row sums = 16 programs on 132 SMs (0.008 waves at 16 blocks/SM); each SM streams a 1 MiB row "
            "alone, so DRAM and every SM-side unit stay far below peak (Triton 3.6, sm_90: 30 registers).",
        expect="compute and memory SOL < 60 % with waves < 1 -> small-grid (latency); pattern 'small grid' "
               "(waves < 0.5, grid 16 < 132 SMs)."),
    Case(
        "occupancy_registers", "occupancy_registers_kernel", _chase_setup, _chase_launch, _chase_check,
        shape={"PROGRAMS": 132 * 24, "BLOCK": 8192, "CHAIN_LEN": 2**20, "STEPS": 512},
        tiny_shape={"PROGRAMS": 3, "BLOCK": 8192, "CHAIN_LEN": 64, "STEPS": 5},
        config={"BLOCK": 8192, "num_warps": 2},
        why="BLOCK 8192 over 64 threads keeps 128 fp32 values per thread live across a 512-step dependent "
            "load chain: 148 registers/thread (Triton 3.6, sm_90, no spills) -> 4864 per warp -> 3 warps per "
            "sub-partition (16384 registers each) -> 12 warps "
            "= 6 blocks/SM = 18.75 % theoretical occupancy, registers the limiter (warps alone allow 32 "
            "blocks); 3168 programs = exactly 4 waves (3 if registers came out <= 128); traffic ~200 MB over ~0.3 ms, tiny next to DRAM peak.",
        expect="compute and memory SOL < 60 % with waves >= 1 -> latency; theoretical occupancy <= 25 % with "
               "launch__occupancy_limit_registers the smallest limit -> occupancy-bound, limiter registers; "
               "long-scoreboard stalls dominate; 'register spill' fires only if registers/thread > 128."),
    Case(
        "strided_uncoalesced", "strided_gather_kernel", _strided_setup, _strided_launch, _strided_check,
        shape={"N": 132 * 16 * 2 * 1024, "STRIDE": 32}, tiny_shape={"N": 3000, "STRIDE": 32},
        config={"BLOCK": 1024, "num_warps": 4},
        why="each 32-bit load of a warp touches 32 different 128-byte lines (stride 32 fp32 = 128 B): 32 "
            "sectors per request where a coalesced fp32 load needs 4; 4,325,376 outputs (exactly 2 waves at 16 "
            "blocks/SM) read from a 528 MiB input "
            "(Triton 3.6, sm_90: 8 scalar LDG.E and 2 STG.E.128 per thread, 32 registers).",
        expect="global load sectors per request ~32 (> 5) -> 'uncoalesced loads'; bytes used per load sector "
               "4 of 32; stores stay coalesced (no 'sparse writes')."),
    Case(
        "gemm_fp32_fma_only", "gemm_fp32_fma_kernel", _gemm_setup(torch.float32),
        _gemm_launch(gemm_fp32_fma_kernel, {}), _gemm_check,
        shape={"M": 66 * 64, "N": 100 * 64, "K": 2048}, tiny_shape={"M": 128, "N": 256, "K": 64}, config=_GEMM_FP32,
        why="fp32 tl.dot with input_precision='ieee': Triton keeps it off the MMA path (fp32 MMA is TF32 "
            "only), so every multiply-add is an FFMA (Triton 3.6 for sm_90: 512 FFMA and 62 LDS per K step of "
            "16, no HMMA/HGMMA, 96 registers, 8 KiB shared); 64x64 tiles, 4 warps: 5 blocks/SM by registers, "
            "66 x 100 = 6600 tiles = exactly 10 waves; 2 * 4224 * 6400 * 2048 = 111 GFLOP.",
        expect="FMA pipe busy (> 50 %), tensor pipe ~0 -> 'no tensor cores'; FFMA and no HMMA/HGMMA in SASS; "
               "compute SOL above memory SOL.",
        rel_tol=1e-4),
]}


# ----------------------------------------------------------------------------------------------------------
# Target mode (the process ncu profiles), dry run, preflight
# ----------------------------------------------------------------------------------------------------------

def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref||_2 / ||ref||_2 in float64; inf when out has NaN/inf (unwritten elements stay NaN)."""
    out64 = out.double()
    if not torch.isfinite(out64).all():
        return float("inf")
    return float(torch.linalg.vector_norm(out64 - ref) / torch.linalg.vector_norm(ref))


def run_target(case: Case, warmup_launches: int = 2) -> int:
    """Build the GPU inputs, warm up outside the NVTX range, launch once inside it, then check the output.

    Returns 0, or 3 when the output is wrong (after the profiled launch, so the report is still written).
    """
    t = case.setup(case.shape, "cuda")
    for _ in range(warmup_launches):
        case.launch(t, case.config)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    case.launch(t, case.config)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    err = relative_error(*case.check(t))
    ok = err <= case.rel_tol
    print(f"[{case.name}] check {'ok' if ok else 'FAILED'}: relative error {err:.3g} (tolerance {case.rel_tol:g})",
          flush=True)
    return 0 if ok else 3


def dry_run(cases: list[Case]) -> int:
    """Run every kernel once under the Triton interpreter at its tiny shape and compare with torch (CPU)."""
    failures = 0
    for case in cases:
        start = time.perf_counter()
        try:
            t = case.setup(case.tiny_shape, "cpu")
            case.launch(t, case.tiny_config or case.config)
            err = relative_error(*case.check(t))
            ok = err <= case.rel_tol
            note = f"relative error {err:.3g} (tolerance {case.rel_tol:g})"
        except Exception as exc:  # noqa: BLE001 -- report every case, then fail
            ok, note = False, f"{type(exc).__name__}: {exc}"
        failures += not ok
        print(f"{case.name:24s} {'ok  ' if ok else 'FAIL'} {time.perf_counter() - start:6.2f} s  {note}", flush=True)
    print(f"dry run: {len(cases) - failures} of {len(cases)} cases ok (TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')})")
    return 1 if failures else 0


def find_ncu() -> str | None:
    """``ncu`` on PATH, else in /usr/local/cuda/bin or /opt/nvidia/nsight-compute (as kernelpilot looks)."""
    return shutil.which("ncu") or shutil.which("ncu", path="/usr/local/cuda/bin:/opt/nvidia/nsight-compute")


def child_env() -> dict[str, str]:
    """The environment of the target processes: compiled Triton (no interpreter), unbuffered output."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def target_command(case: str) -> list[str]:
    """This script in target mode, with the interpreter by full path (ncu needs it)."""
    return [sys.executable, str(SCRIPT), "--case", case]


def ncu_command(ncu: str, report_stem: Path, case: str) -> list[str]:
    """The ncu command of one case (kernelpilot.profile.ncu_run.ncu_command's options, one launch)."""
    return [ncu, "--set", "full", "--clock-control", "none", "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/",
            "--launch-count", "1", "--import-source", "no", "--force-overwrite", "--export", str(report_stem),
            *target_command(case)]


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _run(cmd: list[str], timeout_s: float) -> tuple[int, float, str]:
    """Run ``cmd`` in its own session; (return code, or 124 on timeout; seconds; stdout+stderr).

    On timeout the whole process group is killed: ncu's target (a grandchild) must not outlive ncu and hold
    the GPU while the next case is profiled.
    """
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(),
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, time.monotonic() - start, out or ""
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            out = ""
        return 124, time.monotonic() - start, (out or "") + f"\n[timed out after {timeout_s:.0f} s]"


def preflight(cases: list[Case], timeout_s: float, jobs: int) -> dict[str, tuple[int, float]]:
    """Run every case's target without ncu, in parallel: compiles into Triton's cache, checks outputs."""
    results: dict[str, tuple[int, float]] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(_run, target_command(c.name), timeout_s): c for c in cases}
        for fut in concurrent.futures.as_completed(futures):
            case = futures[fut]
            rc, seconds, text = fut.result()
            results[case.name] = (rc, seconds)
            print(f"== preflight {case.name}: rc {rc}, {seconds:.1f} s\n{_tail(text, 6)}", flush=True)
    return results


#: A case is not started with less time than this left before the deadline, in seconds.
MIN_CASE_S = 20.0


def capture(cases: list[Case], out_dir: Path, *, case_timeout_s: float, preflight_timeout_s: float,
            jobs: int, do_preflight: bool, ncu: str | None, deadline_s: float | None = None) -> int:
    """Preflight, then one ncu process per case; prints the summary table. 0 when every case left a report.

    ``deadline_s`` (seconds from the call) bounds the whole capture: each case's timeout shrinks to the time
    left, and cases that would start with less than MIN_CASE_S left are skipped, so the table always prints.
    """
    start = time.monotonic()

    def left_s() -> float:
        return float("inf") if deadline_s is None else deadline_s - (time.monotonic() - start)

    ncu = ncu or find_ncu()
    if ncu is None:
        print("ncu not found on PATH, in /usr/local/cuda/bin or /opt/nvidia/nsight-compute", file=sys.stderr)
        return 1
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"python {sys.executable}; torch {torch.__version__}; triton {triton.__version__}; ncu {ncu}", flush=True)
    pre = preflight(cases, min(preflight_timeout_s, left_s() / 2), jobs) if do_preflight else {}
    rows = []
    for case in cases:
        report = out_dir / f"{REPORT_PREFIX}{case.name}.ncu-rep"
        pre_rc = pre.get(case.name, (None, 0.0))[0]
        if pre_rc == 124:  # it hung without ncu; under ncu it would only hang longer
            rows.append((case.name, pre_rc, 0.0, 0, "skipped: preflight timed out"))
            print(f"== ncu {case.name}: skipped (preflight timed out)", flush=True)
            continue
        if left_s() < MIN_CASE_S:
            rows.append((case.name, None, 0.0, 0, f"skipped: {max(left_s(), 0):.0f} s left before the deadline"))
            print(f"== ncu {case.name}: skipped (deadline)", flush=True)
            continue
        report.unlink(missing_ok=True)
        cmd = ncu_command(ncu, report.with_suffix(""), case.name)
        print(f"== ncu {case.name}: {' '.join(cmd)}", flush=True)
        rc, seconds, text = _run(cmd, min(case_timeout_s, left_s()))
        print(_tail(text, 20), flush=True)
        size = report.stat().st_size if report.is_file() else 0
        note = "ok"
        if "ERR_NVGPUCTRPERM" in text:
            note = "ERR_NVGPUCTRPERM: counters not permitted"
        elif "No kernels were profiled" in text:
            note = "no kernel profiled"
        elif rc == 124:
            note = "timed out" + (" (report written)" if size else "")
        elif size == 0:
            note = "no report"
        elif rc == 3:
            note = "report written; output check FAILED"
        elif rc != 0:
            note = "report written; nonzero exit"
        rows.append((case.name, rc, seconds, size, note))
    print("\n| case | rc | seconds | report bytes | note |\n|---|---|---|---|---|")
    for name, rc, seconds, size, note in rows:
        print(f"| {name} | {rc} | {seconds:.1f} | {size} | {note} |")
    made = sum(1 for r in rows if r[3] > 0)
    print(f"\nreports: {made} of {len(cases)} in {out_dir}; {time.monotonic() - start:.0f} s", flush=True)
    return 0 if made == len(cases) else 1


def select(names: str | None) -> list[Case]:
    """The cases named in a comma-separated list (all when None); raises SystemExit on unknown names."""
    if not names:
        return list(CASES.values())
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(unknown)}; known: {', '.join(CASES)}")
    return [CASES[n] for n in wanted]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--list", action="store_true", help="list the cases, their shapes, configs and expected cards")
    p.add_argument("--cases", help="comma-separated subset of cases (default: all)")
    p.add_argument("--dry-run", action="store_true", help="run each kernel under TRITON_INTERPRET=1 on tiny shapes")
    p.add_argument("--out", type=Path, default=None,
                   help="report folder (default: $OUT/fixtures, else ./fixtures-out)")
    p.add_argument("--case", help="target mode: run one case on the GPU (what ncu launches)")
    p.add_argument("--case-timeout-s", type=float, default=150.0, help="ncu timeout per case, seconds")
    p.add_argument("--preflight-timeout-s", type=float, default=150.0, help="preflight timeout per case, seconds")
    p.add_argument("--deadline-s", type=float, default=None,
                   help="bound on the whole capture, seconds; cases shrink their timeouts to fit")
    p.add_argument("--jobs", type=int, default=6, help="preflight processes run at once")
    p.add_argument("--no-preflight", action="store_true", help="skip the parallel preflight (compile + check)")
    p.add_argument("--ncu", help="ncu executable (default: found like kernelpilot finds it)")
    args = p.parse_args(argv)

    if args.case:
        if args.case not in CASES:
            p.error(f"unknown case {args.case!r}; known: {', '.join(CASES)}")
        return run_target(CASES[args.case])
    cases = select(args.cases)
    if args.list:
        for c in cases:
            print(f"{c.name}  ->  {REPORT_PREFIX}{c.name}.ncu-rep\n  kernel {c.kernel}; shape {c.shape}; "
                  f"config {c.config}\n  why: {c.why}\n  expect: {c.expect}\n")
        return 0
    if args.dry_run:
        return dry_run(cases)
    out = args.out or (Path(os.environ["OUT"]) / "fixtures" if os.environ.get("OUT") else Path("fixtures-out"))
    return capture(cases, out, case_timeout_s=args.case_timeout_s, preflight_timeout_s=args.preflight_timeout_s,
                   jobs=args.jobs, do_preflight=not args.no_preflight, ncu=args.ncu, deadline_s=args.deadline_s)


if __name__ == "__main__":
    sys.exit(main())
