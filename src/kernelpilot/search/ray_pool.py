"""Evaluations on a Ray cluster (``kernelpilot tune --ray ADDRESS``): one Ray actor per GPU of the cluster.

Each actor owns a :class:`kernelpilot.search.worker.Worker` (the same isolated worker process as a local search),
so a hang, a crash or a poisoned CUDA context is contained on the remote host exactly as it is locally. Ray
assigns each actor one GPU (``num_gpus=1``) and sets ``CUDA_VISIBLE_DEVICES`` for it; the worker inherits that
(device ``"cuda"``). Without GPUs in the cluster (a test on a laptop) the actors run the interpreter on CPUs.

Ray is an optional dependency (``pip install 'kernelpilot[ray]'``).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from kernelpilot.errors import SearchError, ToolMissingError
from kernelpilot.search.model import Evaluation
from kernelpilot.search.worker import Worker, WorkerOptions

__all__ = ["RayPool"]


class _ActorBody:
    """What runs inside one Ray actor: a local Worker bound to the actor's GPU (or the CPU)."""

    def __init__(self, opts_json: str, device: str, timeout_s: float) -> None:
        self.worker = Worker(WorkerOptions.model_validate_json(opts_json), device, timeout_s=timeout_s)

    def evaluate(self, config: dict[str, Any], race_against_ns: float | None) -> str:
        return self.worker.evaluate(config, race_against_ns).model_dump_json()

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> Any:
        return self.worker.ab_samples(a, b, n)

    def restarts(self) -> int:
        return self.worker.restarts

    def close(self) -> None:
        self.worker.close()


class RayPool:
    """The :class:`kernelpilot.search.worker.WorkerPool` interface over Ray actors.

    Args:
        opts: the search's worker options.
        address: the Ray cluster (``auto``, ``ray://host:10001``, or ``local`` to start one here).
        n_workers: actors to start (default: the cluster's GPUs, or 1 without GPUs).
        timeout_s: per-config limit inside each actor's worker.

    Raises:
        ToolMissingError: Ray is not installed.
        SearchError: the cluster cannot be reached.
    """

    def __init__(self, opts: WorkerOptions, address: str, *, n_workers: int | None = None, timeout_s: float = 120.0):
        try:
            import ray
        except ImportError as exc:
            raise ToolMissingError("--ray needs Ray, which is not installed",
                                   "pip install 'kernelpilot[ray]' (or pip install ray) on every host") from exc
        self._ray = ray
        try:
            if not ray.is_initialized():
                ray.init(address=None if address == "local" else address, ignore_reinit_error=True,
                         include_dashboard=False, log_to_driver=False)
        except Exception as exc:  # noqa: BLE001 - any connection failure
            raise SearchError(f"cannot reach the Ray cluster at {address!r}: {exc}",
                              "start it with `ray start --head` and pass its address, or use --ray local") from exc
        gpus = int(ray.cluster_resources().get("GPU", 0))
        n = n_workers or max(1, gpus)
        device = "cuda" if gpus and not opts.interpreted else "cpu"
        remote = ray.remote(num_gpus=1 if device == "cuda" else 0, num_cpus=1)(_ActorBody)
        self.devices = [f"ray:{i}" for i in range(n)]
        self._actors = [remote.remote(opts.model_dump_json(), device, timeout_s) for _ in range(n)]

    def __enter__(self) -> "RayPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every actor's worker and the actors."""
        for actor in self._actors:
            try:
                self._ray.get(actor.close.remote())
                self._ray.kill(actor)
            except Exception:  # noqa: BLE001 - already gone
                pass

    @property
    def restarts(self) -> int:
        """Workers replaced inside the actors."""
        return sum(self._ray.get([a.restarts.remote() for a in self._actors]))

    def evaluate(self, config: dict[str, Any], race_against_ns: float | None = None) -> Evaluation:
        """Evaluate one config on the first actor."""
        return Evaluation.model_validate_json(self._ray.get(self._actors[0].evaluate.remote(config, race_against_ns)))

    def map(self, configs: Iterable[dict[str, Any]]) -> Iterator[Evaluation]:
        """Evaluate configs spread round-robin over the actors (in parallel); yields results in input order."""
        refs = [self._actors[i % len(self._actors)].evaluate.remote(c, None) for i, c in enumerate(configs)]
        for ref in refs:
            yield Evaluation.model_validate_json(self._ray.get(ref))

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> tuple[list[float], list[float]] | None:
        """Interleaved A/B samples on the first actor."""
        return self._ray.get(self._actors[0].ab_samples.remote(a, b, n))
