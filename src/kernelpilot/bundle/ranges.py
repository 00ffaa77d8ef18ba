"""A workload bundle of a Triton kernel (``kernelpilot-bundle/2``, kind ``triton``) as a callable: the call's shape
picks the bucket whose ranges hold it (the dispatch table's own lookup), the bucket's rules give the grid and the
scalar parameters at that shape, and the call's arguments pick the binary compiled for their specialization.

Standard library only, like :mod:`kernelpilot.bundle.load` (no Triton, torch or pydantic; the launch goes through
:mod:`kernelpilot.bundle.driver`). The manifest's fields: docs/bundles.md, "Workload bundles"; the rules:
:mod:`kernelpilot.bundle.rules`.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any, Optional

from kernelpilot.bundle.reader import (MANIFEST, BundleCoverageError, BundleError, BundleShapeOutOfRange)
from kernelpilot.bundle.rules import evaluate, int_type, lookup_functions, rule_text, triton_spec

__all__ = ["RangeBundleKernel", "bucket_coverage", "bucket_env_corners"]

_SCHEMA_HINT = "run `kernelpilot bundle verify` on it, or export the bundle again"


def _schema(where: str, exc: Exception) -> BundleError:
    return BundleError(f"{where}: breaks the manifest schema ({type(exc).__name__}: {exc})", _SCHEMA_HINT)


def bucket_env_corners(bucket: dict[str, Any], keys: list[str]) -> list[dict[str, int]]:
    """The shapes a bucket is checked at without a call: its sampled shapes (dispatch keys only) and the two
    corners of its ranges (every key at its low end, every key at its high end). Raises KeyError on a bad bucket."""
    envs = [{k: int(s[k]) for k in keys} for s in bucket.get("samples", [])]
    envs += [{k: int(bucket["ranges"][k][0]) for k in keys}, {k: int(bucket["ranges"][k][1]) for k in keys}]
    return envs


def bucket_coverage(where: str, bucket: dict[str, Any], env: dict[str, int], num_ctas: int,
                    out_shapes: Optional[dict[str, list[int]]] = None) -> None:
    """Refuse a launch of ``bucket`` at shape ``env`` whose grid cannot cover an output.

    The rule of :func:`kernelpilot.bundle.reader.check_coverage` with a tile that follows the shape: each output's
    ``cap[d]`` is the most a program was seen to write along dimension ``d`` at the sampled shapes (None: the whole
    dimension), so one program writes at most ``min(cap[d], extent[d])``; the launch needs
    ``prod_d ceil(extent[d] / that)`` programs and has ``grid_x * grid_y * grid_z * num_ctas``.

    Args:
        where: names the bucket in messages. bucket: the manifest's bucket. env: dispatch key -> value.
        num_ctas: CTAs per program. out_shapes: the outputs' actual shapes (None: from the bucket's input rules).

    Raises:
        BundleError: no coverage record, or one that breaks the schema. BundleCoverageError: too few programs.
    """
    cov = bucket.get("coverage")
    if not isinstance(cov, dict) or not isinstance(cov.get("outputs"), list):
        raise BundleError(f"{where}: no coverage record (the tile each program writes, recorded at export)",
                          "export the bundle again with this kernelpilot")
    if not cov.get("observed"):
        return
    try:
        grid = [int(evaluate(r, env)) for r in bucket["grid"]]
        programs = grid[0] * grid[1] * grid[2] * max(1, int(num_ctas))
        for out in cov["outputs"]:
            name, caps = str(out["input"]), list(out["cap"])
            shape = (out_shapes or {}).get(name)
            if shape is None:
                shape = [int(evaluate(r, env)) for r in bucket["inputs"][name]["shape"]]
            if len(caps) != len(shape):
                raise ValueError(f"cap {caps} does not fit output {name} of shape {shape}")
            needed = 1
            for d, c in zip(shape, caps):
                tile = d if c is None else max(1, min(int(c), d))
                needed *= -(-d // tile) if d else 0
            if programs < needed:
                raise BundleCoverageError(
                    f"{where}: at {env} grid {grid} launches {programs} programs, each writing at most a "
                    f"{[d if c is None else min(int(c), d) for d, c in zip(shape, caps)]} tile of output `{name}` "
                    f"{shape}; covering it takes {needed}: part of the output would never be written",
                    "the manifest's grid rule does not match the launches the kernel was exported with; export again")
    except (KeyError, TypeError, ValueError) as exc:
        raise _schema(where, exc) from exc


class RangeBundleKernel:
    """A loaded workload bundle of a Triton kernel: call it like ``run_kernel`` (its inputs, positional or by name;
    no config). Writes the outputs in place on the inputs' stream.

    Attributes:
        bundle: the folder. kernel: the kernel file's name. run_kernel_params: its inputs, in order.
        keys: the dispatch keys. buckets / entries: the manifest's (plain dicts).

    Raises (when called):
        BundleShapeOutOfRange: the call's shape is outside every bucket's ranges (the shape and the ranges named).
        BundleError: an input that does not follow the bucket's rules (dtype, size, stride, scalar; both sides
            named), no binary for the arguments' specialization, a misaligned pointer, a CPU tensor, a driver error.
        BundleCoverageError: the bucket's grid rule would not cover an output at the call's shape.
    """

    def __init__(self, bundle: Path, data: dict[str, Any], cubins: Optional[dict[str, bytes]] = None) -> None:
        where = str(bundle / MANIFEST)
        try:
            self.kernel, self.run_kernel_params = str(data["kernel"]), [str(p) for p in data["run_kernel_params"]]
            d = data["dispatch"]
            self.keys = [str(k) for k in d["keys"]]
            self.key_inputs = {str(k): dict(v) for k, v in d["key_inputs"].items()}
            self.buckets = [dict(b) for b in data["buckets"]]
            self.entries = [dict(e) for e in data["entries"]]
            for i, b in enumerate(self.buckets):
                for k in ("name", "ranges", "config", "inputs", "params", "grid", "coverage", "entries"):
                    if k not in b:
                        raise KeyError(f"bucket {i} has no {k!r}")
                if len(b["grid"]) != 3 or not b["entries"]:
                    raise ValueError(f"bucket {i}: a grid of 3 rules and at least one entry")
                for j in b["entries"]:
                    if self.entries[int(j)].get("bucket") != b["name"]:
                        raise ValueError(f"bucket {b['name']!r} lists entry {j} of another bucket")
            for i, e in enumerate(self.entries):
                for k in ("bucket", "kernel_name", "cubin", "constexprs", "args", "num_warps", "shared_mem_bytes",
                          "ptx_version", "ptx_target"):
                    if k not in e:
                        raise KeyError(f"entry {i} has no {k!r}")
            missing = [k for k in self.keys if k not in self.key_inputs]
            if missing:
                raise KeyError(f"no input gives dispatch key(s) {missing}")
            for b in self.buckets:  # every rule evaluates at the bucket's corners (a call never meets a broken one)
                for env in bucket_env_corners(b, self.keys):
                    for spec in b["inputs"].values():
                        for r in (spec["shape"] + spec["stride"] if spec.get("kind") == "tensor" else [spec["value"]]):
                            evaluate(r, env)
                    for r in [*b["params"].values(), *b["grid"]]:
                        evaluate(r, env)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise _schema(where, exc) from exc
        self.bundle, self._data, self._cubins = bundle, data, cubins or {}
        self._table = [{"name": b["name"], "ranges": b["ranges"]} for b in self.buckets]
        self._functions: dict[str, tuple[int, int]] = {}

    def bind(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        """run_kernel's inputs by name from a call's arguments (unknown keywords ignored). Raises BundleError for
        too many positional arguments or a missing input."""
        params = self.run_kernel_params
        if len(args) > len(params):
            raise BundleError(f"{self.kernel}: run_kernel takes {len(params)} inputs ({', '.join(params)}), "
                              f"got {len(args)} positional arguments")
        inputs = dict(zip(params, args))
        inputs.update({k: v for k, v in kwargs.items() if k in params})
        needed = set(self.buckets[0]["inputs"])
        missing = [p for p in params if p in needed and p not in inputs]
        if missing:
            raise BundleError(f"{self.kernel}: missing input(s) {', '.join(missing)}",
                              f"call it as run_kernel({', '.join(params)})")
        return inputs

    def shape(self, inputs: dict[str, Any]) -> dict[str, int]:
        """The call's value of every dispatch key, read from the input the export found carrying it (a scalar
        input, or a tensor's size along a dimension). Raises BundleError when that input is not of that kind."""
        env = {}
        for k in self.keys:
            rule = self.key_inputs[k]
            v = inputs.get(rule["input"])
            if rule.get("dim") is not None:
                if not hasattr(v, "shape") or len(v.shape) <= int(rule["dim"]):
                    raise BundleError(f"{self.kernel}: dispatch key {k} is the size of input `{rule['input']}` "
                                      f"along dimension {rule['dim']}, which the call's `{rule['input']}` lacks")
                v = int(v.shape[int(rule["dim"])])
            elif isinstance(v, bool) or not isinstance(v, int):
                raise BundleError(f"{self.kernel}: dispatch key {k} is the scalar input `{rule['input']}`, got "
                                  f"{v!r}", "pass it as a Python int")
            env[k] = int(v)
        return env

    def bucket(self, env: dict[str, int]) -> int:
        """The index of the bucket whose inclusive ranges hold ``env`` (the dispatch table's lookup,
        :func:`kernelpilot.dispatch.lookup.find_bucket`). Raises BundleShapeOutOfRange naming the shape and every
        bucket's ranges."""
        lk = lookup_functions()
        index = lk.find_bucket(env, self.keys, self._table)
        if index < 0:
            raise BundleShapeOutOfRange(f"{self.kernel}: {lk.miss_message(env, self.keys, self._table)}",
                                        "tune and export a workload that holds this shape")
        return index

    def check_inputs(self, b: dict[str, Any], inputs: dict[str, Any], env: dict[str, int]) -> None:
        """Every input as the bucket's rules give it at ``env``: tensors' dtype, sizes and strides, scalars' values.
        Raises BundleError naming the input, what the bundle serves and what the call passed."""
        for name, spec in b["inputs"].items():
            v = inputs[name]
            if spec.get("kind") == "tensor":
                if not (hasattr(v, "shape") and hasattr(v, "stride") and hasattr(v, "dtype")):
                    raise BundleError(f"{self.kernel}: input `{name}` must be a tensor, got {type(v).__name__}")
                want = ([int(evaluate(r, env)) for r in spec["shape"]], [int(evaluate(r, env)) for r in spec["stride"]])
                got = (list(v.shape), list(v.stride()))
                dtype = str(v.dtype).replace("torch.", "")
                if got != want or dtype != spec["dtype"]:
                    raise BundleError(f"{self.kernel}: at {env} (bucket {b['name']!r}) input `{name}` must be "
                                      f"{spec['dtype']}{want[0]} stride {want[1]}; the call passed "
                                      f"{dtype}{got[0]} stride {got[1]}",
                                      "pass inputs laid out as the kernel's setup builds them at this shape")
            else:
                want_v = evaluate(spec["value"], env)
                if v != want_v or isinstance(v, bool) != isinstance(want_v, bool):
                    raise BundleError(f"{self.kernel}: at {env} (bucket {b['name']!r}) input `{name}` must be "
                                      f"{want_v!r} ({rule_text(spec['value'])}); the call passed {v!r}",
                                      "the bundle serves only the shapes of its dispatch table's workload")

    def _fits(self, e: dict[str, Any], b: dict[str, Any], inputs: dict[str, Any], env: dict[str, int]
              ) -> tuple[bool, int, str]:
        """(serves the call, how many parameters it specializes as Triton would for them, why not)."""
        exact = 0
        for p, c in e["constexprs"].items():
            if p in b["params"] and evaluate(b["params"][p], env) != c:
                return False, 0, f"{p}={evaluate(b['params'][p], env)!r} (compiled as {c!r})"
            exact += 1  # a value compiled in, as Triton compiles an argument equal to 1
        for a in e["args"]:
            div = int(a.get("divisibility", 1))
            if a["kind"] == "tensor":
                ptr = int(inputs[a["input"]].data_ptr()) + int(a.get("offset_bytes", 0))
                if ptr % div:
                    return False, 0, f"{a['param']} at {ptr:#x} is not {div}-byte aligned"
                exact += (ptr % 16 == 0) == (div == 16)
                continue
            v = evaluate(b["params"][a["param"]], env)
            if isinstance(v, int) and not isinstance(v, bool) and a["type"] in ("i32", "i64", "u64"):
                need_t, need_div = triton_spec(v)
                width = {"i32": 0, "i64": 1, "u64": 2}
                if width[int_type(v)] > width[a["type"]] or (a["type"] != "u64" and v >= 2 ** 63) or v % div:
                    return False, 0, f"{a['param']}={v} (compiled as {a['type']} divisible by {div})"
                exact += need_t == a["type"] and need_div == div
            else:
                exact += 1
        return True, exact, ""

    def select(self, inputs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
        """(bucket, entry, shape) serving the call: the bucket holding its shape, its inputs checked, then the
        binary compiled for the arguments' specialization (the one Triton would compile: an argument of 1 as a
        constant, divisibility by 16, the integer's width); failing an exact one, one compiled for less (correct for
        any value it accepts, e.g. without the divisibility hint).

        Raises:
            BundleShapeOutOfRange / BundleError: as the class says; no entry fits -> every entry's reason named.
        """
        env = self.shape(inputs)
        b = self.buckets[self.bucket(env)]
        self.check_inputs(b, inputs, env)
        best, why = None, []
        for j in b["entries"]:
            e = self.entries[int(j)]
            ok, score, reason = self._fits(e, b, inputs, env)
            if ok and (best is None or score > best[0]):
                best = (score, e)
            elif not ok:
                why.append(f"{e['cubin']}: {reason}")
        if best is None:
            raise BundleError(f"{self.kernel}: at {env} (bucket {b['name']!r}) no binary serves the call's "
                              f"specialization: {'; '.join(why)}",
                              "pass 16-byte aligned tensors, or export again (export compiles the specializations "
                              "its sampled shapes need)")
        return b, best[1], env

    def pack(self, e: dict[str, Any], b: dict[str, Any], inputs: dict[str, Any], env: dict[str, int]
             ) -> list[tuple[str, int | float]]:
        """The runtime parameters in launch order as ``(Triton type, value)``: pointers from ``data_ptr()`` plus
        the recorded offset, scalars from the bucket's rules at ``env``. Raises KeyError on a broken entry."""
        out: list[tuple[str, int | float]] = []
        for a in e["args"]:
            if a["kind"] == "tensor":
                out.append((a["type"], int(inputs[a["input"]].data_ptr()) + int(a.get("offset_bytes", 0))))
            else:
                out.append((a["type"], evaluate(b["params"][a["param"]], env)))
        return out

    def grid(self, b: dict[str, Any], env: dict[str, int]) -> tuple[int, int, int]:
        """The bucket's grid at ``env`` (programs along x, y, z)."""
        g = [int(evaluate(r, env)) for r in b["grid"]]
        return g[0], g[1], g[2]

    def function(self, e: dict[str, Any]) -> int:
        """The entry's ``CUfunction`` (module load on first use; GPU only)."""
        from kernelpilot.bundle.driver import shared_driver

        if e["cubin"] not in self._functions:
            drv = shared_driver()
            drv.ensure_context()
            self._functions[e["cubin"]] = drv.load_function(self._cubins[e["cubin"]], e["kernel_name"], e["cubin"],
                                                            int(e["shared_mem_bytes"]))
        return self._functions[e["cubin"]][1]

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        from kernelpilot.bundle.driver import CTYPES, shared_driver

        inputs = self.bind(args, kwargs)
        b, e, env = self.select(inputs)
        tensors = {n: v for n, v in inputs.items() if hasattr(v, "data_ptr")}
        num_ctas = int(e.get("num_ctas", 1))
        bucket_coverage(f"{self.bundle / MANIFEST} bucket {b['name']!r}", b, env, num_ctas,
                        {n: list(t.shape) for n, t in tensors.items()})
        params = self.pack(e, b, inputs, env)
        if any(not getattr(t, "is_cuda", False) for t in tensors.values()):
            raise BundleError(f"{self.kernel}: inputs must be CUDA tensors", "move the inputs to the GPU")
        grid = self.grid(b, env)
        if grid[0] * grid[1] * grid[2] == 0:
            return
        import torch

        first = next(iter(tensors.values()), None)
        stream = torch.cuda.current_stream(first.device).cuda_stream if first is not None else 0
        values = [ctypes.c_void_p(v) if t.startswith("*") else CTYPES[t](v) for t, v in params]
        values += [ctypes.c_void_p(0), ctypes.c_void_p(0)]  # global and profile scratch, as Triton >= 3.5 passes
        ptrs = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        shared_driver().launch(self.function(e), grid, 32 * int(e["num_warps"]), int(e["shared_mem_bytes"]), stream,
                         ctypes.addressof(ptrs), num_ctas)
