"""``kernelpilot export`` of a dispatch table (``dispatch.json`` of a ``tune --workload`` run) for a Triton kernel:
a workload bundle (``kernelpilot-bundle/2``, kind ``triton``) that serves every shape inside the buckets' ranges.

Per bucket, the export runs its config at sampled shapes inside the bucket's ranges (the measured shapes, both
corners, each key at its ends, middle, a multiple of 16 and a value that is not, with the other keys in the middle),
each in the compile-mode isolated worker that exports single-config bundles
(:func:`kernelpilot.bundle.worker._bundle_in_worker`: capture, Triton's binder, compile for the target, coverage
observed under the interpreter). From what those launches were, it fits (:func:`kernelpilot.bundle.rules.fit`) how
every scalar parameter, compile-time constant, grid dimension and input size follows from the dispatch keys, checks
the fit at every sample, adds samples at each fitted threshold (``N <= 1024``: N = 1024 and 1025) and fits again
until the samples on both sides of every threshold confirm it (the switch of a monotone flag is then pinned to one
step); a value no rule explains refuses the bucket by name. Last, from the fitted rules it predicts the
specialization of every combination of the sampled key values and samples one shape for each not yet compiled. Binaries are kept one per (bucket, specialization): the distinct
sets of constants and divisibility hints Triton compiled at the samples.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from kernelpilot.bundle.reader import FORMAT_V2, BundleError, file_sha256
from kernelpilot.bundle.rules import fit, rule_text
from kernelpilot.childproc import usable_cpus
from kernelpilot.errors import KernelpilotError
from kernelpilot.facts import utc_now_iso

__all__ = ["MAX_SPEC_SAMPLES", "MAX_WORKERS", "THRESHOLD_ROUNDS", "export_triton_workload", "rules_table", "sample_shapes"]

#: Rounds of samples at a fitted threshold ``c`` (at ``c`` and ``c + 1``) before export gives up: a round that
#: confirms the rule adds nothing and ends the loop; one that contradicts it refits and samples the new threshold.
THRESHOLD_ROUNDS = 6
#: At most this many shapes per bucket are added to compile specializations the first samples did not show.
MAX_SPEC_SAMPLES = 32
#: At most this many export workers (one per 16 sampled shapes, half the CPU cores).
MAX_WORKERS = 4


def _key_values(lo: int, hi: int) -> list[int]:
    mid = (lo + hi) // 2
    vals = [lo, hi, mid, min(lo + 1, hi)]
    m16 = -(-(lo + 1) // 16) * 16
    if m16 <= hi:
        vals.append(m16)
    odd = next((v for v in (mid + 1, mid - 1, mid + 3, lo + 1, hi - 1) if lo <= v <= hi and v % 16), None)
    if odd is not None:
        vals.append(odd)
    return list(dict.fromkeys(vals))


def sample_shapes(ranges: dict[str, Any], keys: list[str], base: dict[str, Any], measured: list[dict[str, Any]],
                  extra: list[dict[str, int]] | None = None) -> list[dict[str, Any]]:
    """The shapes a bucket's config is run at during export (full shapes: ``base``'s other keys kept).

    Args:
        ranges: key -> (lo, hi) inclusive. keys: the dispatch keys. base: a measured shape (its non-key values).
        measured: the bucket's measured shapes (always sampled). extra: more key values (threshold samples).

    Returns:
        Distinct shapes in a fixed order: the measured ones, the middle, both corners, then each key at each of
        its sampled values (its ends, the middle, the next value, a multiple of 16, one that is not) with the others
        in the middle, then ``extra``.
    """
    mid = {k: (int(ranges[k][0]) + int(ranges[k][1])) // 2 for k in keys}
    shapes = [dict(s) for s in measured] + [{**base, **mid}]
    shapes += [{**base, **{k: int(ranges[k][0]) for k in keys}}, {**base, **{k: int(ranges[k][1]) for k in keys}}]
    for k in keys:
        for v in _key_values(int(ranges[k][0]), int(ranges[k][1])):
            shapes.append({**base, **mid, k: v})
    for e in extra or []:
        shapes.append({**base, **mid, **e})
    seen, out = set(), []
    for s in shapes:
        ident = json.dumps(s, sort_keys=True, default=str)
        if ident not in seen:
            seen.add(ident)
            out.append(s)
    return out


def _run(kernel: Path, pairs: list[tuple[dict[str, Any], dict[str, Any]]], target: str, timeout_s: float
         ) -> list[dict[str, Any]]:
    from kernelpilot.profile.static import config_tasks, isolated_workers

    def failed(task: dict[str, Any], exc: KernelpilotError) -> dict[str, Any]:
        return {"failure": {"stage": "worker", "error_type": type(exc).__name__, "message": exc.message,
                            "hint": exc.hint}}

    # Parallel workers where the machine has cores to spare (each holds one sampled shape's CPU inputs at a time).
    workers = max(1, min(MAX_WORKERS, usable_cpus() // 2, -(-len(pairs) // 16)))
    with isolated_workers(kernel, workers, timeout_s) as (iso, meta):
        tasks = [config_tasks(kernel, [c], s, target, meta=meta)[0] for c, s in pairs]
        results: list[Any] = [None] * len(tasks)
        for i, r in iso.map("kernelpilot.bundle.worker:_bundle_in_worker", tasks, failed):
            results[i] = r
    for task, r in zip(tasks, results):
        if "failure" in r:
            f = r["failure"]
            raise BundleError(f"{kernel.name} {task['config']} at {task['shape']} for {target}: {f.get('stage')}: "
                              f"{f.get('error_type')}: {f.get('message')}", f.get("hint") or "")
    return results


def _fit_or_refuse(what: str, bucket: str, envs: list[dict[str, int]], values: list[Any], keys: list[str],
                   divisors: list[int]) -> dict[str, Any]:
    rule = fit(envs, values, keys, divisors)
    if rule is None:
        seen = ", ".join(f"{e}: {v!r}" for e, v in list(zip(envs, values))[:8])
        raise BundleError(f"bucket {bucket!r}: {what} follows no shape rule export knows over {keys} ({seen})",
                          "split the bucket's range, or export single shapes (kernelpilot export KERNEL --shapes)")
    return rule


def _key_inputs(keys: list[str], samples: list[dict[str, Any]], entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Which input carries each dispatch key: a scalar input equal to it at every sample (one of its own name
    first), else a tensor's size along a dimension. Raises BundleError when none does."""
    out: dict[str, Any] = {}
    names = list(entries[0]["inputs"])
    for k in keys:
        scalars = sorted((n for n in names if not isinstance(entries[0]["inputs"][n], dict)), key=lambda n: n != k)
        found = next(({"input": n, "dim": None} for n in scalars
                      if all(e["inputs"].get(n) == s[k] and not isinstance(e["inputs"].get(n), bool)
                             for s, e in zip(samples, entries))), None)
        if found is None:
            for n in names:
                spec = entries[0]["inputs"][n]
                if not isinstance(spec, dict):
                    continue
                for d in range(len(spec["shape"])):
                    if all(isinstance(e["inputs"].get(n), dict) and len(e["inputs"][n]["shape"]) > d
                           and e["inputs"][n]["shape"][d] == s[k] for s, e in zip(samples, entries)):
                        found = {"input": n, "dim": d}
                        break
                if found:
                    break
        if found is None:
            raise BundleError(f"dispatch key {k} is carried by no run_kernel input (no scalar input equals it and no "
                              f"tensor has it as a size at every sampled shape)",
                              "dispatch on keys that run_kernel receives (a scalar input or a tensor's size)")
        out[k] = found
    return out


