"""Static inspection: compile examples for sm_90 on the CPU and read registers, shared memory, occupancy and SASS.

The compiles run in child processes (this test process runs Triton under the interpreter, see conftest.py), two
pools in all: one for vector_add (a sample of its space) and one for five matmul configs.
"""

from __future__ import annotations

import pytest

from conftest import EXAMPLES, FIXTURES
from kernelpilot.errors import ContractError
from kernelpilot.profile.metrics import read_report
from kernelpilot.backends.binary.occupancy import theoretical_occupancy
from kernelpilot.profile.static import (
    StaticFailure,
    StaticReport,
    access_width_bytes,
    inspect_configs,
    inspect_space,
    max_threads_per_block,
    parse_arch,
    parse_ptxas_spills,
    parse_resource_usage,
    parse_sass,
    width_histogram,
)

MATMUL = EXAMPLES / "matmul.py"
VECTOR_ADD = EXAMPLES / "vector_add.py"

# 256 x 256 x 128 bf16 with 5 stages: 5 * (256*128 + 128*256) * 2 = 655,360 B > 232,448 B per block on sm_90.
TOO_MUCH_SHARED = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "num_warps": 8, "num_stages": 5}
# 256 x 256 fp32 accumulator over 2 warps = 1024 registers/thread: matmul's run_kernel raises ValueError.
REJECTED = {"BLOCK_M": 256, "BLOCK_N": 256, "num_warps": 2}


@pytest.fixture(scope="module")
def matmul() -> dict[str, StaticReport | StaticFailure]:
    configs = {"default": {}, "s3": {"num_stages": 3}, "s4": {"num_stages": 4}, "m128": {"BLOCK_M": 128},
               "oom": TOO_MUCH_SHARED, "rejected": REJECTED}
    results = inspect_configs(MATMUL, list(configs.values()), arch="sm_90", max_workers=2, keep_sass=True)
    return dict(zip(configs, results))


@pytest.fixture(scope="module")
def vector_add_space():
    return inspect_space(VECTOR_ADD, arch="sm_90", limit=3, max_workers=2)


def _ok(result) -> StaticReport:
    assert isinstance(result, StaticReport), f"expected a report, got {result}"
    return result


