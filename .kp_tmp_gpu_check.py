import importlib.util, itertools, json, os, sys, time, traceback
import torch, triton
out_dir = os.environ.get("OUT", "/tmp")
print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(), flush=True)
TOL = {torch.float32: (1e-5, 1e-3), torch.bfloat16: (1e-2, 1e-2), torch.float16: (1e-2, 1e-2)}
def load(n):
    spec = importlib.util.spec_from_file_location("ex_" + n, f"src/kernelpilot/examples/{n}.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
extra = {
 "vector_add": [{"BLOCK_SIZE": 1024, "num_warps": 4}, {"BLOCK_SIZE": 4096, "num_warps": 8}],
 "softmax": [{"BLOCK_N": 8192, "ROWS_PER_PROGRAM": 1, "num_warps": 16, "num_stages": 1},
             {"BLOCK_N": 8192, "ROWS_PER_PROGRAM": 1, "num_warps": 8, "num_stages": 1},
             {"BLOCK_N": 8192, "ROWS_PER_PROGRAM": 4, "num_warps": 1, "num_stages": 3},
             {"BLOCK_N": 1024, "ROWS_PER_PROGRAM": 1, "num_warps": 4, "num_stages": 2}],
 "layer_norm": [{"BLOCK_N": 4096, "num_warps": 8}, {"BLOCK_N": 4096, "num_warps": 16}, {"BLOCK_N": 8192, "num_warps": 1}],
 "matmul": [{"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3},
            {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 4},
            {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 2, "num_stages": 2},
            {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}],
}
ragged = {"vector_add": {"N": 1_000_003}, "softmax": {"M": 1001, "N": 3001}, "layer_norm": {"M": 1001, "N": 3001},
          "matmul": {"M": 1000, "N": 1030, "K": 999}}
results = []
def check(m, shape, cfg, timeit):
    d = m.setup(**shape, seed=0, device="cuda"); inp = d["inputs"]
    for o in d["outputs"]: inp[o].fill_(float("nan"))
    t0 = time.perf_counter(); m.run_kernel(**inp, **cfg); torch.cuda.synchronize(); first = time.perf_counter() - t0
    up = {k: (v.double() if torch.is_tensor(v) and v.is_floating_point() else v) for k, v in inp.items()}
    ref = m.reference(**up); out = inp[d["outputs"][0]]
    atol, rtol = TOL[out.dtype]
    nan = int(out.isnan().sum()); ok = nan == 0 and torch.allclose(out.double(), ref, atol=atol, rtol=rtol)
    err = ((out.double() - ref).abs().max()).item()
    ms = triton.testing.do_bench(lambda: m.run_kernel(**inp, **cfg)) if timeit else None
    return dict(ok=bool(ok), nan=nan, max_abs_err=err, first_call_s=round(first, 3), ms=ms)
for n in ["vector_add", "softmax", "layer_norm", "matmul"]:
    m = load(n)
    T = m.TUNABLES
    cfgs = [("default", m.DEFAULT_CONFIG), ("min", {k: v[0] for k, v in T.items()}), ("max", {k: v[-1] for k, v in T.items()})]
    cfgs += [(f"extra{i}", c) for i, c in enumerate(extra[n])]
    for label, cfg in cfgs:
        for shape_label, shape in (("SHAPE", m.SHAPE), ("ragged", {**m.SHAPE, **ragged[n]})):
            try:
                r = check(m, shape, cfg, shape_label == "SHAPE")
            except Exception as e:
                r = dict(ok=False, error=f"{type(e).__name__}: {str(e)[:300]}")
            r.update(kernel=n, label=label, shape=shape_label, config=cfg)
            if shape_label == "SHAPE" and r.get("ms"):
                r["GBps"] = m.bytes_moved(**shape) / r["ms"] / 1e6; r["TFLOPs"] = m.flops(**shape) / r["ms"] / 1e9
            print(json.dumps(r), flush=True); results.append(r)
# The rejected spill config, launched directly past the guard (SHAPE only), to time its compile.
m = load("matmul"); d = m.setup(**m.SHAPE, device="cuda"); i = d["inputs"]; a, b, c = i["a"], i["b"], i["c"]
K_ = m._matmul_kernel; t0 = time.perf_counter()
K_[(256,)](a, b, c, 4096, 4096, 4096, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
           BLOCK_M=256, BLOCK_N=256, BLOCK_K=32, GROUP_M=1, UPCAST_OPERANDS=False, num_warps=2, num_stages=2)
torch.cuda.synchronize(); comp = time.perf_counter() - t0
ms = triton.testing.do_bench(lambda: K_[(256,)](a, b, c, 4096, 4096, 4096, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
           BLOCK_M=256, BLOCK_N=256, BLOCK_K=32, GROUP_M=1, UPCAST_OPERANDS=False, num_warps=2, num_stages=2), rep=200)
print("spill config 256x256x32 w2 s2 direct: compile+run", round(comp, 1), "s;", ms, "ms", flush=True)
json.dump(results, open(os.path.join(out_dir, "gpu_check.json"), "w"), indent=1)
