"""Evaluations on a Ray cluster (``kernelpilot tune --ray ADDRESS``): isolated workers inside Ray actors.

Each actor owns a :class:`kernelpilot.search.worker.Worker` (the same isolated worker process as a local search),
so a hang, a crash or a poisoned CUDA context of a config is contained on the remote host exactly as it is
locally, and answers come back as the same :class:`kernelpilot.search.model.Evaluation` objects.

* With GPUs in the cluster (and a search that is not interpreted) there is one actor per GPU: Ray gives each
  actor one GPU (``num_gpus=1``) and sets ``CUDA_VISIBLE_DEVICES`` for it; the worker inherits that (device
  ``"cuda"``). An interpreted search (the driver has no GPU: a laptop, CI) runs the Triton interpreter in CPU
  actors: ``n_workers`` of them, else ``$KERNELPILOT_RAY_CPU_ACTORS``, else the cluster's CPUs up to 4. Each
  actor reserves one CPU. A search on GPUs refuses a cluster without GPUs.
* ``Evaluation.worker`` names the actor that answered: ``ray:<slot>/<device>@<host>#<node>`` with the first 8 hex
  digits of the Ray node id (``ray:1/cuda:3@node7#5f0c2a91``, ``ray:0/cpu@laptop#89d65668``): two nodes on one
  host (containers, a test cluster) are told apart. Actors are placed with Ray's ``SPREAD`` strategy, so the
  slots go to different nodes while there are nodes with room.
* Every actor reports the toolchain it runs (:mod:`kernelpilot.search.ray_toolchain`: Python, torch and triton
  versions, a hash of the kernelpilot sources it imported, its GPU's name) before it gets a config; an actor whose
  toolchain differs from the driver's is refused (``SearchError`` naming the node and the difference), because
  its answers land in the driver's cache under the driver's environment. A replacement is checked at its first
  answer.
* Before a config leads, the pool runs the device-activity audit in an actor (:meth:`RayPool.audit`), as a local
  search does (it needs a GPU; the interpreter skips it).
* The actor itself can fail beyond what its worker catches: the actor process dies (killed, OOM, its node
  lost) or stops answering. A dead actor makes the config a ``worker_crash``; an actor that does not answer
  within ``deadline_s`` makes it a ``timeout``. Either way the actor is killed and a fresh one takes its slot
  (on the same node when it has room: the dead actor's CPU/GPU is free again). The first request of every actor
  may take ``ready_timeout_s`` more: a replacement must start, and each actor starts its worker then.
* Each answer of an actor carries its worker's restart count, so :attr:`RayPool.restarts` asks no actor (a busy
  one would hold it up) and keeps the counts of replaced actors; :meth:`RayPool.abort` kills the actors at once
  (an interrupted search), :meth:`RayPool.close` stops their workers first.
* ``map`` keeps one config in flight per actor and hands the next config to whichever actor finishes first, so
  a crash is charged to the one config that was running and a slow actor does not hold up the others.
  ``evaluate`` (a strategy's sequential calls) goes round-robin over the actors.
* The kernel file (and reference file) travel with the actor: a host that lacks the driver's path, or has other
  bytes at it, gets a private copy in a temporary folder. kernelpilot, torch and triton must be installed on
  every host (the actors import them).

Ray is an optional dependency (``pip install 'kernelpilot[ray]'``).
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any, Iterable, Iterator

from kernelpilot.errors import KernelpilotError, SearchError, ToolMissingError
from kernelpilot.search.model import Evaluation, Status
from kernelpilot.search.ray_toolchain import TOOLCHAIN_HINT, ready_answer, refusal, refused, toolchain
from kernelpilot.search.runner_base import RunnerBase
from kernelpilot.search.worker import Worker, WorkerOptions
from kernelpilot.target import Target

__all__ = ["CPU_ACTORS_ENV", "RayPool"]

#: Environment variable: actors to start on a cluster without GPUs (the CLI has no flag for it).
CPU_ACTORS_ENV = "KERNELPILOT_RAY_CPU_ACTORS"
#: Default CPU actors: the cluster's CPUs, at most this many (each one holds a torch + interpreter process).
_MAX_DEFAULT_CPU_ACTORS = 4


def _materialize(path: str, source: bytes, folder: list[str]) -> str:
    """``path`` when this host has exactly ``source`` there, else a private copy (same file name) in a new
    temporary folder appended to ``folder``."""
    p = Path(path)
    try:
        if p.is_file() and p.read_bytes() == source:
            return path
    except OSError:
        pass
    if not folder:
        folder.append(tempfile.mkdtemp(prefix="kernelpilot-ray-"))
    copy = Path(folder[0]) / p.name
    copy.write_bytes(source)
    return str(copy)


class _ActorBody:
    """What runs inside one Ray actor: a local Worker bound to the actor's GPU (or the CPU)."""

    def __init__(self, opts_json: str, sources: dict[str, bytes], device: str, timeout_s: float,
                 start_timeout_s: float, name: str) -> None:
        opts = WorkerOptions.model_validate_json(opts_json)
        self._tmp: list[str] = []
        update = {k: _materialize(getattr(opts, k), src, self._tmp) for k, src in sources.items()}
        opts = opts.model_copy(update=update)
        import ray

        label, gpu = device, None
        if Target.from_device(device).is_gpu:
            ids = ray.get_gpu_ids()
            label, gpu = (f"cuda:{ids[0]}", ids[0]) if ids else ("cuda", None)
        node = ray.get_runtime_context().get_node_id()
        self.label = f"{name}/{label}@{socket.gethostname()}#{node[:8]}"
        self.toolchain = toolchain(gpu)
        # device "cuda", not "cuda:<i>": the worker must keep the CUDA_VISIBLE_DEVICES Ray set for this actor
        self.worker = Worker(opts, device, timeout_s=timeout_s, start_timeout_s=start_timeout_s)

    def ready(self) -> tuple[str, dict[str, str | None]]:
        return self.label, self.toolchain

    # every answer carries the worker's restart count, so the driver never has to ask a busy actor for it
    def evaluate(self, config: dict[str, Any], race_against_ns: float | None) -> tuple[str, int]:
        ev = self.worker.evaluate(config, race_against_ns)
        return ev.model_copy(update={"worker": self.label}).model_dump_json(), self.worker.restarts

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> tuple[Any, int]:
        return self.worker.ab_samples(a, b, n), self.worker.restarts

    def audit(self, config: dict[str, Any]) -> tuple[dict[str, Any] | None, int]:
        return self.worker.audit(config), self.worker.restarts

    def close(self) -> None:
        self.worker.close()
        for folder in self._tmp:
            shutil.rmtree(folder, ignore_errors=True)


