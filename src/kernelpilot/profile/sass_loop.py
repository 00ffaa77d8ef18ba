"""The SASS check of a tiled kernel's main loop: are its global->shared copies asynchronous, and what waits on them.

The main loop is the body of the innermost backward branch that holds MMAs (HGMMA, HMMA). In it this module counts
async global->shared copies (LDGSTS, or UTMALDG/UBLKCP for TMA), MMAs, barriers (BAR) and the waits around them
(``DEPBAR.LE SB0, n`` for cp.async groups, ``WARPGROUP.DEPBAR.LE gsb0, n`` for wgmma groups). Used by
:mod:`kernelpilot.profile.pipeline`, which re-exports :class:`MainLoopCheck`, :func:`find_main_loop` and
:func:`check_main_loop`.
"""

from __future__ import annotations

import re
from typing import Optional

from pydantic import BaseModel, Field

from kernelpilot.profile.static import ASYNC_COPY_OPCODES, MMA_OPCODES, SassInstruction

__all__ = ["MainLoopCheck", "find_main_loop", "check_main_loop"]


class MainLoopCheck(BaseModel):
    """What the SASS main loop holds (static instructions of the loop body).

    Attributes:
        found: a loop (backward branch) was found.
        start_address, end_address: byte offsets of the body (branch target .. the backward branch).
        n_instructions: instructions in the body.
        async_copies: async global->shared copies in the body by opcode (LDGSTS, UTMALDG, UBLKCP).
        mma: MMA instructions in the body by opcode (HGMMA, HMMA, ...).
        ffma: FFMA instructions in the body (fp32 FMAs: no tensor cores when there is no MMA).
        sync_global_loads: LDG instructions in the body (loads through registers).
        barrier_addresses: every BAR in the body.
        barriers_between: BARs that lie between an async copy and an MMA next to each other in the body's order
            (with no other copy or MMA between them).
        adjacent_pairs_without_barrier: copy/MMA neighbours (in body order) with no BAR between them.
        async_copy_waits: ``n`` of each ``DEPBAR.LE SB0, n`` in the body (cp.async groups left in flight).
        mma_waits: ``n`` of each ``WARPGROUP.DEPBAR.LE gsb0, n`` (wgmma groups left in flight).
        meets_product_rule: async copies and MMAs in the loop with no barrier between them (the rule as docs/measuring.md
            states it: at least one copy/MMA neighbour pair without a BAR).
        overlapped: copies overlap MMAs: the rule above, or a BAR separates them but wgmma groups stay in flight
            across it (``mma_waits`` > 0 before the barrier), so the copies issue while an MMA runs.
        verdict: one sentence saying what was found.
    """

    found: bool
    start_address: Optional[int] = None
    end_address: Optional[int] = None
    n_instructions: int = 0
    async_copies: dict[str, int] = Field(default_factory=dict)
    mma: dict[str, int] = Field(default_factory=dict)
    ffma: int = 0
    sync_global_loads: int = 0
    barrier_addresses: list[int] = Field(default_factory=list)
    barriers_between: list[int] = Field(default_factory=list)
    adjacent_pairs_without_barrier: int = 0
    async_copy_waits: list[int] = Field(default_factory=list)
    mma_waits: list[int] = Field(default_factory=list)
    meets_product_rule: bool = False
    overlapped: bool = False
    verdict: str = ""



# --------------------------------------------------------------------------------------------------------------------
# SASS main loop


def find_main_loop(instrs: list[SassInstruction]) -> Optional[tuple[int, int]]:
    """(start, end) byte offsets of the main loop: the innermost backward-branch body holding an MMA; else the one
    holding most async copies; else the largest loop; None without a backward branch.

    A backward branch is a BRA/JMP whose target is below its own address (a branch to itself, the padding loop
    after EXIT, is not a loop).
    """
    loops = []
    for i in instrs:
        target = i.branch_target()
        if target is not None and target < i.address:
            loops.append((target, i.address))
    if not loops:
        return None

    def count(lo: int, hi: int, ops: tuple[str, ...]) -> int:
        return sum(1 for i in instrs if lo <= i.address <= hi and i.base in ops)

    with_mma = [lp for lp in loops if count(*lp, MMA_OPCODES)]
    if with_mma:
        return min(with_mma, key=lambda lp: lp[1] - lp[0])
    with_copies = [lp for lp in loops if count(*lp, ASYNC_COPY_OPCODES)]
    if with_copies:
        return max(with_copies, key=lambda lp: count(*lp, ASYNC_COPY_OPCODES))
    return max(loops, key=lambda lp: lp[1] - lp[0])


def _wait_count(instr: SassInstruction) -> Optional[int]:
    found = re.findall(r"0x([0-9a-fA-F]+)|\b(\d+)\b", instr.operands.split(",")[-1])
    if not found:
        return None
    hexa, dec = found[-1]
    return int(hexa, 16) if hexa else int(dec)


def _counts(instrs: list[SassInstruction]) -> dict[str, int]:
    return {op: sum(1 for x in instrs if x.base == op) for op in sorted({x.base for x in instrs})}


#: With ``scalar_fallback``: the compute of a loop without MMAs (CUDA cores), and the loads of one without async copies.
SCALAR_COMPUTE_OPCODES = ("FFMA", "DFMA", "HFMA2")
REGISTER_LOAD_OPCODES = ("LDG",)


