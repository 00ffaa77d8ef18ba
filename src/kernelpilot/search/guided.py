"""The next change: from the verdict, one tunable and a direction, with the reason and the expected movement.

This is the loop's ``guided`` strategy: a one-variable move away from the incumbent config, chosen by rules that
map a bottleneck to the tunables that relieve it (PRODUCT.md "Numeric patterns"; the seed skills' playbooks):

| evidence | moves, in order |
|---|---|
| small grid (waves per SM < 1) | smaller tiles (more blocks), fewer warps |
| long-scoreboard latency (top stall, ratio > 3) when latency/occupancy-bound | more stages, larger BLOCK_K, larger tiles, more warps |
| occupancy limited by registers | smaller tiles, fewer stages, fewer warps |
| occupancy limited by shared memory | fewer stages, smaller tiles |
| occupancy limited by blocks per SM | larger tiles, more warps |
| memory-bound with L1 or L2 the busiest unit (re-reads from cache) | larger tiles, L2 grouping, larger BLOCK_K, more stages |
| memory-bound on DRAM, few bytes in flight (DRAM < 80 %) | larger tiles, more warps, more stages |
| memory-bound at the DRAM ceiling | larger tiles, more warps (little left to gain) |
| latency-bound otherwise | more warps, larger tiles |
| compute-bound | larger M/N tiles (more reuse), more warps, more stages |
| balanced | more stages, larger L2 grouping, larger tiles, more warps |
| no profile (interpreter, ``--no-profile``) | exploration: tiles up, warps up, stages up, then down |

Tunables get a role from their name: ``BLOCK_K*`` → tile_k, other ``BLOCK*``/``TILE*`` → tile, ``num_warps`` →
warps, ``num_stages`` → stages, ``GROUP*`` → group, anything else → other. After the rules, every remaining
one-step neighbour is offered as exploration, so the loop only stops when the neighbourhood is exhausted.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from pydantic import BaseModel

Role = str
UP, DOWN = "up", "down"
LONG_SCOREBOARD_RATIO = 3.0  # PRODUCT.md numeric pattern "long-scoreboard latency": stall ratio > 3


class Move(BaseModel):
    """One proposed change: ``tunable`` from ``old`` to ``new``, with the rule that chose it and what should move."""

    tunable: str
    old: Any
    new: Any
    direction: str
    rule: str
    why: str
    expected_metric: str
    expected: str

    def apply(self, config: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``config`` with this move applied."""
        return {**config, self.tunable: self.new}


def config_key(config: dict[str, Any]) -> str:
    """A canonical string for a config (sorted JSON), used to know which configs were tried."""
    return json.dumps(config, sort_keys=True, default=str)


def tunable_role(name: str) -> Role:
    """The role a tunable plays, from its name (see the module docstring)."""
    upper = name.upper()
    if upper == "NUM_WARPS":
        return "warps"
    if upper == "NUM_STAGES":
        return "stages"
    if upper.startswith(("BLOCK_K", "BLOCK_SIZE_K", "TILE_K")):
        return "tile_k"
    if upper.startswith(("BLOCK", "TILE")):
        return "tile"
    if upper.startswith("GROUP"):
        return "group"
    return "other"


def neighbour(values: list[Any], current: Any, direction: str) -> Any | None:
    """The next candidate above/below ``current`` (numeric order when all are numbers, else list order)."""
    ordered = sorted(values) if all(isinstance(v, (int, float)) for v in values) else list(values)
    i = ordered.index(current)
    j = i + 1 if direction == UP else i - 1
    return ordered[j] if 0 <= j < len(ordered) else None


def _get(obj: Any, name: str) -> Any:
    return getattr(obj, name, None) if obj is not None else None


def _top_stall(metrics: Any) -> str | None:
    stalls = _get(metrics, "top_stalls") or []
    return getattr(stalls[0], "reason", None) if stalls else None


def _top_stall_ratio(metrics: Any) -> float:
    stalls = _get(metrics, "top_stalls") or []
    return float(getattr(stalls[0], "ratio", 0.0) or 0.0) if stalls else 0.0