#: Longest single wait on Ray (s): a SIGINT/SIGTERM handler runs between two waits, never inside one.
_WAIT_SLICE_S = 0.5


def _unwrapped(call: Any, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, re-raising a ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``,
    the run's ``RunInterrupted``) that a signal handler raised inside Ray's Cython code as itself: it comes out of
    there as ``SystemError: ... returned a result with an exception set`` with the handler's exception as its
    context (observed with Ray 2.60)."""
    try:
        return call(*args, **kwargs)
    except SystemError as exc:
        inner = exc.__cause__ or exc.__context__
        if isinstance(inner, BaseException) and not isinstance(inner, Exception):
            raise inner from None
        raise


def _wait(ray: Any, refs: list[Any], num_returns: int, timeout: float | None) -> tuple[list[Any], list[Any]]:
    """``ray.wait(refs, num_returns=..., timeout=...)`` in slices of at most :data:`_WAIT_SLICE_S` s.

    One long ``ray.wait`` holds Python's signal handlers until it returns (observed with Ray 2.60: Ctrl-C during
    ``tune --ray`` took effect only when the config in flight ended, 85 s later); between slices the handler of
    :class:`kernelpilot.app.interrupt.GracefulStop` runs and stops the search."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if end is None else max(0.0, end - time.monotonic())
        step = _WAIT_SLICE_S if left is None else min(_WAIT_SLICE_S, left)
        ready, rest = _unwrapped(ray.wait, refs, num_returns=num_returns, timeout=step)
        if len(ready) >= num_returns or (left is not None and left <= step):
            return ready, rest