def test_vector_add_compiles_for_sm90_without_gpu(vector_add_space):
    space = vector_add_space
    assert (space.n_configs_total, space.n_inspected, space.sampled) == (24, 3, True)
    default = [r for r in space.results if r.config == {"BLOCK_SIZE": 128, "num_warps": 4}]
    assert default, "the sample always holds DEFAULT_CONFIG"
    r = _ok(default[0])
    assert r.arch == "sm_90" and r.compute_capability == (9, 0) and r.kernel_name == "_add_kernel"
    assert r.registers_per_thread > 0 and r.n_spills == 0 and r.spill_stores_bytes == 0
    assert r.threads_per_block == 128 and r.shared_mem_bytes == 0
    assert r.grid == [2**26 // 128]  # captured at the real SHAPE, N = 2**26
    assert r.signature["x_ptr"] == "*fp32" and r.constexprs["BLOCK_SIZE"] == 128
    # Loads through registers, an add, no tensor cores.
    assert r.instruction_mix["LDG"] > 0 and r.instruction_mix["STG"] > 0
    assert r.instruction_mix["HGMMA"] == r.instruction_mix["HMMA"] == 0 and not r.uses_tensor_cores
    # 128 fp32 elements over 128 threads: one 4-byte load per thread per input.
    assert r.global_load_widths_bytes == {4: 2}
    for res in space.results:
        assert isinstance(res, StaticReport) and res.occupancy is not None


def test_matmul_default_registers_shared_and_sass(matmul):
    r = _ok(matmul["default"])
    assert r.kernel_name == "_matmul_kernel" and r.num_warps == 4 and r.num_stages == 2
    assert r.registers_per_thread > 0 and r.n_spills == 0 and r.spill_loads_bytes == 0
    # Two stages of one 64x32 A tile and one 32x64 B tile in bf16: 2 * (2048 + 2048) * 2 = 16384 B.
    assert r.shared_mem_bytes == 16384
    mix = r.instruction_mix
    assert mix["HGMMA"] + mix["HMMA"] > 0 and r.uses_tensor_cores  # sm_90, 4 warps, bf16: wgmma -> HGMMA
    assert mix["LDGSTS"] + mix["UTMALDG"] > 0  # cp.async pipeline (TMA needs tensor descriptors)
    assert mix["FFMA"] == 0 and mix["LDL"] == mix["STL"] == 0 and mix["DFMA"] == 0
    assert r.async_copy_widths_bytes and set(r.async_copy_widths_bytes) == {16}  # 128-bit copies
    assert r.sass and "Function : _matmul_kernel" in r.sass


def test_occupancy_equals_the_model_of_the_reported_numbers(matmul, vector_add_space):
    for r in [matmul["default"], matmul["s3"], matmul["s4"], *vector_add_space.results]:
        r = _ok(r)
        assert r.occupancy == theoretical_occupancy(r.registers_per_thread, r.shared_mem_bytes, r.threads_per_block,
                                                    (9, 0))


def test_matmul_default_matches_the_h200_report_of_the_same_config(matmul):
    # The H200 report of this very config (Triton 3.6 there, the Triton here compiled on the CPU): same registers,
    # same dynamic shared memory, and with ncu's carve-out the same occupancy limits.
    r = _ok(matmul["default"])
    ncu = read_report(FIXTURES / "ncu" / "h200_matmul_bf16_64x64x32_s2.ncu-rep")[0]
    assert r.registers_per_thread == ncu.registers_per_thread == 64
    assert r.shared_mem_bytes == ncu.shared_mem_per_block_bytes == 16384
    occ = theoretical_occupancy(r.registers_per_thread, r.shared_mem_bytes, r.threads_per_block,
                                shared_mem_config_bytes=ncu.shared_mem_config_bytes)
    assert occ.blocks_by_registers == ncu.occupancy_limits_blocks["registers"] == 8
    assert occ.blocks_by_shared_mem == ncu.occupancy_limits_blocks["shared_mem"] == 9
    assert occ.occupancy_pct == ncu.theoretical_occupancy_pct == 50.0


def test_matmul_128x64x32_matches_its_h200_report(matmul):
    # Triton 3.6 (the device's) compiles this config to exactly the report's 120 registers; Triton 3.9 to 117. Both
    # give the report's occupancy limits: 4 blocks by registers (120 or 117 regs -> 3840 per warp -> 16384 // 3840
    # = 4 warps per sub-partition -> 16 warps -> 4 blocks of 4 warps) and 5 by shared memory (24576 + 1024 = 25600;
    # 135168 carve-out // 25600 = 5).
    r = _ok(matmul["m128"])
    ncu = read_report(FIXTURES / "ncu" / "h200_matmul_bf16_128x64x32_s2.ncu-rep")[0]
    assert r.shared_mem_bytes == ncu.shared_mem_per_block_bytes == 24576
    if r.triton_version.startswith("3.6"):
        assert r.registers_per_thread == ncu.registers_per_thread == 120
    occ = theoretical_occupancy(r.registers_per_thread, r.shared_mem_bytes, r.threads_per_block,
                                shared_mem_config_bytes=ncu.shared_mem_config_bytes)
    assert occ.blocks_by_registers == ncu.occupancy_limits_blocks["registers"] == 4
    assert occ.blocks_by_shared_mem == ncu.occupancy_limits_blocks["shared_mem"] == 5
    assert occ.occupancy_pct == ncu.theoretical_occupancy_pct == 25.0


def test_shared_memory_grows_with_num_stages(matmul):
    shared = [_ok(matmul[k]).shared_mem_bytes for k in ("default", "s3", "s4")]
    assert shared[0] < shared[1] < shared[2]
    assert shared[1] - shared[0] == shared[2] - shared[1] == 8192  # one 64x32 + 32x64 bf16 stage per step


def test_too_much_shared_memory_is_a_recorded_failure(matmul):
    f = matmul["oom"]
    assert isinstance(f, StaticFailure) and f.stage == "resources" and f.error_type == "OutOfResources"
    assert "shared memory" in f.message and "655360" in f.message and "232448" in f.message
    assert f.shared_mem_bytes == 655360 and "num_stages" in f.hint


def test_a_config_run_kernel_rejects_is_a_recorded_failure(matmul):
    f = matmul["rejected"]
    assert isinstance(f, StaticFailure) and f.stage == "capture" and f.error_type == "ValueError"
    assert "accumulator registers" in f.message


def test_unknown_tunable_and_bad_arch_raise_contract_errors():
    with pytest.raises(ContractError, match="not in TUNABLES"):
        inspect_configs(MATMUL, [{"BLOCK_Q": 1}], arch="sm_90")
    with pytest.raises(ContractError, match="not a GPU architecture"):
        inspect_configs(MATMUL, [{}], arch="hopper")


@pytest.mark.parametrize("regs,threads", [
    (0, 1024), (16, 1024), (64, 1024),  # 64 x 32 = 2048 per warp -> 8 warps per sub-partition -> 32 warps, capped
    (65, 896),   # 2080 -> 2304 per warp -> 7 per sub-partition -> 28 warps
    (80, 768),   # 2560 -> 6 -> 24 warps
    (96, 640),   # 3072 -> 5 -> 20 warps (21 would fit 65,536 registers, but warps are allocated per sub-partition)
    (128, 512),  # 4096 -> 4 -> 16 warps
    (164, 384),  # 5248 -> 5376 -> 3 -> 12 warps
    (168, 384),  # 5376 -> 3 -> 12 warps
    (255, 256),  # 8160 -> 8192 -> 2 -> 8 warps
])
def test_max_threads_per_block_hand_computed(regs, threads):
    assert max_threads_per_block(regs, (9, 0)) == threads
    assert max_threads_per_block(regs, (8, 0)) == threads  # same register file and granularity on A100


def test_max_threads_per_block_rejects_impossible_register_counts():
    with pytest.raises(ValueError):
        max_threads_per_block(256)
    with pytest.raises(ValueError):
        max_threads_per_block(-1)


@pytest.mark.parametrize("run", ["2026-11-22-h100/occupancy_driver.json", "2026-11-22-h200/issue3/occupancy_driver.json"])
def test_max_threads_per_block_equals_the_driver_values_recorded_on_hopper(run):
    # cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK) of 41 loaded Triton 3.6 kernels per run.
    import json

    data = json.loads((EXAMPLES.parents[2] / "docs" / "device-runs" / run).read_text())
    ok = [r for r in data["results"] if r["status"] == "ok"]
    assert len(ok) == 41 and tuple(data["compute_capability"]) == (9, 0)
    for r in ok:
        assert max_threads_per_block(r["n_regs"]) == r["driver_attributes"]["max_threads_per_block"], r
    assert {r["driver_attributes"]["max_threads_per_block"] for r in ok} >= {256, 384, 512, 640, 896, 1024}


def test_reports_carry_max_threads_per_block(matmul, vector_add_space):
    for r in [matmul["default"], matmul["s3"], matmul["m128"], *vector_add_space.results]:
        r = _ok(r)
        assert r.max_threads_per_block == max_threads_per_block(r.registers_per_thread, (9, 0))
        assert r.threads_per_block <= r.max_threads_per_block
    assert _ok(matmul["default"]).max_threads_per_block == 1024  # 64 registers


def test_parse_arch_forms():
    assert parse_arch("sm_90") == parse_arch("sm_90a") == parse_arch("90") == parse_arch("9.0") == (9, 0)
    assert parse_arch("sm_80") == (8, 0) and parse_arch("sm_100") == (10, 0) and parse_arch("sm_89") == (8, 9)


SASS = """
\tcode for sm_90a
\t\tFunction : k
        /*0000*/                   LDC R1, c[0x0][0x28] ;                                  /* 0x00000a00ff017b82 */
        /*0010*/              @!P0 LDG.E.128 R4, desc[UR4][R2.64] ;                        /* 0x0000000402047981 */
        /*0020*/                   LDG.E.LTC128B.64 R8, desc[UR4][R2.64] ;                 /* 0x0000000402087981 */
        /*0030*/                   LDG.E.U16 R9, desc[UR4][R2.64] ;                        /* 0x0000000402097981 */
        /*0040*/                   LDG.E R10, desc[UR4][R2.64] ;                           /* 0x00000004020a7981 */
        /*0050*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8].tnspB, R24 ;    /* 0x40e00000081879f0 */
        /*0060*/               @P3 BRA 0x10 ;                                              /* 0xfffffff800cc3947 */
        /*0070*/                   EXIT ;                                                  /* 0x000000000000794d */
        /*0080*/                   BRA 0x80;                                               /* 0xfffffffc00fc7947 */
"""


def test_sass_parsing_opcodes_predicates_widths_and_branches():
    instrs = parse_sass(SASS)
    assert [i.base for i in instrs] == ["LDC", "LDG", "LDG", "LDG", "LDG", "HGMMA", "BRA", "EXIT", "BRA"]
    assert instrs[1].predicate == "@!P0" and instrs[1].opcode == "LDG.E.128" and instrs[1].address == 0x10
    # Widths: .128 -> 16 B, .64 -> 8 B (LTC128B is a cache hint, not a width), .U16 -> 2 B, none -> 4 B.
    assert [access_width_bytes(i) for i in instrs[1:5]] == [16, 8, 2, 4]
    assert width_histogram(instrs, "LDG") == {2: 1, 4: 1, 8: 1, 16: 1}
    assert instrs[6].branch_target() == 0x10 and instrs[8].branch_target() == 0x80 and instrs[0].branch_target() is None


def test_resource_usage_and_ptxas_spill_parsing():
    usage = parse_resource_usage(
        "Resource usage:\n Common:\n  GLOBAL:0\n Function _matmul_kernel:\n"
        "  REG:64 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:592 TEXTURE:0 SURFACE:0 SAMPLER:0\n")
    assert usage == {"_matmul_kernel": {"REG": 64, "STACK": 0, "SHARED": 1024, "LOCAL": 0, "CONSTANT[0]": 592,
                                        "TEXTURE": 0, "SURFACE": 0, "SAMPLER": 0}}
    log = ("ptxas info    : Function properties for _add_kernel\n"
           "    168 bytes stack frame, 168 bytes spill stores, 160 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 0 barriers, 168 bytes cumulative stack size\n")
    assert parse_ptxas_spills(log) == (168, 160)
    assert parse_ptxas_spills("ptxas info : Used 12 registers") is None


def _cli():
    import typer
    from typer.testing import CliRunner

    from kernelpilot.cli.static import register

    app = typer.Typer()
    register(app)
    return app, CliRunner()


def test_cli_inspect_json_and_errors():
    import json

    app, runner = _cli()
    res = runner.invoke(app, ["inspect", str(VECTOR_ADD), "--config", "BLOCK_SIZE=1024", "--arch", "sm_90", "--json"])
    assert res.exit_code == 0, res.stdout
    data = json.loads(res.stdout)
    assert data["status"] == "ok" and data["config"]["BLOCK_SIZE"] == 1024 and "sass" not in data
    assert data["registers_per_thread"] > 0 and data["occupancy"]["occupancy_pct"] > 0
    assert data["max_threads_per_block"] == max_threads_per_block(data["registers_per_thread"])
    res = runner.invoke(app, ["inspect", str(VECTOR_ADD), "--arch", "hopper", "--json"])
    assert res.exit_code == 2 and json.loads(res.stdout)["error"] == "OptionError"  # a bad option (issue 12)
    res = runner.invoke(app, ["inspect", str(MATMUL), "--config", "BLOCK_M=256", "--config", "BLOCK_N=256",
                              "--config", "num_warps=2", "--json"])
    assert res.exit_code == 1 and "accumulator registers" in json.loads(res.stdout)["message"]


def test_cli_all_configs_table_fits_100_columns(monkeypatch):
    from kernelpilot.cli.common import out

    app, runner = _cli()
    monkeypatch.setattr(out, "_width", 100)  # not "width": undoing that would pin the width the property read
    res = runner.invoke(app, ["inspect", str(MATMUL), "--all-configs", "--limit", "3", "--arch", "sm_90"])
    assert res.exit_code == 0, res.stdout
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, "\n".join(line for line in lines if len(line) > 100)
    assert any("max thr" in line for line in lines) and any(line.startswith(" 64,64,32,1,4,2,0 ") for line in lines)
    assert "config = BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,num_warps,num_stages,TMA" in res.stdout
    assert "inspected a sample of 3 of 1162 configs" in res.stdout


def test_sass_can_be_skipped_and_occupancy_is_still_read():
    from kernelpilot.profile.static import config_tasks, run_tasks

    tasks = config_tasks(VECTOR_ADD, [{"BLOCK_SIZE": 2048, "num_warps": 1}], arch="sm_90", sass=False)
    assert tasks[0]["sass"] is False
    r = _ok(run_tasks(tasks, max_workers=1, in_process=False)[0])
    assert r.registers_per_thread > 0 and r.occupancy is not None and r.max_threads_per_block
    assert r.n_instructions == 0 and not any(r.instruction_mix.values()) and any("SASS not read" in n for n in r.notes)


def _constrained_vector_add(tmp_path):
    """vector_add with CONSTRAINTS that keep 2 of its 24 configs and exclude its DEFAULT_CONFIG (128, 4 warps)."""
    path = tmp_path / "vector_add_constrained.py"
    path.write_text(VECTOR_ADD.read_text() + '\nCONSTRAINTS = ["BLOCK_SIZE == 128 and num_warps <= 2"]\n')
    return path


def test_cli_all_configs_keeps_the_kernels_constraints(tmp_path):
    import json

    app, runner = _cli()
    res = runner.invoke(app, ["inspect", str(_constrained_vector_add(tmp_path)), "--all-configs", "--arch", "sm_90",
                              "--workers", "2", "--json"])
    assert res.exit_code == 0, res.stdout
    data = json.loads(res.stdout)
    configs = [r["config"] for r in data["results"]]
    assert configs == [{"BLOCK_SIZE": 128, "num_warps": 1}, {"BLOCK_SIZE": 128, "num_warps": 2}]
    assert {"BLOCK_SIZE": 256, "num_warps": 1} not in configs and {"BLOCK_SIZE": 128, "num_warps": 4} not in configs
    assert (data["n_configs_total"], data["n_excluded"], data["n_inspected"], data["n_ok"]) == (2, 22, 2, 2)


def test_inspect_space_samples_only_allowed_configs_without_the_excluded_default(tmp_path):
    space = inspect_space(_constrained_vector_add(tmp_path), arch="sm_90", limit=1, max_workers=1)
    assert space.sampled and space.n_inspected == 1 and space.n_configs_total == 2
    assert space.results[0].config in ({"BLOCK_SIZE": 128, "num_warps": 1}, {"BLOCK_SIZE": 128, "num_warps": 2})


def test_constraints_excluding_every_config_are_a_contract_error(tmp_path):
    path = tmp_path / "vector_add_empty.py"
    path.write_text(VECTOR_ADD.read_text() + '\nCONSTRAINTS = ["BLOCK_SIZE > 4096"]\n')
    with pytest.raises(ContractError, match="exclude every one of the 24 configs"):
        inspect_space(path, arch="sm_90")
