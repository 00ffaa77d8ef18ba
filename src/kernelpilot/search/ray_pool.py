"""Evaluations on a Ray cluster (``kernelpilot tune --ray ADDRESS``): isolated workers inside Ray actors.

Each actor owns a :class:`kernelpilot.search.worker.Worker` (the same isolated worker process as a local search),
so a hang, a crash or a poisoned CUDA context of a config is contained on the remote host exactly as it is
locally, and answers come back as the same :class:`kernelpilot.search.model.Evaluation` objects.

* With GPUs in the cluster (and a search that is not interpreted) there is one actor per GPU: Ray gives each
  actor one GPU (``num_gpus=1``) and sets ``CUDA_VISIBLE_DEVICES`` for it; the worker inherits that (device
  ``"cuda"``). An interpreted search (the driver has no GPU: a laptop, CI) runs the Triton interpreter in CPU
  actors: ``n_workers`` of them, else ``$KERNELPILOT_RAY_CPU_ACTORS``, else the cluster's CPUs up to 4. Each
  actor reserves one CPU. A search on GPUs refuses a cluster without GPUs.
* ``Evaluation.worker`` names the actor that answered: ``ray:<slot>/<device>@<host>`` (``ray:1/cuda:3@node7``,
  ``ray:0/cpu@laptop``).
* The actor itself can fail beyond what its worker catches: the actor process dies (killed, OOM, its node
  lost) or stops answering. A dead actor makes the config a ``worker_crash``; an actor that does not answer
  within ``deadline_s`` makes it a ``timeout``. Either way the actor is killed and a fresh one takes its slot.
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
from kernelpilot.search.worker import Worker, WorkerOptions

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
        label = device
        if device == "cuda":
            import ray

            ids = ray.get_gpu_ids()
            label = f"cuda:{ids[0]}" if ids else "cuda"
        self.label = f"{name}/{label}@{socket.gethostname()}"
        # device "cuda", not "cuda:<i>": the worker must keep the CUDA_VISIBLE_DEVICES Ray set for this actor
        self.worker = Worker(opts, device, timeout_s=timeout_s, start_timeout_s=start_timeout_s)

    def ready(self) -> str:
        return self.label

    def evaluate(self, config: dict[str, Any], race_against_ns: float | None) -> str:
        ev = self.worker.evaluate(config, race_against_ns)
        return ev.model_copy(update={"worker": self.label}).model_dump_json()

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> Any:
        return self.worker.ab_samples(a, b, n)

    def restarts(self) -> int:
        return self.worker.restarts

    def close(self) -> None:
        self.worker.close()
        for folder in self._tmp:
            shutil.rmtree(folder, ignore_errors=True)


class _Slot:
    """One actor position: the live actor handle and the label of the last actor seen there."""

    def __init__(self, actor: Any, label: str) -> None:
        self.actor, self.label = actor, label


class RayPool:
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

    Raises:
        ToolMissingError: Ray is not installed.
        SearchError: the cluster cannot be reached, lacks the GPUs/CPUs for the actors, or they do not start.
    """

    def __init__(self, opts: WorkerOptions, address: str, *, n_workers: int | None = None, timeout_s: float = 120.0,
                 start_timeout_s: float = 120.0, deadline_s: float | None = None, ready_timeout_s: float = 120.0):
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
        self.device = "cuda" if gpus and not opts.interpreted else "cpu"
        if n_workers is None:
            if self.device == "cuda":
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
        need, have = ("GPU", gpus) if self.device == "cuda" else ("CPU", cpus)
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
        self._remote = ray.remote(num_gpus=1 if self.device == "cuda" else 0, num_cpus=1,
                                  max_restarts=0, max_task_retries=0)(_ActorBody)
        self.replaced = 0
        self._next = itertools.cycle(range(n))
        self._slots = [_Slot(self._spawn(i), f"ray:{i}") for i in range(n)]
        self.devices = [f"ray:{i}" for i in range(n)]
        refs = [s.actor.ready.remote() for s in self._slots]
        try:
            for slot, label in zip(self._slots, ray.get(refs, timeout=ready_timeout_s)):
                slot.label = label
        except Exception as exc:  # noqa: BLE001 - placement timeout, actor failing to start
            self.close()
            raise SearchError(f"the {n} Ray actors did not start within {ready_timeout_s:.0f} s: {exc}",
                              "check `ray status` (free CPUs/GPUs) and that kernelpilot, torch and triton are "
                              "installed on every node") from exc

    # -- actors
    def _spawn(self, i: int) -> Any:
        return self._remote.remote(self._opts_json, self._sources, self.device, self.timeout_s,
                                   self.start_timeout_s, f"ray:{i}")

    def _replace(self, i: int) -> None:
        """Kill the actor of slot ``i`` (dead or stuck) and start a fresh one there."""
        try:
            self._ray.kill(self._slots[i].actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        self._slots[i].actor = self._spawn(i)
        self.replaced += 1

    def _collect(self, i: int, ref: Any, config: dict[str, Any], t0: float, timeout: float | None) -> Evaluation:
        """The Evaluation behind ``ref`` (answered by slot ``i``), or a typed failure; replaces a lost actor.

        Raises:
            KernelpilotError: the actor's worker raised one (the kernel file cannot be loaded there).
        """
        ray = self._ray
        status: Status
        try:
            return Evaluation.model_validate_json(ray.get(ref, timeout=timeout))
        except ray.exceptions.GetTimeoutError:
            status = "timeout"
            message = (f"Ray actor {self._slots[i].label} gave no answer within {self.deadline_s:.0f} s: "
                       "actor killed and replaced")
        except ray.exceptions.RayActorError as exc:
            status = "worker_crash"
            message = f"Ray actor {self._slots[i].label} died: {str(exc).splitlines()[0] if str(exc) else exc!r}"
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, KernelpilotError):
                raise exc.cause from None
            return Evaluation(config=config, status="runtime_error", message=str(exc)[:2000],
                              wall_s=time.monotonic() - t0, worker=self._slots[i].label,
                              measured=self.device == "cuda")
        self._replace(i)
        return Evaluation(config=config, status=status, message=message[:2000], wall_s=time.monotonic() - t0,
                          worker=self._slots[i].label, measured=self.device == "cuda")

    # -- the WorkerPool interface
    def __enter__(self) -> "RayPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every actor's worker and the actors; shut Ray down when this pool started it."""
        for slot in self._slots:
            try:
                self._ray.get(slot.actor.close.remote(), timeout=15)
            except Exception:  # noqa: BLE001 - already gone, or stuck
                pass
            try:
                self._ray.kill(slot.actor, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
        self._slots = []
        if self._owns_runtime:
            self._owns_runtime = False
            self._ray.shutdown()

    @property
    def restarts(self) -> int:
        """Workers replaced inside the actors plus actors replaced by the pool."""
        total = self.replaced
        for slot in self._slots:
            try:
                total += int(self._ray.get(slot.actor.restarts.remote(), timeout=15))
            except Exception:  # noqa: BLE001 - a dead actor's count is lost with it
                pass
        return total

    def evaluate(self, config: dict[str, Any], race_against_ns: float | None = None) -> Evaluation:
        """Evaluate one config on the next actor (round-robin); every outcome is an :class:`Evaluation`."""
        i = next(self._next)
        t0 = time.monotonic()
        ref = self._slots[i].actor.evaluate.remote(config, race_against_ns)
        return self._collect(i, ref, config, t0, self.deadline_s)

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
        pending: dict[Any, tuple[int, int, float]] = {}  # ref -> (config index, slot, submitted at)
        results: dict[int, Evaluation] = {}
        nxt = 0
        while nxt < len(configs):
            while todo and idle:
                k, i = todo.popleft(), idle.popleft()
                pending[self._slots[i].actor.evaluate.remote(configs[k], race_against_ns)] = (k, i, time.monotonic())
            first_deadline = min(t + self.deadline_s for _, _, t in pending.values())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=max(0.0, first_deadline - time.monotonic()))
            now = time.monotonic()
            expired = [r for r, (_, _, t) in pending.items() if r not in ready and now >= t + self.deadline_s]
            for ref in [*ready, *expired]:
                k, i, t = pending.pop(ref)
                results[k] = self._collect(i, ref, configs[k], t, 0 if ref in expired else None)
                idle.append(i)
            while nxt in results:
                yield results.pop(nxt)
                nxt += 1

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> tuple[list[float], list[float]] | None:
        """Interleaved A/B samples on the next actor, or None when it failed (a lost actor is replaced)."""
        i = next(self._next)
        try:
            got = self._ray.get(self._slots[i].actor.ab_samples.remote(a, b, n), timeout=self.deadline_s)
        except (self._ray.exceptions.GetTimeoutError, self._ray.exceptions.RayActorError):
            self._replace(i)
            return None
        except self._ray.exceptions.RayTaskError:
            return None
        return (list(got[0]), list(got[1])) if got else None
