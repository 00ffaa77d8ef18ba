"""Shared test helpers: kernel files written to a temp folder, the GPU marker's skip, and a report page opened
offline in Chromium."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "src" / "kernelpilot" / "examples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: The browser of the report tests: Debian's Chromium, never a Playwright download.
CHROMIUM = os.environ.get("KERNELPILOT_CHROMIUM", "/usr/bin/chromium")


def chromium_args() -> list[str]:
    """Chromium's flags as scripts/screenshot_report.py launches it (headless, no network services)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("screenshot_report", ROOT / "scripts" / "screenshot_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.CHROMIUM_ARGS)


def open_offline(browser, report: Path, *, timeout_ms: int = 30_000):
    """``report`` (a report.html) opened in a new page of ``browser`` with every non-file request blocked, and what
    the page did: ``(page, seen)``, ``seen`` holding console errors, page errors, requests, blocked requests and
    dialogs (dismissed). Waits until the page says its charts are drawn (asserted)."""
    seen: dict[str, list[str]] = {"console": [], "pageerror": [], "requests": [], "blocked": [], "dialogs": []}
    page = browser.new_page(viewport={"width": 1280, "height": 900})

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            seen["blocked"].append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("console", lambda m: seen["console"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen["pageerror"].append(str(e)))
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    page.goto(report.as_uri(), wait_until="load")
    # the page draws once plotly is decompressed (asynchronous); a selector wait needs no eval, which the page's
    # CSP refuses
    page.wait_for_selector("body[data-charts]", state="attached", timeout=timeout_ms)
    assert page.get_attribute("body", "data-charts") == "drawn", seen
    return page, seen


def has_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


# optimize, tune and session record their outcomes in the experience log: never in the user's ~/.kernelpilot
os.environ.setdefault("KERNELPILOT_EXPERIENCE", os.path.join(__import__("tempfile").mkdtemp(prefix="kp-exp-"),
                                                             "experience.db"))
# the per-user key that signs evaluation-cache lines (search/cache_trust.py): never the user's own
os.environ.setdefault("KERNELPILOT_SECRET_DIR", __import__("tempfile").mkdtemp(prefix="kp-keys-"))

if not has_gpu():
    # no GPU: kernels run under the interpreter, which must be on before triton is first imported
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run scripts/gpu-check.sh on the device)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# A pure-torch kernel file obeying the contract: fast, and lets tests plant bugs by substituting BODY.
TORCH_KERNEL = '''
import torch
SHAPE = {"N": 1000}
CPU_SHAPE = {"N": 300}
TUNABLES = {"BLOCK": [64, 128, 256], "num_warps": [2, 4, 8]}
DEFAULT_CONFIG = {"BLOCK": 64, "num_warps": 4}

def setup(N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=g).to(device)
    y = torch.randn(N, generator=g).to(device)
    return {"inputs": {"x": x, "y": y, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}

def run_kernel(x, y, out, N, *, BLOCK, num_warps, **_):
    BODY

def reference(x, y, out, N, **_):
    return x + y
'''


@pytest.fixture
def write_kernel(tmp_path):
    """Write a kernel file; ``body`` replaces BODY in TORCH_KERNEL unless ``source`` is given."""

    def write(body: str = "out.copy_(x + y)", *, source: str | None = None, name: str = "k.py") -> Path:
        text = source if source is not None else TORCH_KERNEL.replace("BODY", body)
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


# The five reports the pattern and card tests share (three from /work/shared/fixtures and kernelpilot's own runs).
NCU_FIXTURE_NAMES = ("h200_add_fp32_memory_bound", "h200_matmul_bf16_4096", "h200_softmax_fp32_8192_v0",
                     "h200_matmul_bf16_64x64x32_s2", "h200_matmul_bf16_128x64x32_s2")


@pytest.fixture(scope="session")
def ncu_fixture_metrics():
    """Each shared fixture's first launch, read once per session the production way (child process)."""
    from kernelpilot.profile.metrics import read_report

    return {n: read_report(FIXTURES / "ncu" / f"{n}.ncu-rep")[0] for n in NCU_FIXTURE_NAMES}
