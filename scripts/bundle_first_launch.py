"""One fresh-process measurement for scripts/device-bundle.sh: time from process start to the first finished launch.

    python3 scripts/bundle_first_launch.py MODE BUNDLE KERNEL OUT.pt

MODE: ``import`` (import torch and kernelpilot only: the floor), ``jit`` (import the kernel file, run_kernel at the
bundle's first entry: a cold or warm Triton cache, as TRITON_CACHE_DIR says) or ``bundle``
(``kernelpilot.bundle.load`` + the first launch; the kernel file and Triton are never imported). The inputs are made
from the manifest's first entry (seeded randn per tensor, same in every mode) so outputs compare bit for bit; every
tensor after the launch is saved to OUT.pt. Prints one JSON line with the seconds since process start.
"""

import time

T0 = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402


def main() -> None:
    mode, bundle, kernel, out = sys.argv[1:5]
    import torch

    import kernelpilot  # noqa: F401  # the floor every mode pays
    t_import = time.perf_counter() - T0
    manifest = json.loads(open(f"{bundle}/manifest.json").read())
    entry = manifest["entries"][0]
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = {}
    for name, spec in entry["inputs"].items():
        if isinstance(spec, dict):
            dt = getattr(torch, spec["dtype"])
            t = torch.empty_strided(spec["shape"], spec["stride"], device="cuda", dtype=dt)
            if dt.is_floating_point:
                t.copy_(torch.randn(spec["shape"], generator=gen, device="cuda", dtype=torch.float32).to(dt))
            else:
                t.zero_()
            inputs[name] = t
        else:
            inputs[name] = spec
    torch.cuda.synchronize()
    t_inputs = time.perf_counter() - T0
    steps = {}  # in-process breakdown after the inputs, s
    if mode == "import":
        pass
    elif mode == "jit":
        import importlib.util

        spec = importlib.util.spec_from_file_location("kp_bundle_kernel", kernel)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        steps["kernel_file_import_s"] = time.perf_counter() - T0 - t_inputs
        mod.run_kernel(**inputs, **entry["config"])
    elif mode == "bundle":
        from kernelpilot.bundle import load

        steps["bundle_import_s"] = time.perf_counter() - T0 - t_inputs
        k = load(bundle)
        steps["load_s"] = time.perf_counter() - T0 - t_inputs - steps["bundle_import_s"]
        k(**inputs)
    else:
        raise SystemExit(f"unknown mode {mode}")
    torch.cuda.synchronize()
    t_done = time.perf_counter() - T0
    steps = {k: round(v, 5) for k, v in steps.items()}
    torch.save({k: v.cpu() for k, v in inputs.items() if isinstance(v, torch.Tensor)}, out)
    print(json.dumps({"mode": mode, "import_s": round(t_import, 4), "inputs_s": round(t_inputs, 4),
                      "first_launch_s": round(t_done, 4), "over_inputs_s": round(t_done - t_inputs, 5),
                      "triton_imported": "triton" in sys.modules,
                      "pydantic_imported": "pydantic" in sys.modules, **steps}))


if __name__ == "__main__":
    main()
