"""Human output of ``inspect`` (one config, or the ``--all-configs`` table) and ``pipeline``: rich tables on
:data:`kernelpilot.cli.common.out`, from the result of one :mod:`kernelpilot.api` call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


from kernelpilot.backends.binary.models import StaticFailure, StaticReport, StaticSpace
from kernelpilot.cli.common import out, table


def no_worker_failure(results: list[Any]) -> bool:
    """False when a config's worker exited, crashed or hung (the kernel file misbehaved: the command exits 1);
    compile and resource failures are results, not faults of the command."""
    return not any(isinstance(r, StaticFailure) and r.stage == "worker" for r in results)


def _fmt_widths(widths: dict[Any, int]) -> str:
    return " ".join(f"{k}B×{v}" for k, v in sorted(widths.items(), key=lambda kv: int(kv[0]))) or "—"


def _occ(r: StaticReport) -> tuple[str, str]:
    if r.occupancy is None:
        return "—", "—"
    return f"{r.occupancy.occupancy_pct:.1f}", r.occupancy.limiter


def _config_text(config: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def static(r: StaticReport) -> None:
    """``inspect``: one config's compile facts (threads, registers, spills, shared memory, occupancy, load/store
    widths, SASS size) and its static SASS instruction mix."""
    occ_pct, limiter = _occ(r)
    out.print(f"[bold]{r.kernel_name}[/] ({Path(r.kernel_file).name}) for {r.arch} — Triton {r.triton_version}, "
              f"compiled in {r.compile_s:.2f} s")
    out.print(f"config {_config_text(r.config)}; shape {r.shape}; grid {r.grid}")
    t = table("quantity", "value")
    rows = [
        ("threads per block", f"{r.threads_per_block} ({r.num_warps} warps)"),
        ("max threads per block", (f"{r.max_threads_per_block} (what {r.registers_per_thread} registers/thread "
                                   f"allow)" if r.max_threads_per_block is not None else "— (arch limits unknown)")),
        ("num_stages", str(r.num_stages)),
        ("registers / thread", str(r.registers_per_thread)),
        ("spills", (f"{r.n_spills} (local {r.local_mem_bytes_per_thread} B/thread; spill stores/loads "
                    f"{r.spill_stores_bytes}/{r.spill_loads_bytes} B)")),
        ("shared memory / block", f"{r.shared_mem_bytes} B (limit {r.shared_mem_limit_bytes} B)"),
        ("theoretical occupancy", (f"{occ_pct} % (limiter {limiter}"
                                   + (f", {r.occupancy.blocks_per_sm} blocks/SM)" if r.occupancy else ")"))),
        ("tensor cores", "yes" if r.uses_tensor_cores else "no"),
        ("global load widths", _fmt_widths(r.global_load_widths_bytes)),
        ("async copy widths", _fmt_widths(r.async_copy_widths_bytes)),
        ("global store widths", _fmt_widths(r.global_store_widths_bytes)),
        ("SASS instructions", str(r.n_instructions)),
    ]
    for k, v in rows:
        t.add_row(k, v)
    out.print(t)
    mix = table("SASS group", "count (static)")
    for k, v in r.instruction_mix.items():
        if v:
            mix.add_row(k, str(v))
    out.print(mix)
    for note in r.notes:
        out.print(f"[dim]note:[/] {note}")


#: Short names of occupancy limiters and failure reasons for the ``--all-configs`` table (100 columns).
_LIMITER_ABBR = {"registers": "regs", "shared_mem": "smem", "warps": "warps", "blocks": "blocks"}


def _failure_code(r: StaticFailure) -> str:
    """A short status for a failed config: ``OOR smem``, ``OOR threads``, ``OOR regs``, ``rejected``, ``compile``."""
    if r.stage == "resources":
        msg = r.message or ""
        what = "smem" if "shared memory" in msg else "threads" if "threads" in msg else "regs"
        return f"OOR {what}"
    if r.stage == "capture":
        return "rejected"
    if r.stage == "worker":
        return r.failure or "worker"
    return r.stage


def space(space: StaticSpace) -> None:
    """The ``--all-configs`` table: one row per config, narrow enough for 100 columns (cells wrap on a narrower
    console, never cut); failures listed below it, each in full."""
    from rich import box

    names = list(space.results[0].config) if space.results else []
    rows_values = [",".join(str(r.config.get(n)) for n in names) for r in space.results]
    t = table(title=f"{Path(space.kernel_file).name} for {space.arch}", box=box.SIMPLE_HEAD, pad_edge=False,
              collapse_padding=True)
    # The config column folds last (values joined by commas, named in the legend below); the rest wrap first.
    t.add_column("config", overflow="fold", min_width=max([len("config"), *map(len, rows_values)]))
    for header in ("regs", "spill", "smem B", "max thr", "occ %", "limit", "hg/hm/ff", "LDG widths", "status"):
        t.add_column(header, overflow="fold")
    failures = []
    for values, r in zip(rows_values, space.results):
        if r.status == "ok":
            occ_pct, limiter = _occ(r)
            mix = r.instruction_mix
            t.add_row(values, str(r.registers_per_thread), str(r.n_spills), str(r.shared_mem_bytes),
                      str(r.max_threads_per_block or "—"), occ_pct, _LIMITER_ABBR.get(limiter, limiter),
                      f"{mix.get('HGMMA', 0)}/{mix.get('HMMA', 0)}/{mix.get('FFMA', 0)}",
                      _fmt_widths(r.global_load_widths_bytes), "[green]ok[/]")
        else:
            code = _failure_code(r)
            failures.append((values, r))
            t.add_row(values, str(r.registers_per_thread or "—"), "—", str(r.shared_mem_bytes or "—"), "—", "—",
                      "—", "—", "—", f"[red]{code}[/]")
    out.print(t)
    for line in (f"config = {','.join(names)}",
                 "spill = local memory in 4-byte words; max thr = largest block the registers allow",
                 "hg/hm/ff = HGMMA/HMMA/FFMA instructions in the SASS; limit = occupancy limiter",
                 "OOR = OutOfResources (Triton raises it at load); rejected = run_kernel refused the config"):
        out.print(f"[dim]{line}[/]")
    if failures:
        out.print(f"[bold]failed configs[/] ({','.join(names)}):")
        for values, r in failures:
            first = r.message.splitlines()[0] if r.message else ""
            out.print(f"  {values}: {r.stage} {r.error_type}: {first}", soft_wrap=False, markup=False)  # wrapped
    what = (f"a sample of {space.n_inspected} of {space.n_configs_total} configs (seed {space.sample_seed}; "
            f"--limit)" if space.sampled else f"all {space.n_inspected} configs")
    counts: dict[str, int] = {}
    for _, r in failures:
        code = _failure_code(r)
        counts[code] = counts.get(code, 0) + 1
    detail = f" ({', '.join(f'{n} {code}' for code, n in sorted(counts.items()))})" if counts else ""
    out.print(f"inspected {what}:")
    out.print(f"  {space.n_ok} ok, {space.n_failed} failed{detail}; {space.max_workers} processes, "
              f"{space.wall_s:.1f} s")


def pipelines(result: dict[str, Any]) -> None:
    """``pipeline``: one table per config (ratio, shared memory per stage, cliffs, advice); a failed config in one
    line."""
    for r in result["reports"]:
        if isinstance(r, StaticFailure):
            out.print(f"[bold]{_config_text(r.config)}[/]: [red]{r.stage} failed[/] {r.error_type}: "
                      f"{r.message.splitlines()[0] if r.message else ''}")
            continue
        out.print(f"[bold]{_config_text(r.config)}[/]  ({r.operand_dtype}, {r.bytes_per_element} B/element, {r.arch})")
        t = table("quantity", "value")
        t.add_row("compute/load ratio", f"{r.compute_load_ratio:.4g} FLOP/B "
                  f"(2·{r.block_m}·{r.block_n}·{r.block_k} / {r.bytes_per_tile} B)")
        t.add_row("shared / stage", f"{r.stage_bytes} B")
        t.add_row(f"shared at S={r.num_stages}", f"model {r.shared_model_bytes} B, compiled {r.compiled_shared_bytes} B")
        t.add_row("largest S under limit", f"{r.max_stages_under_limit} ({r.shared_limit_bytes} B/block)")
        row = next((s for s in r.stages if s.stages == r.num_stages), None)
        t.add_row("blocks/SM at S", f"{row.blocks_per_sm} ({row.occupancy_pct:.1f} %, {row.limiter})" if row else "—")
        t.add_row("occupancy cliffs (S)", ", ".join(map(str, r.occupancy_cliffs)) or "none")
        t.add_row("next cliff", str(r.next_cliff_stages) if r.next_cliff_stages else "none up to the limit")
        t.add_row("rule", r.rule)
        t.add_row("recommendation", r.recommendation)
        t.add_row("num_stages to measure", ", ".join(map(str, r.stages_to_measure)))
        if r.main_loop is not None:
            t.add_row("SASS main loop", r.main_loop.verdict)
        if any("compiled by nvcc" in n for n in r.notes):  # a CUDA .cu kernel: its own lines (profile/pipeline_cuda.py)
            for note in r.notes[2:]:
                t.add_row("CUDA", note)
        out.print(t)