def check_main_loop(instrs: list[SassInstruction], *, scalar_fallback: bool = False) -> MainLoopCheck:
    """Check the SASS main loop for a software pipeline (see :class:`MainLoopCheck` for every field).

    Rule (docs/measuring.md, "Software pipelining"): a pipelined main loop shows async loads (LDGSTS, or UTMALDG for TMA)
    and MMAs (HGMMA on Hopper; HMMA the slower path; FFMA means no tensor cores) with no barrier between them.
    Both that literal rule and whether copies overlap a still-running wgmma across a barrier are reported.

    ``scalar_fallback`` (CUDA C++ kernels, whose tiles may run on CUDA cores): when the loop holds no MMA, its FFMA /
    DFMA / HFMA2 count as the compute (reported in ``mma`` under their opcodes), and when it holds no async copy,
    LDG (a register-staged prefetch) counts as the load; the same walk then decides the verdict.
    """
    span = find_main_loop(instrs)
    if span is None:
        return MainLoopCheck(found=False, verdict="no loop (backward branch) in the SASS: nothing to pipeline")
    lo, hi = span
    body = [i for i in instrs if lo <= i.address <= hi]
    load_ops, compute_ops = ASYNC_COPY_OPCODES, MMA_OPCODES
    if scalar_fallback and not any(i.base in MMA_OPCODES for i in body):
        compute_ops = SCALAR_COMPUTE_OPCODES
        if not any(i.base in ASYNC_COPY_OPCODES for i in body):
            load_ops = REGISTER_LOAD_OPCODES
    copies = [i for i in body if i.base in load_ops]
    mmas = [i for i in body if i.base in compute_ops]
    bars = [i for i in body if i.base == "BAR"]
    copy_waits = [n for i in body if i.base == "DEPBAR" and "SB0" in i.operands and (n := _wait_count(i)) is not None]
    mma_waits = [n for i in body if i.opcode.startswith("WARPGROUP.DEPBAR") and (n := _wait_count(i)) is not None]

    # Walk the body in order over copies (L), MMAs (M) and barriers (B): neighbours L/M of different kinds are
    # "pairs"; a pair with a B between them is separated by that barrier.
    between: list[int] = []
    free_pairs = 0
    last_kind: Optional[str] = None
    pending_bars: list[int] = []
    for i in body:
        kind = "L" if i.base in load_ops else "M" if i.base in compute_ops else "B" if i.base == "BAR" else None
        if kind is None:
            continue
        if kind == "B":
            pending_bars.append(i.address)
            continue
        if last_kind is not None and last_kind != kind:
            if pending_bars:
                between.extend(pending_bars)
            else:
                free_pairs += 1
        last_kind, pending_bars = kind, []
    meets = bool(copies) and bool(mmas) and free_pairs > 0
    # wgmma groups left in flight by a WARPGROUP.DEPBAR placed before a separating barrier.
    in_flight_across = any(
        w.opcode.startswith("WARPGROUP.DEPBAR") and (_wait_count(w) or 0) > 0 and w.address < b
        and not any(m.address > w.address and m.address < b for m in mmas)
        for w in body for b in between
    )
    overlapped = meets or (bool(copies) and bool(mmas) and in_flight_across and any(m.base == "HGMMA" for m in mmas))
    ffma = sum(1 for i in body if i.base == "FFMA")
    ldg = sum(1 for i in body if i.base == "LDG")
    where = f"main loop 0x{lo:x}–0x{hi:x} ({len(body)} instructions)"
    if not mmas and not copies:
        verdict = (f"{where}: no MMA and no async copy" + (f"; {ffma} FFMA (no tensor cores)" if ffma else "")
                   + (f"; {ldg} LDG (loads through registers)" if ldg else ""))
    elif not mmas:
        verdict = f"{where}: async copies but no tensor-core MMA" + (f" ({ffma} FFMA: no tensor cores)" if ffma else "")
    elif not copies:
        verdict = (f"{where}: MMAs ({', '.join(f'{k} {v}' for k, v in _counts(mmas).items())}) but no async "
                   f"global->shared copy" + (f" ({ldg} LDG: synchronous loads)" if ldg else "") + ": not pipelined")
    elif meets:
        verdict = (f"{where}: pipelined — async copies and MMAs share the loop with no barrier between "
                   f"{free_pairs} neighbouring copy/MMA pair(s) (the software-pipelining rule holds)")
    elif overlapped:
        verdict = (f"{where}: async copies and HGMMA share the loop; a BAR at "
                   f"{', '.join(f'0x{a:x}' for a in sorted(set(between)))} separates them (the software-pipelining rule does "
                   f"not hold literally), but wgmma groups stay in flight across it (WARPGROUP.DEPBAR.LE gsb0, "
                   f"{max(mma_waits)}), so the copies issue while an MMA runs")
    else:
        verdict = (f"{where}: async copies and MMAs share the loop but a barrier separates every neighbouring pair "
                   f"(at {', '.join(f'0x{a:x}' for a in sorted(set(between)))}) with MMAs drained before it: "
                   f"copies and MMAs do not overlap")
    if compute_ops is not MMA_OPCODES and (mmas or copies):
        counted = [", ".join(f"{k} {v}" for k, v in _counts(group).items()) or "none" for group in (mmas, copies)]
        verdict += f" [no tensor cores: the compute counted is {counted[0]}, the loads {counted[1]}]"
    return MainLoopCheck(
        found=True, start_address=lo, end_address=hi, n_instructions=len(body), async_copies=_counts(copies),
        mma=_counts(mmas), ffma=ffma, sync_global_loads=ldg, barrier_addresses=[b.address for b in bars],
        barriers_between=sorted(set(between)), adjacent_pairs_without_barrier=free_pairs,
        async_copy_waits=copy_waits, mma_waits=mma_waits, meets_product_rule=meets, overlapped=overlapped,
        verdict=verdict,
    )