def _params(entry: dict[str, Any]) -> dict[str, Any]:
    vals = dict(entry["constexprs"])
    for a in entry["args"]:
        if a["kind"] == "scalar":
            vals[a["param"]] = a["value"]
    return vals


def _spec_key(entry: dict[str, Any]) -> str:
    args = [(a["param"], a["type"], a["kind"], a.get("input"), a.get("offset_bytes", 0), a.get("divisibility", 1))
            for a in entry["args"]]
    return json.dumps([entry["constexprs"], args], sort_keys=True, default=str)


def _coverage(name: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The bucket's coverage record: per output, the most a program wrote along each dimension at any sample, or
    None when it always wrote the whole dimension; outputs where ``min(cap, extent)`` does not give what was seen at
    every sample, or that a sample could not check, are ``unchecked`` with the reason."""
    covs = [e["coverage"] for e in entries]
    if not all(c.get("observed") for c in covs):
        why = next(c.get("why", "") for c in covs if not c.get("observed"))
        return {"observed": False, "outputs": [], "unchecked": {}, "why": why}
    unchecked: dict[str, str] = {}
    for c in covs:
        unchecked.update(c.get("unchecked") or {})
    names = {o["input"] for c in covs for o in c["outputs"]} - set(unchecked)
    outputs = []
    for n in sorted(names):
        tiles = []
        for c, e in zip(covs, entries):
            hit = next((o for o in c["outputs"] if o["input"] == n), None)
            if hit is not None:
                tiles.append((hit["tile"], e["inputs"][n]["shape"]))
        caps: list[int | None] = []
        for d in range(len(tiles[0][1])):
            if all(t[d] == s[d] for t, s in tiles):
                caps.append(None)
            else:
                cap = max(t[d] for t, _ in tiles)
                caps.append(cap if all(t[d] == min(cap, s[d]) for t, s in tiles) else -1)
        if -1 in caps:
            unchecked[n] = (f"bucket {name!r}: the tile a program writes of `{n}` is neither the whole dimension nor "
                            f"a fixed size at the sampled shapes")
        else:
            outputs.append({"input": n, "cap": caps})
    return {"observed": True, "outputs": outputs, "unchecked": unchecked, "why": ""}


def _fit_bucket(b: Any, keys: list[str], samples: list[dict[str, Any]], results: list[dict[str, Any]]
                ) -> dict[str, Any]:
    """The bucket's rules from its samples (see the module docstring). Raises BundleError as :func:`_fit_or_refuse`."""
    entries = [r["entry"] for r in results]
    envs = [{k: int(s[k]) for k in keys} for s in samples]
    divisors = [v for v in b.config.values() if isinstance(v, int) and not isinstance(v, bool)]
    inputs: dict[str, Any] = {}
    for name, spec in entries[0]["inputs"].items():
        vals = [e["inputs"].get(name) for e in entries]
        if isinstance(spec, dict):
            dtypes = {v["dtype"] for v in vals if isinstance(v, dict)}
            ndims = {len(v["shape"]) for v in vals if isinstance(v, dict)}
            if len(dtypes) != 1 or len(ndims) != 1 or not all(isinstance(v, dict) for v in vals):
                raise BundleError(f"bucket {b.name!r}: input `{name}` changes dtype or rank inside the bucket "
                                  f"({sorted(dtypes)}, ranks {sorted(ndims)})", "one dtype and rank per bucket")
            inputs[name] = {"kind": "tensor", "dtype": dtypes.pop(),
                            "shape": [_fit_or_refuse(f"size {d} of `{name}`", b.name, envs,
                                                     [v["shape"][d] for v in vals], keys, divisors)
                                      for d in range(len(spec["shape"]))],
                            "stride": [_fit_or_refuse(f"stride {d} of `{name}`", b.name, envs,
                                                      [v["stride"][d] for v in vals], keys, divisors)
                                       for d in range(len(spec["shape"]))]}
        else:
            inputs[name] = {"kind": "scalar", "value": _fit_or_refuse(f"input `{name}`", b.name, envs, vals, keys,
                                                                      divisors)}
    per = [_params(e) for e in entries]
    names = list(dict.fromkeys(n for p in per for n in p))
    params = {}
    for n in names:
        if not all(n in p for p in per):
            raise BundleError(f"bucket {b.name!r}: kernel parameter {n} is a pointer at some sampled shapes and a "
                              f"value at others", "export single shapes")
        params[n] = _fit_or_refuse(f"kernel parameter {n}", b.name, envs, [p[n] for p in per], keys, divisors)
    pointers = {json.dumps([(a["param"], a["input"], a.get("offset_bytes", 0)) for a in e["args"]
                            if a["kind"] == "tensor"]) for e in entries}
    if len(pointers) != 1:
        raise BundleError(f"bucket {b.name!r}: the kernel's pointers point into different inputs or offsets at "
                          f"different shapes", "export single shapes")
    grids = [list(e["grid"]) for e in entries]
    grid = [_fit_or_refuse(f"grid dimension {'xyz'[d]}", b.name, envs, [g[d] for g in grids], keys,
                           divisors + [v for v in entries[0]["constexprs"].values()
                                       if isinstance(v, int) and not isinstance(v, bool)])
            for d in range(3)]
    return {"name": b.name, "ranges": {k: [int(b.ranges[k][0]), int(b.ranges[k][1])] for k in keys},
            "config": dict(b.config), "samples": [dict(s) for s in samples], "inputs": inputs, "params": params,
            "grid": grid, "coverage": _coverage(b.name, entries), "entries": []}


def _thresholds(rules: dict[str, Any], ranges: dict[str, Any], done: list[dict[str, Any]]) -> list[dict[str, int]]:
    out = []
    for r in rules.values():
        (form, arg), = r.items()
        if form in ("le", "gt"):
            k, c = arg
            for v in (int(c), int(c) + 1):
                if ranges[k][0] <= v <= ranges[k][1] and all(int(s[k]) != v for s in done):
                    out.append({k: v})
    return out


def _observed_spec(entry: dict[str, Any], runtime: set[str]) -> str:
    """The specialization an entry was compiled for: per runtime int parameter Triton's (type, divisibility) or
    ("constexpr", 1), per declared constant its value."""
    spec: dict[str, Any] = {}
    for p, v in entry["constexprs"].items():
        spec[p] = ["constexpr", 1] if p in runtime else ["value", v]
    for a in entry["args"]:
        if a["kind"] == "scalar":
            spec[a["param"]] = [a["type"], int(a.get("divisibility", 1))]
    return json.dumps(spec, sort_keys=True, default=str)


def _missing_specializations(bucket: dict[str, Any], keys: list[str], base: dict[str, Any],
                             samples: list[dict[str, Any]], results: list[dict[str, Any]],
                             limit: int = MAX_SPEC_SAMPLES) -> list[dict[str, Any]]:
    """Shapes to sample so that every specialization the cross product of the sampled key values predicts (from
    the fitted rules: Triton's spec of each runtime int, the value of each constant) has been compiled once:
    e.g. M == 1 together with a single-tile N, when the first samples showed each only with the other keys in
    the middle. At most ``limit`` shapes, first found first."""
    import itertools

    from kernelpilot.bundle.rules import evaluate, triton_spec

    runtime = {a["param"] for r in results for a in r["entry"]["args"] if a["kind"] == "scalar"}
    seen = {_observed_spec(r["entry"], runtime) for r in results}
    values = [sorted({int(s[k]) for s in samples}) for k in keys]
    out: list[dict[str, Any]] = []
    for combo in itertools.product(*values):
        env = dict(zip(keys, combo))
        spec: dict[str, Any] = {}
        for p, rule in bucket["params"].items():
            v = evaluate(rule, env)
            if p in runtime and isinstance(v, int) and not isinstance(v, bool):
                spec[p] = list(triton_spec(v))
            else:
                spec[p] = ["value", v]
        ident = json.dumps(spec, sort_keys=True, default=str)
        if ident not in seen:
            seen.add(ident)
            out.append({**base, **env})
            if len(out) >= limit:
                break
    return out


def export_triton_workload(kernel: Path, dispatch: Any, dispatch_sha256: str, out: Path, *, target: str,
                           cc: tuple[int, int], meta: dict[str, Any], timeout_s: float = 300.0) -> dict[str, Any]:
    """Write the cubins of a Triton workload bundle of ``dispatch`` into ``out`` (empty or absent) and return its
    manifest body; :func:`kernelpilot.bundle.export.export_workload` adds ``min_driver_cuda`` and the identity,
    verifies it and writes ``manifest.json``.

    Args:
        kernel: the kernel file (its sha256 already checked against the table's). dispatch: the
            :class:`kernelpilot.dispatch.Dispatch`. dispatch_sha256: the table file's ``sha256``.
        target: ``sm_90``; cc: its compute capability. meta: ``source_sha256``, ``run_kernel_params`` and
            ``nvcc_version`` read by the caller. timeout_s: per sampled shape, in the worker.

    Returns:
        The manifest body (a dict without ``min_driver_cuda`` and ``bundle_id``).

    Raises:
        BundleError: a sample that cannot be bundled or compiled (named), a value no shape rule explains, a key no
            input carries. ContractError: a bad kernel file.
    """
    keys = list(dispatch.keys)
    plans = []
    for b in dispatch.buckets:
        base = dict(b.measured[0].shape)
        others = {json.dumps({k: v for k, v in m.shape.items() if k not in keys}, sort_keys=True) for m in b.measured}
        if len(others) != 1:
            raise BundleError(f"bucket {b.name!r} measures shapes that differ outside the dispatch keys {keys}: "
                              f"{sorted(others)}", "a bucket serves one value of every non-key shape entry")
        plans.append((b, base, sample_shapes(b.ranges, keys, base, [dict(m.shape) for m in b.measured])))
    pairs = [(dict(b.config), s) for b, _, ss in plans for s in ss]
    results = _run(kernel, pairs, target, timeout_s)
    state, i = [], 0
    for b, base, ss in plans:
        state.append([b, base, ss, results[i:i + len(ss)]])
        i += len(ss)
    fitted: list[Any] = [None] * len(state)
    for _round in range(THRESHOLD_ROUNDS + 1):
        todo = []
        for n, (b, base, ss, rs) in enumerate(state):
            fitted[n] = (_fit_bucket(b, keys, ss, rs), ss, rs)
            more = [s for s in sample_shapes(b.ranges, keys, base, [], _thresholds(fitted[n][0]["params"], b.ranges,
                                                                                  ss)) if s not in ss]
            todo += [(n, s) for s in more]
        if not todo:
            break
        if _round == THRESHOLD_ROUNDS:
            raise BundleError(f"{kernel.name}: a shape-dependent constant's threshold did not settle after "
                              f"{THRESHOLD_ROUNDS} rounds of samples around it", "split the bucket's range")
        extra = _run(kernel, [(dict(state[n][0].config), s) for n, s in todo], target, timeout_s)
        for (n, s), r in zip(todo, extra):
            state[n][2] = state[n][2] + [s]
            state[n][3] = state[n][3] + [r]
    todo = []
    for n, (b, base, ss, rs) in enumerate(state):
        todo += [(n, s) for s in _missing_specializations(fitted[n][0], keys, base, ss, rs)]
    if todo:  # one sample per specialization the samples' value combinations need and none has shown yet
        extra = _run(kernel, [(dict(state[n][0].config), s) for n, s in todo], target, timeout_s)
        for (n, s), r in zip(todo, extra):
            state[n][2] = state[n][2] + [s]
            state[n][3] = state[n][3] + [r]
        for n, (b, base, ss, rs) in enumerate(state):
            fitted[n] = (_fit_bucket(b, keys, ss, rs), ss, rs)
    key_inputs = _key_inputs(keys, [s for _, ss, _ in fitted for s in ss], [r["entry"] for _, _, rs in fitted for r in rs])
    out.mkdir(parents=True, exist_ok=True)
    entries, files, buckets = [], [], []
    written: dict[str, str] = {}
    for bi, (bucket, ss, rs) in enumerate(fitted):
        groups: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
        for s, r in zip(ss, rs):
            groups.setdefault(_spec_key(r["entry"]), (s, r["entry"], r))
        for s, e, r in groups.values():
            digest = hashlib.sha256(r["cubin"]).hexdigest()
            name = written.get(digest, f"{kernel.stem}-{target}-b{bi}-{len(bucket['entries'])}-{e['kernel_name']}.cubin")
            if digest not in written:  # buckets sharing a config and a specialization share the binary's file
                written[digest] = name
                (out / name).write_bytes(r["cubin"])
                files.append({"path": name, "sha256": file_sha256(out / name), "bytes": len(r["cubin"])})
            bucket["entries"].append(len(entries))
            entries.append({"bucket": bucket["name"], "kernel_name": e["kernel_name"], "cubin": name,
                            "config": e["config"], "shape": s, "constexprs": e["constexprs"],
                            "args": [{k: v for k, v in a.items() if k != "value"} for a in e["args"]],
                            "num_warps": e["num_warps"], "num_stages": e["num_stages"], "num_ctas": e["num_ctas"],
                            "shared_mem_bytes": e["shared_mem_bytes"], "n_regs": e["n_regs"],
                            "n_spills": e["n_spills"], "spills": e["spills"], "ptx_version": e["ptx_version"],
                            "ptx_target": e["ptx_target"]})
        buckets.append(bucket)
    first = fitted[0][2][0]
    return {
        "format": FORMAT_V2, "kind": "triton", "kernel": kernel.name, "kernel_function": first["function"],
        "run_kernel_params": list(meta["run_kernel_params"]), "source_sha256": meta["source_sha256"],
        "arch": target, "compute_capability": list(cc), "triton_version": first["triton_version"],
        "ptxas_version": first["ptxas_version"], "nvcc_version": meta.get("nvcc_version", ""),
        "torch_version": first["torch_version"], "grid_rule": "shape-ranges",
        "created": utc_now_iso(),
        "dispatch": {"sha256": dispatch_sha256, "keys": keys, "key_inputs": key_inputs, "arch": dispatch.arch,
                     "gpu_name": dispatch.gpu_name},
        "buckets": buckets, "entries": entries, "files": files}


def rules_table(data: dict[str, Any]) -> list[dict[str, str]]:
    """One row per bucket of a workload manifest: ranges, grid and parameter rules as text (for the CLI)."""
    rows = []
    for b in data.get("buckets", []):
        rows.append({"bucket": b["name"], "ranges": " ".join(f"{k}=[{lo},{hi}]" for k, (lo, hi) in b["ranges"].items()),
                     "grid": ", ".join(rule_text(r) for r in b.get("grid", [])),
                     "entries": str(len(b.get("entries", []))),
                     "params": " ".join(f"{p}={rule_text(r)}" for p, r in b.get("params", {}).items()
                                        if "const" not in r)})
    return rows

