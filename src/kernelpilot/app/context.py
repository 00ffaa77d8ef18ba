"""What every campaign (``optimize``, ``tune``) sets up before the first evaluation, done once and the same way.

:func:`prepare` resolves, in order: the device (a GPU, else the Triton interpreter, or a replay that needs neither),
the kernel file (contract checked), the shape, the GPU spec (a ``--gpu`` the user names must exist: an unknown name is
a :class:`~kernelpilot.errors.SpecError` in every command), the roofline at the shape (measured ceilings preferred),
the search space (TUNABLES × CONSTRAINTS × the device's limits) and the starting config.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kernelpilot.errors import KernelpilotError, SearchError, SpecError
from kernelpilot.facts import nvml_gpu_name
from kernelpilot.hardware.roofline import Roofline, compute_roofline
from kernelpilot.kernels.contract import KernelFile, load_kernel, make_case, resolve_config, resolve_shape
from kernelpilot.kernels.workload import Workload, counted_flops, workload
from kernelpilot.options import check_kernel_path, check_shape_values
from kernelpilot.target import Target

__all__ = ["RunContext", "UnguardedScriptError", "check_main_guard", "check_same_device", "detect_device",
           "detect_target", "gpu_name", "observe_roles", "prepare", "roofline_at", "roofline_for"]


class UnguardedScriptError(KernelpilotError):
    """A script calls kernelpilot's Python API at its top level without ``if __name__ == "__main__":``. The worker
    processes start with multiprocessing's ``spawn``, which imports the script again in every one of them, so the
    call would run again there (Python's ``multiprocessing`` docs, "Safe importing of main module")."""


def _is_main_guard(node: Any) -> bool:
    """True for ``if __name__ == "__main__":`` (either operand order)."""
    import ast

    test = node.test if isinstance(node, ast.If) else None
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, *test.comparators]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def _guarded(source: str, line: int) -> bool:
    """True when ``line`` of the module ``source`` lies inside an ``if __name__ == "__main__":`` block (or the source
    cannot be parsed: nothing is claimed then)."""
    import ast

    try:
        nodes = ast.parse(source).body
    except SyntaxError:
        return True
    while nodes:
        node = next((n for n in nodes if n.lineno <= line <= (n.end_lineno or n.lineno)), None)
        if node is None:
            return False
        if _is_main_guard(node) and any(b.lineno <= line <= (b.end_lineno or b.lineno) for b in node.body):
            return True
        nodes = [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
    return False


def check_main_guard() -> None:
    """Refuse a campaign started from the top level of a script that multiprocessing's ``spawn`` would import again
    in every worker (the call is not under ``if __name__ == "__main__":``), before anything is created: without this,
    every worker re-ran the call and died, and the error blamed the kernel file and left a half-made run folder.

    The script is the one ``spawn`` re-imports (``multiprocessing.spawn.get_preparation_data``: the ``__main__``
    module's file, or the module ``python -m`` ran); the call's line is the one its top-level frame is executing.
    Interactive sessions, ``python -c``, notebooks and ``python -m pkg`` (a ``__main__`` module) are never refused.

    Raises:
        UnguardedScriptError: the top-level call is outside ``if __name__ == "__main__":``.
    """
    import sys
    from multiprocessing import spawn

    main = sys.modules.get("__main__")
    try:
        data = spawn.get_preparation_data("kernelpilot-worker")
    except Exception:  # noqa: BLE001 - an unusual __main__: spawn decides for itself
        return
    path = data.get("init_main_from_path")
    name = data.get("init_main_from_name")
    if path is None and name and not (name == "__main__" or name.endswith(".__main__")):
        path = getattr(getattr(main, "__spec__", None), "origin", None)
    if not path or main is None:
        return
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is vars(main) and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:
        return
    try:
        source = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return
    if _guarded(source, frame.f_lineno):
        return
    raise UnguardedScriptError(
        f"{path}:{frame.f_lineno} calls kernelpilot at the script's top level, outside `if __name__ == "
        f"\"__main__\":`; kernelpilot's worker processes start with multiprocessing's spawn, which imports the script "
        f"again in each of them and would run the call again there",
        'put the calls under `if __name__ == "__main__":` (README, "Python API"); nothing was started or written')


def detect_target(*, replay: bool = False) -> Target:
    """The device of this process as a :class:`~kernelpilot.target.Target` (:meth:`Target.detect
    <kernelpilot.target.Target.detect>`): a GPU when torch sees one, else the CPU under the Triton interpreter,
    switched on right away (``TRITON_INTERPRET=1``), before triton is imported; ``replay``: the replay target.
    Name, arch and limits are added by :func:`prepare` once the spec is known. Raises nothing."""
    return Target.detect(replay=replay)


def detect_device() -> str:
    """:func:`detect_target`'s record string, ``"cuda"`` or ``"cpu"`` (for callers that store it). Raises nothing."""
    return detect_target().record


def gpu_name(index: int = 0) -> str | None:
    """The name NVML gives GPU ``index`` (no CUDA context is created), or None without NVML or a GPU."""
    return nvml_gpu_name(index)


def _spec_for(gpu: str | None, target: Target, detected: str | None) -> tuple[Any, str]:
    """(spec or None, note). A name the user gave must resolve (SpecError otherwise); a detected device that has no
    spec file only gives a note (no floor, no limits)."""
    from kernelpilot.hardware.specs import find_spec, match_device

    if gpu:
        try:
            return find_spec(gpu), ""
        except SpecError:
            if detected is None or gpu != detected:
                raise
    name = gpu or detected
    if not name:
        return None, ("no GPU and no --gpu NAME: FLOPs and bytes only, no speed-of-light floor" if not target.is_gpu
                      else "no GPU name: no speed-of-light floor")
    try:
        return match_device(name), ""
    except SpecError as exc:
        return None, f"no spec for this GPU: {exc.message} ({exc.hint})"


def roofline_for(kf: KernelFile, shape: dict[str, Any], spec: Any, note: str = "",
                 roles: Any = None, case: Any = None) -> tuple[Roofline | None, Workload, str]:
    """The roofline at ``shape`` on ``spec`` (measured ceilings preferred), the workload, and a note saying why there
    is no roofline when there is none (no spec, or no bytes moved). Inputs are built on the CPU only to count bytes.

    ``roles``: the :class:`~kernelpilot.kernels.roles.RoleReport` observed at ``shape`` (by a worker: the reference
    runs where the kernel runs, :func:`observe_roles`); the bytes then count what was observed read and written
    (:func:`kernelpilot.kernels.workload.minimum_bytes`), else what ``setup`` declares. ``case``: the CPU case at
    ``shape`` (seed 0) when the caller built it already (it is given ``roles``).

    Raises:
        ContractError: ``setup``, ``flops`` or ``bytes_moved`` fail at the shape.
        DeclarationError: the declared work is below the tensors' minimum, or ``COMPUTE_UNIT`` is one the input
            tensors' dtypes cannot feed (:func:`kernelpilot.kernels.compute_unit.check_unit_dtypes`).
    """
    from kernelpilot.kernels.compute_unit import check_unit_dtypes, operand_dtypes

    case = case if case is not None else make_case(kf, shape, 0, "cpu")
    outputs, inplace = case.outputs, case.inplace
    if roles is not None:
        case.roles = roles
        outputs = [n for n in roles.compared if n in case.inputs] or outputs
        inplace = [n for n in roles.restored if n in case.inputs]
    check_unit_dtypes(kf.compute_unit, operand_dtypes(case.inputs, outputs, inplace, case.scratch), str(kf.path))
    work = workload(kf, case)
    if spec is None:
        return None, work, note or "no GPU spec: no speed-of-light floor"
    if work.bytes_moved <= 0:
        return None, work, "bytes moved is 0: no roofline"
    return compute_roofline(work.flops, work.bytes_moved, kf.compute_unit, spec), work, ""


def roofline_at(kf: KernelFile, shape: dict[str, Any], target: Target, gpu: str | None,
                roles: Any = None) -> tuple[Roofline | None, Workload, str]:
    """:func:`roofline_for` on the spec of ``gpu`` (a name the user gave: SpecError when unknown) or of the GPU
    present (``target.is_gpu``; no spec only gives a note), with the observed ``roles`` when given.

    Raises:
        SpecError: ``gpu`` names no known GPU. ContractError: as :func:`roofline_for`.
    """
    spec, note = _spec_for(gpu, target, gpu_name() if target.is_gpu else None)
    return roofline_for(kf, shape, spec, note, roles)


@dataclass
class RunContext:
    """The resolved set-up of one campaign.

    Attributes:
        target: the device (:class:`~kernelpilot.target.Target`: ``cuda``, ``cpu`` under the Triton interpreter, or
            ``replay``, answers from a cache and no kernel runs), with the GPU's name and the spec's limits.
        kf: the loaded kernel file. shape: the problem shape. start: the starting config.
        gpu: the GPU name the spec was matched from (None without one). spec: the GPU spec (None without one).
        roofline / work / roofline_note: the roofline at the shape (None with the reason in the note).
        space: the search space (TUNABLES × CONSTRAINTS × the spec's limits).
        spare: a :class:`~kernelpilot.search.worker.SpareWorker` booting since :func:`prepare` (``spare_worker``),
            for :func:`kernelpilot.app.tune.make_runner` to hand to the first worker; None otherwise.
        setup_s: where :func:`prepare`'s seconds went, in order: ``load`` (the kernel file, the GPU spec, the
            space), ``case`` (setup's inputs on the CPU), ``flops`` (the reference's FLOPs counted on meta
            tensors), ``roles`` (the spare worker's boot and the reference's run there), ``roofline``.
        shape_seed: this campaign's secret for the drawn shapes (:func:`kernelpilot.kernels.shapes.shape_rng`),
            drawn with :mod:`secrets` and never written down: the workers' audits and the compile pool draw the
            same shapes from it.
    """

    target: Target
    kf: KernelFile
    shape: dict[str, Any]
    start: dict[str, Any]
    gpu: str | None
    spec: Any
    roofline: Roofline | None
    work: Workload
    roofline_note: str
    space: Any
    spare: Any = None
    setup_s: dict[str, float] = field(default_factory=dict)
    shape_seed: str = field(default_factory=lambda: secrets.token_hex(16))

    @property
    def device(self) -> str:
        """The record string of :attr:`target` (``"cuda"``, ``"cpu"``, ``"replay"``), as run.json stores it."""
        return self.target.record

    @property
    def measured_on(self) -> str:
        """What this campaign's times are measured on, as run.json and tune-run.json record it (``measured_on``):
        ``cuda NVIDIA H200`` (the kind and the name NVML gives the device), ``cpu`` (the Triton interpreter),
        ``replay`` (a cache's answers). ``--resume`` refuses a folder measured on another device: its incumbent's
        times would judge this device's."""
        return f"{self.target.record} {self.gpu}" if self.target.is_gpu and self.gpu else self.target.record

    @property
    def interpreted(self) -> bool:
        """True under the Triton interpreter (times are not measurements): :attr:`target`'s."""
        return self.target.interpreted

    def discard_spare(self) -> None:
        """Kill the spare worker if nobody took it (a run that failed before its first worker); idempotent."""
        spare, self.spare = self.spare, None
        if spare is not None:
            spare.kill()


def prepare(kernel: str | Path, *, ref: str | Path | None = None, shape: dict[str, Any] | None = None,
            config: dict[str, Any] | None = None, gpu: str | None = None, constraints: list[str] | None = None,
            replay: Any = None, search: bool = True, spare_worker: bool = False,
            timeout_s: float = 300.0) -> RunContext:
    """Set up a campaign (see the module docstring).

    Args:
        kernel / ref: the kernel file and an optional reference file.
        shape / config: overrides of SHAPE (CPU_SHAPE under the interpreter) and of the starting config.
        gpu: a GPU spec name for limits and the floor (default: the GPU present, or the replayed cache's GPU).
        constraints: extra constraint expressions added to the file's CONSTRAINTS.
        replay: a :class:`~kernelpilot.engine.runner.ReplayRunner` (its cache's context gives shape and GPU).
        search: build the search space (False for ``session``, whose versions are code changes: a kernel without
            tunables is fine there, and ``space`` is None).
        spare_worker: start the first worker process now (not for a replay), before the roofline: counting the
            reference's FLOPs imports Dynamo on its first use (1.9 s on a 2-core CPU machine, 4-5 s on an H100
            machine whose torch has no bytecode), and the worker's boot takes as long; done one after the other,
            every tune and optimize paid both (issue 11). Without it a worker is started all the same, to observe
            the buffers' roles for the floor (:func:`observe_roles`), and stopped afterwards.
        timeout_s: seconds that observation may take (the worker's boot and the reference's runs).

    Raises:
        UnguardedScriptError: called from a script's top level outside ``if __name__ == "__main__":``.
        RoleMismatch: a buffer role declared by ``setup`` contradicts what running the reference showed.
        ContractError: the kernel file breaks the contract (or is a folder), or a shape/config override is wrong.
        OptionError: a shape override of the wrong type (``N=abc`` where SHAPE holds a number).
        SpecError: ``gpu`` names no known GPU.
        SearchError: the cache was measured with another version of the kernel file, or no config satisfies the
            constraints.
    """
    from kernelpilot.search.space import SearchSpace, limits_from_spec

    t, laps = time.monotonic(), {}

    def lap(name: str) -> None:
        nonlocal t
        laps[name], t = round(time.monotonic() - t, 6), time.monotonic()

    check_main_guard()  # before any worker, file or folder
    check_kernel_path(kernel)
    check_kernel_path(ref, "reference file")
    target = detect_target(replay=replay is not None)
    early = _early_spare(kernel, ref, shape, target)  # boots while this process imports the kernel file
    try:
        kf = load_kernel(kernel, ref, interpreted=target.interpreted)
    except BaseException:
        if early is not None:
            early.kill()
        raise
    from kernelpilot.backends.registry import require_runnable

    require_runnable(kf)  # a CUDA .cu file without a GPU (a replay is not interpreted and passes)
    if constraints:
        kf.constraints = [*kf.constraints, *constraints]
    ctx = replay.context if replay is not None else None
    if ctx is not None and ctx.kernel_sha256 != kf.source_sha256:
        raise SearchError(f"the cache {replay.path} was measured with another version of {kf.path.name} "
                          f"(sha256 {ctx.kernel_sha256[:12]} vs {kf.source_sha256[:12]} now)",
                          "replay with the kernel file the cache was filled with, or fill a new cache")
    check_shape_values(shape, {**kf.shape, **(kf.cpu_shape or {})}, str(kf.path))
    shp = dict(ctx.shape) if ctx is not None and not shape else resolve_shape(kf, shape)
    detected = (ctx.gpu if ctx is not None and ctx.gpu != "cpu" else None) if target.is_replay else (
        gpu_name() if target.is_gpu else None)
    spec, note = _spec_for(gpu, target, detected)
    target = target.with_spec(detected or (spec.name if spec is not None else None),
                              spec.arch if spec is not None else None,
                              limits_from_spec(spec) if spec is not None else None)
    start = resolve_config(kf, config)
    space = None
    if search:
        space = SearchSpace.from_kernel(kf, target.limits)
        if space.size == 0:
            raise SearchError(f"{kf.path}: no config satisfies the constraints ({'; '.join(space.constraints)})",
                              "relax CONSTRAINTS or add candidate values to TUNABLES")
    # (an early spare left behind by a refusal above dies with its object: SpareWorker's finalizer)
    spare = _spare(kf, ref, shp, target, early) if not target.is_replay else None
    lap("load")
    try:
        # the worker observes the roles while this process builds the case and counts the FLOPs
        observed = _in_background(observe_roles, spare, shp, timeout_s) if spare is not None else None
        case = make_case(kf, shp, 0, "cpu")  # inputs on the CPU, only to count FLOPs and bytes
        lap("case")
        if spare is not None:
            counted_flops(kf, case)  # its first use imports Dynamo (seconds): while the spare boots and observes
        lap("flops")
        roles = observed() if observed is not None else None  # (the seconds it took beyond the above)
        lap("roles")
        # once, on the observed roles: declared bytes are judged against what was observed, never the declared minimum
        roof, work, note = roofline_for(kf, shp, spec, note, roles, case)
        lap("roofline")
        if not spare_worker and spare is not None:
            spare.kill()
            spare = None
    except BaseException:
        if spare is not None:
            spare.kill()  # (a process still observing is the thread's until its call ends, then the spare's)
        raise
    return RunContext(target=target, kf=kf, shape=shp, start=start, gpu=target.name, spec=spec, roofline=roof,
                      work=work, roofline_note=note, space=space, spare=spare, setup_s=laps)


def _in_background(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Start ``fn(*args)`` in a daemon thread (never joined at exit: a failed set-up does not wait for it); the
    function returned waits for it and returns its result or raises its exception."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter, raised there
            box["error"] = exc

    thread = threading.Thread(target=run, name="kp-set-up", daemon=True)
    thread.start()

    def wait() -> Any:
        thread.join()
        if "error" in box:
            raise box["error"]
        return box.get("value")
    return wait


def setup_line(setup_s: dict[str, float]) -> str:
    """One log line of where a command's seconds before its search went (``setup_s``: name -> seconds, in order,
    as :attr:`RunContext.setup_s` and the commands' own laps hold them), e.g. ``set-up 9.4 s: load 0.8, case 1.2,
    ...``. Raises nothing."""
    parts = ", ".join(f"{k} {v:.1f}" for k, v in setup_s.items())
    return f"set-up {sum(setup_s.values()):.1f} s: {parts}"


def observe_roles(spare: Any, shape: dict[str, Any], timeout_s: float = 300.0) -> Any:
    """The roles of the kernel file's tensors observed at ``shape`` by the worker process ``spare`` (a
    :class:`~kernelpilot.search.worker.SpareWorker`: the reference runs where the kernel will, isolated from this
    process; :func:`kernelpilot.search.stage_steps.observe_roles_in_worker`), or None when ``setup`` or the
    reference raises there (the first evaluation's check records why).

    Raises:
        RoleMismatch: a declaration of ``setup`` contradicts what was observed (docs/contract.md, "Buffer roles").
        KernelpilotError: the worker could not load the kernel file (as the first evaluation would).
    """
    from kernelpilot.kernels.roles import RoleReport

    data = spare.call("kernelpilot.search.stage_steps:observe_roles_in_worker", dict(shape), timeout_s=timeout_s)
    return None if data is None else RoleReport.model_validate(data)


def _spare(kf: KernelFile, ref: str | Path | None, shape: dict[str, Any], target: Target, early: Any = None) -> Any:
    """A :class:`~kernelpilot.search.worker.SpareWorker` on the first default device, with the options a campaign's
    workers share (the floor comes later): ``early`` (:func:`_early_spare`) when its options are these, else a new
    one (``early`` is killed)."""
    from kernelpilot.search.worker import SpareWorker, WorkerOptions, default_devices

    opts = WorkerOptions(kernel=str(kf.path), ref=str(ref) if ref else None, shape=shape,
                         interpreted=target.interpreted, activity=False)
    device = default_devices(target.interpreted)[0]
    if early is not None and early.matches(opts, device):
        return early
    if early is not None:
        early.kill()
    return SpareWorker(opts, device)


def _early_spare(kernel: str | Path, ref: str | Path | None, shape: dict[str, Any] | None, target: Target) -> Any:
    """A spare worker started before this process imports the kernel file, when the shape it will run at can be read
    from the file's source (:func:`kernelpilot.kernels.contract.literal_shape`), so that the two imports overlap
    (session 14, H100: fla-core's l2norm and Liger's RoPE took 17 s to import here, then 17 s again in the spare);
    None otherwise (a replay, a ``.cu`` file, a computed ``SHAPE``). The worker screens and imports the file itself,
    as every worker does. :func:`_spare` keeps it only when the options agree once the file is loaded."""
    from kernelpilot.kernels.contract import literal_shape
    from kernelpilot.search.worker import SpareWorker, WorkerOptions, default_devices

    shp = literal_shape(kernel, target.interpreted, shape) if not target.is_replay else None
    if shp is None:
        return None
    opts = WorkerOptions(kernel=str(Path(kernel).resolve()), ref=str(ref) if ref else None, shape=shp,
                         interpreted=target.interpreted, activity=False)
    return SpareWorker(opts, default_devices(target.interpreted)[0])


def check_same_device(folder: Path, recorded: str | None, ctx: RunContext, command: str) -> None:
    """Refuse to resume ``folder`` (its records say their times were measured on ``recorded``) on another device.

    Args:
        folder: the run or tune folder. recorded: its ``measured_on`` (None in folders written before it was
            recorded: not checked). ctx: this session's set-up (:attr:`RunContext.measured_on`).
        command: ``optimize`` or ``tune`` (for the hint).

    Raises:
        RunFolderError: the devices differ (an H200 search resumed on an H100, a GPU search under the interpreter).
    """
    from kernelpilot.errors import RunFolderError

    if recorded is not None and recorded != ctx.measured_on:
        raise RunFolderError(f"{folder} was measured on {recorded}; this session would measure on {ctx.measured_on}: "
                             f"its times would be judged against the other device's",
                             f"resume it where it was measured ({recorded}), or start a new search "
                             f"(kernelpilot {command} ... --out NEW)")