def _plan(verdict: Any, metrics: Any) -> tuple[str, list[tuple[Role, str]], str, str, str]:
    """(rule, [(role, direction)], why, expected metric, expected movement) for the evidence at hand."""
    if verdict is None:
        return ("exploration (no profile)", [("tile", UP), ("warps", UP), ("stages", UP), ("group", UP),
                                             ("tile_k", UP), ("tile", DOWN), ("warps", DOWN), ("stages", DOWN)],
                "no Nsight Compute profile for this version, so no bottleneck evidence; stepping through neighbours",
                "median time", "unknown without a profile; accepted only if faster beyond the spread")
    bound = _get(verdict, "bound")
    waves = _get(metrics, "waves_per_sm")
    dram = _get(metrics, "dram_pct")
    if bound == "small-grid" or (waves is not None and waves < 1.0):
        w = waves if waves is not None else float("nan")
        return ("small grid: waves_per_sm < 1", [("tile", DOWN), ("warps", DOWN)],
                f"only {w:.2f} waves per SM: part of the GPU idles; smaller tiles give more blocks",
                "waves_per_sm", f"{w:.2f} → about {2 * w:.2f} (twice the blocks); duration down if SMs were idle")
    stall, stall_ratio = _top_stall(metrics), _top_stall_ratio(metrics)
    if bound in ("latency", "occupancy") and stall and "long_scoreboard" in stall and stall_ratio > LONG_SCOREBOARD_RATIO:
        return ("long-scoreboard latency", [("stages", UP), ("tile_k", UP), ("tile", UP), ("warps", UP)],
                f"warps wait on global memory (long-scoreboard stall ratio {stall_ratio:.1f} > {LONG_SCOREBOARD_RATIO:g}, "
                "the top stall): deeper software pipelining keeps more loads in flight without needing more warps",
                "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
                f"{stall_ratio:.1f} → lower; compute and memory SOL % up; duration down")
    if _get(verdict, "occupancy_bound"):
        limiter = _get(verdict, "occupancy_limiter") or _get(metrics, "occupancy_limiter")
        theo = _get(metrics, "theoretical_occupancy_pct")
        ach = _get(metrics, "achieved_occupancy_pct")
        exp = f"theoretical occupancy {theo or 0:.0f} % and achieved {ach or 0:.0f} % should rise"
        if limiter == "registers":
            return ("occupancy limited by registers", [("tile", DOWN), ("stages", DOWN), ("warps", DOWN)],
                    "registers per thread cap the resident warps; smaller tiles need fewer registers",
                    "theoretical_occupancy_pct", exp)
        if limiter == "shared_mem":
            return ("occupancy limited by shared memory", [("stages", DOWN), ("tile", DOWN), ("tile_k", DOWN)],
                    "shared memory per block caps the resident blocks; fewer stages or smaller tiles free it",
                    "theoretical_occupancy_pct", exp)
        if limiter == "blocks":
            return ("occupancy limited by blocks per SM", [("tile", UP), ("warps", UP)],
                    "blocks are too small to fill an SM within the 32-blocks limit; larger blocks do",
                    "theoretical_occupancy_pct", exp)
        return ("low achieved occupancy", [("warps", UP), ("tile", DOWN)],
                f"achieved occupancy {ach or 0:.0f} % is far under theoretical {theo or 0:.0f} %",
                "achieved_occupancy_pct", exp)
    if bound == "memory":
        unit = _get(verdict, "memory_unit")
        if unit in ("L1", "L2"):
            mem = _get(metrics, "memory_sol_pct") or 0.0
            return (f"memory-bound on {unit}", [("tile", UP), ("group", UP), ("tile_k", UP), ("stages", UP)],
                    f"{unit} is the busiest memory unit ({mem:.0f} % of peak) while DRAM runs at "
                    f"{dram if dram is not None else float('nan'):.0f} %: tiles re-read data from cache; larger tiles "
                    "reuse each loaded byte more",
                    "memory_sol_pct", f"{unit} throughput per unit of work down; duration down")
        if dram is not None and dram >= 80:
            return ("memory-bound at the DRAM ceiling", [("tile", UP), ("warps", UP), ("stages", UP)],
                    f"DRAM throughput is {dram:.0f} % of peak: little left to gain from the same bytes",
                    "dram_pct", f"{dram:.0f} % → at most ~90 %: duration −{max(0.0, 1 - dram / 90) * 100:.0f} % at best")
        d = dram if dram is not None else float("nan")
        return ("memory-bound with few bytes in flight", [("tile", UP), ("warps", UP), ("stages", UP)],
                f"memory is the busiest unit but DRAM runs at {d:.0f} % of peak: more bytes in flight per SM",
                "dram_pct", f"{d:.0f} % → toward 80 %: duration −{max(0.0, 1 - d / 80) * 100:.0f} % at best")
    if bound in ("latency", "occupancy"):
        return ("latency-bound", [("warps", UP), ("tile", UP), ("stages", UP)],
                f"compute and memory both under 60 % of peak (top stall: {stall or 'unknown'}): more parallel work",
                "memory_sol_pct", "both SOL % up; duration down")
    if bound == "compute":
        return ("compute-bound", [("tile", UP), ("warps", UP), ("stages", UP), ("tile_k", UP)],
                "the SM pipes are the busiest unit; larger tiles raise reuse per loaded byte",
                "compute_sol_pct", "duration down as issue efficiency improves; compute SOL stays high")
    return ("balanced", [("stages", UP), ("group", UP), ("tile", UP), ("warps", UP), ("tile_k", UP)],
            "compute and memory are within 10 points: overlap loads with math and improve L2 reuse",
            "duration", "both SOL % up, duration down a few %")


def propose_moves(config: dict[str, Any], tunables: dict[str, list[Any]], tried: Iterable[str], *,
                  verdict: Any = None, metrics: Any = None) -> list[Move]:
    """Ranked one-variable moves from ``config`` to configs not yet ``tried`` (keys from :func:`config_key`).

    Args:
        config: the incumbent config.
        tunables: the kernel file's TUNABLES.
        tried: config keys already evaluated (accepted, rejected or failed).
        verdict / metrics: the incumbent's :class:`~kernelpilot.profile.verdict.Verdict` and
            :class:`~kernelpilot.profile.metrics.KernelMetrics`, or None without a profile.

    Returns:
        Moves, most promising first; rule-driven moves, then exploration of the remaining neighbours. Empty when
        every one-step neighbour was tried.
    """
    tried = set(tried)
    rule, steps, why, metric, expected = _plan(verdict, metrics)
    moves: list[Move] = []
    seen: set[str] = set()

    def add(name: str, direction: str, rule_: str, why_: str, metric_: str, expected_: str) -> None:
        new = neighbour(tunables[name], config[name], direction)
        if new is None:
            return
        key = config_key({**config, name: new})
        if key in tried or key in seen:
            return
        seen.add(key)
        moves.append(Move(tunable=name, old=config[name], new=new, direction=direction, rule=rule_, why=why_,
                          expected_metric=metric_, expected=expected_))

    for role, direction in steps:
        for name in tunables:
            if tunable_role(name) == role:
                add(name, direction, rule, why, metric, expected)
    for name in tunables:
        for direction in (UP, DOWN):
            add(name, direction, f"exploration after '{rule}'",
                "the rules' moves were tried; stepping to an untried neighbour", "median time",
                "unknown; accepted only if faster beyond the spread")
    return moves