def _get(ray: Any, ref: Any, timeout: float | None) -> Any:
    """``ray.get(ref, timeout=timeout)`` (``ref`` one object or a list) waiting through :func:`_wait`.

    Raises:
        ray.exceptions.GetTimeoutError: not every object was ready within ``timeout``; else what ``ray.get``
            raises (the actor died, the task raised).
    """
    refs = ref if isinstance(ref, list) else [ref]
    ready, _ = _wait(ray, refs, len(refs), timeout)
    if len(ready) < len(refs):
        raise ray.exceptions.GetTimeoutError(f"{len(refs) - len(ready)} of {len(refs)} Ray answers not ready "
                                             f"within {timeout} s")
    return _unwrapped(ray.get, ref)


def _driver_gpu_index() -> str:
    """The physical GPU this driver's first CUDA device is (the first entry of ``CUDA_VISIBLE_DEVICES``, else 0)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return visible or "0"


class _Slot:
    """One actor position: the live actor handle, the label of the last actor seen there, whether the actor has not
    answered a request yet (its first answer may include its start and its worker's), the ``ready`` answer still to
    check of a replacement, and the restarts of the actor's worker as its last answer counted them."""

    def __init__(self, actor: Any, label: str) -> None:
        self.actor, self.label, self.fresh, self.ready_ref, self.restarts = actor, label, True, None, 0


class RayPool(RunnerBase):
    """The :class:`kernelpilot.search.worker.WorkerPool` interface over Ray actors (see the module docstring).

    Args:
        opts: the search's worker options.
        address: the Ray cluster (``127.0.0.1:6380``, ``auto``, ``ray://host:10001``, or ``local`` to start a
            fresh one in this process; passed to ``ray.init`` unless Ray is already initialized here).
        n_workers: actors to start (default: the cluster's GPUs; without GPUs or when interpreted,
            ``$KERNELPILOT_RAY_CPU_ACTORS`` or the cluster's CPUs up to 4).
        timeout_s: per-config limit inside each actor's worker (a hang there becomes ``timeout``).
        start_timeout_s: seconds each actor's worker may take to load the kernel.
        deadline_s: seconds the driver waits for one answer of an actor before it calls the config a
            ``timeout`` and replaces the actor (default ``timeout_s + start_timeout_s + 30``).
        ready_timeout_s: seconds to wait for the actors to be placed and started.
        runtime_env: Ray's ``runtime_env`` of the actors (``{"env_vars": {...}}`` ...; None: the nodes' own
            environment). Whatever it changes, the actors' toolchain is still checked against the driver's.

    Raises:
        ToolMissingError: Ray is not installed.
        SearchError: the cluster cannot be reached, lacks the GPUs/CPUs for the actors, or they do not start.
    """

    audits = True  # the device-activity audit runs on the next actor (:meth:`audit`)

    def __init__(self, opts: WorkerOptions, address: str, *, n_workers: int | None = None, timeout_s: float = 120.0,
                 start_timeout_s: float = 120.0, deadline_s: float | None = None, ready_timeout_s: float = 120.0,
                 runtime_env: dict[str, Any] | None = None):
        try:
            import ray
        except ImportError as exc:
            raise ToolMissingError("--ray needs Ray, which is not installed",
                                   "pip install 'kernelpilot[ray]' (or pip install ray) on every host") from exc
        self._ray = ray
        self._owns_runtime = False
        self._slots: list[_Slot] = []
        try:
            if not ray.is_initialized():
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
                self._owns_runtime = True
            resources = ray.cluster_resources()
        except Exception as exc:  # noqa: BLE001 - any connection failure
            raise SearchError(f"cannot reach the Ray cluster at {address!r}: {exc}",
                              "start it with `ray start --head --port 6380` and pass HOST:6380, "
                              "or use --ray local") from exc
        gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 0))
        if not gpus and not opts.interpreted:
            self.close()
            raise SearchError(f"the search runs on GPUs but the Ray cluster at {address!r} has none",
                              "add GPU nodes to the cluster (ray start --num-gpus N), or search without --ray")
        self.target = Target.gpu() if gpus and not opts.interpreted else Target.cpu()
        if n_workers is None:
            if self.target.is_gpu:
                n_workers = gpus
            else:
                env = os.environ.get(CPU_ACTORS_ENV, "").strip()
                try:
                    n_workers = int(env) if env else min(_MAX_DEFAULT_CPU_ACTORS, cpus)
                except ValueError:
                    self.close()
                    raise SearchError(f"{CPU_ACTORS_ENV}={env!r} is not a whole number",
                                      "set it to the number of CPU actors, e.g. 2") from None
        n = max(1, int(n_workers))
        need, have = ("GPU", gpus) if self.target.is_gpu else ("CPU", cpus)
        if n > have:
            self.close()
            raise SearchError(f"{n} Ray actors need {n} {need}s; the cluster at {address!r} has {have}",
                              f"start fewer actors ({CPU_ACTORS_ENV} on CPU clusters) or add nodes")
        self.timeout_s, self.start_timeout_s = timeout_s, start_timeout_s
        self.deadline_s = deadline_s if deadline_s is not None else timeout_s + start_timeout_s + 30.0
        self._opts_json = opts.model_dump_json()
        self._sources = {"kernel": Path(opts.kernel).read_bytes()}
        if opts.ref:
            self._sources["ref"] = Path(opts.ref).read_bytes()
        self._remote = ray.remote(num_gpus=1 if self.target.is_gpu else 0, num_cpus=1, max_restarts=0,
                                  max_task_retries=0, scheduling_strategy="SPREAD",
                                  **({"runtime_env": runtime_env} if runtime_env else {}))(_ActorBody)
        self.replaced, self._lost_restarts = 0, 0
        self.ready_timeout_s = ready_timeout_s
        self.toolchain = toolchain(_driver_gpu_index() if self.target.is_gpu else None)
        self._next = itertools.cycle(range(n))
        self._slots = [_Slot(self._spawn(i), f"ray:{i}") for i in range(n)]
        self.devices = [f"ray:{i}" for i in range(n)]
        refs = [s.actor.ready.remote() for s in self._slots]
        try:
            answers = _get(ray, refs, ready_timeout_s)
        except Exception as exc:  # noqa: BLE001 - placement timeout, actor failing to start
            self.close()
            raise SearchError(f"the {n} Ray actors did not start within {ready_timeout_s:.0f} s: {exc}",
                              "check `ray status` (free CPUs/GPUs) and that kernelpilot, torch and triton are "
                              "installed on every node") from exc
        lines: list[str] = []
        for slot, answer in zip(self._slots, answers):
            slot.label, tools = ready_answer(answer, slot.label)
            lines += refused(slot.label, self.toolchain, tools)
        if lines:
            self.close()
            raise SearchError(refusal(lines), TOOLCHAIN_HINT)

    # -- actors
    def _spawn(self, i: int) -> Any:
        return self._remote.remote(self._opts_json, self._sources, self.target.record, self.timeout_s,
                                   self.start_timeout_s, f"ray:{i}")

    def _replace(self, i: int) -> None:
        """Kill the actor of slot ``i`` (dead or stuck) and start a fresh one there; its toolchain is checked when
        it first answers (:meth:`_check_fresh`)."""
        slot = self._slots[i]
        try:
            self._ray.kill(slot.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        self._lost_restarts += slot.restarts
        slot.actor = self._spawn(i)
        slot.ready_ref, slot.fresh, slot.restarts = slot.actor.ready.remote(), True, 0
        self.replaced += 1

    def _deadline_s(self, i: int) -> float:
        """Seconds slot ``i`` may take to answer: ``deadline_s``, plus ``ready_timeout_s`` for an actor that has not
        answered a request yet (a replacement must start first; every actor starts its worker on its first
        request)."""
        return self.deadline_s + (self.ready_timeout_s if self._slots[i].fresh else 0.0)

    def _check_fresh(self, i: int) -> None:
        """After the first answer of slot ``i``'s actor: no longer fresh; for a replacement, its label, and a refusal
        when its toolchain differs.

        Raises:
            SearchError: the replacement runs another toolchain than the driver
                (:func:`kernelpilot.search.ray_toolchain.toolchain_differences`).
        """
        slot = self._slots[i]
        slot.fresh, ref, slot.ready_ref = False, slot.ready_ref, None
        if ref is None:  # an actor checked when the pool started, or already
            return
        answer = _get(self._ray, ref, self.ready_timeout_s)  # it answered before the config
        slot.label, tools = ready_answer(answer, slot.label)
        lines = refused(slot.label, self.toolchain, tools)
        if lines:
            raise SearchError(refusal(lines), TOOLCHAIN_HINT)

    def _collect(self, i: int, ref: Any, config: dict[str, Any], t0: float, timeout: float | None) -> Evaluation:
        """The Evaluation behind ``ref`` (answered by slot ``i``), or a typed failure; replaces a lost actor.

        Raises:
            KernelpilotError: the actor's worker raised one (the kernel file cannot be loaded there).
            SearchError: a replacement actor runs another toolchain than the driver.
        """
        ray = self._ray
        status: Status
        waited_s = self._deadline_s(i)
        try:
            answer = _get(ray, ref, timeout)
        except ray.exceptions.GetTimeoutError:
            status = "timeout"
            message = (f"Ray actor {self._slots[i].label} gave no answer within {waited_s:.0f} s: "
                       "actor killed and replaced")
        except ray.exceptions.RayActorError as exc:
            status = "worker_crash"
            message = f"Ray actor {self._slots[i].label} died: {str(exc).splitlines()[0] if str(exc) else exc!r}"
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, KernelpilotError):
                raise exc.cause from None
            return Evaluation(config=config, status="runtime_error", message=str(exc)[:2000],
                              wall_s=time.monotonic() - t0, worker=self._slots[i].label,
                              measured=self.target.measured)
        else:
            self._check_fresh(i)
            text, self._slots[i].restarts = answer
            ev = Evaluation.model_validate_json(text)
            self._slots[i].label = ev.worker or self._slots[i].label
            return ev
        label = self._slots[i].label
        self._replace(i)
        return Evaluation(config=config, status=status, message=message[:2000], wall_s=time.monotonic() - t0,
                          worker=label, measured=self.target.measured)

    def _request(self, method: str, *args: Any) -> tuple[Any, dict[str, str] | None]:
        """Call ``method`` (``ab_samples``, ``audit``) on the next actor: (its answer, None), or (None, the failure
        as ``{"status", "message"}``) when the actor died, did not answer in time (both: replaced) or raised."""
        ray = self._ray
        i = next(self._next)
        waited_s = self._deadline_s(i)
        try:
            got, restarts = _get(ray, getattr(self._slots[i].actor, method).remote(*args), waited_s)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError) as exc:
            timed_out = isinstance(exc, ray.exceptions.GetTimeoutError)
            what = f"gave no answer within {waited_s:.0f} s" if timed_out else "died"
            failure = {"status": "timeout" if timed_out else "worker_crash",
                       "message": f"Ray actor {self._slots[i].label} {what} during {method}: actor replaced"}
            self._replace(i)
            return None, failure
        except ray.exceptions.RayTaskError as exc:
            return None, {"status": "runtime_error", "message": f"{method} failed on Ray actor "
                                                                 f"{self._slots[i].label}: {exc}"[:2000]}
        self._check_fresh(i)
        self._slots[i].restarts = int(restarts)
        return got, None

    # -- the WorkerPool interface
    def __enter__(self) -> "RayPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every actor's worker (politely: each actor stops it and removes its private copies), then the
        actors; shut Ray down when this pool started it."""
        self._stop(polite=True)

    def abort(self) -> None:
        """Kill every actor now, without waiting for the config in flight (an interrupted search); their workers
        exit when they find their parent gone (:mod:`kernelpilot.procguard`)."""
        self._stop(polite=False)

    def _stop(self, *, polite: bool) -> None:
        closing = [s.actor.close.remote() for s in self._slots] if polite else []
        if closing:
            try:
                _wait(self._ray, closing, len(closing), 15.0)
            except Exception:  # noqa: BLE001 - actors already gone
                pass
        for slot in self._slots:
            try:
                self._ray.kill(slot.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._slots = []
        if self._owns_runtime:
            self._owns_runtime = False
            self._ray.shutdown()

    @property
    def restarts(self) -> int:
        """Actors replaced by the pool plus workers replaced inside the actors (those of replaced actors
        included), as the actors' answers counted them: asks no actor."""
        return self.replaced + self._lost_restarts + sum(s.restarts for s in self._slots)

    def evaluate(self, config: dict[str, Any], race_against_ns: float | None = None) -> Evaluation:
        """Evaluate one config on the next actor (round-robin); every outcome is an :class:`Evaluation`."""
        i = next(self._next)
        t0 = time.monotonic()
        ref = self._slots[i].actor.evaluate.remote(config, race_against_ns)
        return self._collect(i, ref, config, t0, self._deadline_s(i))

    @property
    def labels(self) -> list[str]:
        """Each slot's actor as its answers name it (``ray:<slot>/<device>@<host>#<node>``), in slot order; a
        replacement that has not answered yet keeps the label of the actor it replaced."""
        return [s.label for s in self._slots]

    @property
    def parallel(self) -> int:
        """Configs this pool evaluates at once: one per actor."""
        return len(self._slots)

    def map(self, configs: Iterable[dict[str, Any]], race_against_ns: float | None = None) -> Iterator[Evaluation]:
        """Evaluate ``configs`` in parallel, one in flight per actor, each to the first free actor; yields the
        results in input order. ``race_against_ns``: the incumbent's time, to race clearly slower candidates out."""
        ray = self._ray
        configs = list(configs)
        todo = deque(range(len(configs)))
        idle = deque(range(len(self._slots)))
        pending: dict[Any, tuple[int, int, float]] = {}  # ref -> (config index, slot, answer due at)
        results: dict[int, Evaluation] = {}
        nxt = 0
        while nxt < len(configs):
            while todo and idle:
                k, i = todo.popleft(), idle.popleft()
                ref = self._slots[i].actor.evaluate.remote(configs[k], race_against_ns)
                pending[ref] = (k, i, time.monotonic() + self._deadline_s(i))
            first_due = min(due for _, _, due in pending.values())
            ready, _ = _wait(ray, list(pending), 1, max(0.0, first_due - time.monotonic()))
            now = time.monotonic()
            expired = [r for r, (_, _, due) in pending.items() if r not in ready and now >= due]
            for ref in [*ready, *expired]:
                k, i, due = pending.pop(ref)
                results[k] = self._collect(i, ref, configs[k], due - self._deadline_s(i),
                                           0 if ref in expired else None)
                idle.append(i)
            while nxt in results:
                yield results.pop(nxt)
                nxt += 1

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> tuple[list[float], list[float]] | None:
        """Interleaved A/B samples on the next actor, or None when it failed (a lost actor is replaced)."""
        got, _failure = self._request("ab_samples", a, b, n)
        return (list(got[0]), list(got[1])) if got else None

    def audit(self, config: dict[str, Any]) -> dict[str, Any] | None:
        """The device-activity audit of ``config`` on the next actor (:meth:`kernelpilot.search.worker.Worker.audit`,
        the audit a local search runs before a config leads): ``{"status", "message"}`` of what it found, of the
        worker's failure, or of the actor's (dead or silent: ``worker_crash``/``timeout``, replaced); None when
        clean."""
        got, failure = self._request("audit", config)
        return failure if failure is not None else got
