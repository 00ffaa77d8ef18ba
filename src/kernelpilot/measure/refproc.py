"""A reference the candidate cannot reach: reference outputs computed in a process that never ran the kernel
(docs/measuring.md, "A reference the candidate cannot reach").

A kernel that runs in the same process as its reference can change what the reference computes: a ``run_kernel``
that rebinds ``torch.softmax`` (or a session's version file that rebinds a torch function at import) makes the
reference agree with a wrong kernel — issue 24 recorded such a version "improved 9.5×" with an error of 2.16. So
each worker starts a :class:`ReferenceProcess` — a fresh interpreter (``multiprocessing`` *spawn*, not fork: none of
the worker's modules, patches or kernel code) that imports only the reference's file (the kernel file itself, or
``--ref``/the session's frozen ``check/reference.py``) and never calls anything but ``reference``. The check, the
shapes, the re-check and the timed launches kept in secret all ask it (:func:`kernelpilot.measure.correctness.reference_outputs`
looks it up with :func:`serving`).

Tensors travel through :mod:`torch.multiprocessing`'s sharing (CUDA IPC handles on a GPU, shared memory on the
CPU): the worker sends copies, the server upcasts them to float64 (native when that fails, as before), runs the
reference, and answers with its results. Results are cached by content (a keyed fingerprint of every input — key
drawn in the server, unknown to the worker — plus dtype and shape): the check's seeds, the same in every
evaluation of a search, are computed once per worker. The cache holds at most :data:`CACHE_BYTES` of results.

The server dies with its worker (``PR_SET_DEATHSIG`` on Linux; EOF on its pipe otherwise). Cost: one interpreter
start per worker, overlapped with the worker's own start (it is spawned before the kernel file is imported), one
copy of each input set per call, and none of the float64 work the cache saves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["CACHE_BYTES", "ReferenceProcess", "ReferenceServerError", "install", "serving", "shutdown",
           "start_for"]

#: Results kept by the server's content cache (bytes of float64 outputs), least recently used dropped first.
CACHE_BYTES = 2 << 30

_CURRENT: ReferenceProcess | None = None
#: 32-bit words fingerprinted at a time (two int64 temporaries of this many elements: 256 MiB).
_CHUNK = 1 << 24


class ReferenceServerError(RuntimeError):
    """The reference process died, could not import the reference, or did not answer."""


class ReferenceProcess:
    """A spawned process that serves ``reference`` of one file (see the module docstring).

    Args:
        reference_path: the ``.py`` file that defines ``reference`` (its sha256 is checked by the server before
            import: a file changed since the worker loaded it is refused).
        sha256: that file's sha256 as the worker read it.
        device: ``"cuda"`` or ``"cpu"``.
    """

    def __init__(self, reference_path: str | Path, sha256: str, device: str) -> None:
        import torch.multiprocessing as mp

        # on the CPU a fork of the worker taken before it imported the kernel file (torch already imported: ~0.1 s
        # instead of a new interpreter's 3-6 s on a small machine); on a GPU a new interpreter (spawn): a process
        # that may have initialised CUDA must not be forked
        ctx = mp.get_context("fork" if device == "cpu" else "spawn")
        self.path, self.sha256, self.device = str(Path(reference_path).resolve()), sha256, device
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.path, sha256, device), daemon=True,
                                name="kernelpilot-reference")
        # the worker is itself a daemon process, and multiprocessing refuses children to daemons (they would be
        # orphaned when it is terminated): this child dies with its parent instead (PR_SET_PDEATHSIG, pipe EOF)
        me = mp.current_process()
        was = me._config.get("daemon")  # type: ignore[attr-defined]
        me._config["daemon"] = False  # type: ignore[attr-defined]
        try:
            self.proc.start()
        finally:
            me._config["daemon"] = was  # type: ignore[attr-defined]
        child.close()
        self.calls = self.hits = 0

    def serves(self, kf: Any) -> bool:
        """True when this process serves ``kf``'s reference (the same file, unchanged)."""
        return str(Path(kf.reference_path).resolve()) == self.path and self.proc.is_alive()

    def outputs(self, inputs: dict[str, Any], outputs: list[str]) -> tuple[dict[str, Any], str]:
        """The reference's results for ``outputs`` on ``inputs`` (name -> tensor or scalar; copied before sending).

        Returns:
            (output name -> float64 tensor (native dtype when float64 failed), the precision used).

        Raises:
            Exception: what the reference raised (re-raised here with its type name and message), or
            ReferenceServerError when the process is gone.
        """
        import torch

        sent = {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
        if self.device == "cuda":
            torch.cuda.synchronize()
        try:
            self.conn.send(("ref", sent, list(outputs)))
            kind, payload = self.conn.recv()
        except (EOFError, OSError, BrokenPipeError) as exc:
            raise ReferenceServerError(f"the reference process ended ({exc!r}); exit code {self.proc.exitcode}") \
                from None
        self.calls += 1
        if kind == "raised":
            name, _, message = payload.partition(": ")
            raise type(name if name.isidentifier() else "ReferenceError", (Exception,), {})(message)
        refs, precision, hit = payload
        self.hits += int(hit)
        return {n: refs[n] for n in outputs}, precision

    def close(self) -> None:
        """Stop the process (it also stops when this one exits)."""
        try:
            self.conn.send(("stop",))
        except (OSError, BrokenPipeError):
            pass
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.proc.kill()


def install(server: ReferenceProcess | None) -> None:
    """Make ``server`` this process's reference process (None: references run here again)."""
    global _CURRENT
    _CURRENT = server


def shutdown() -> None:
    """Stop this process's reference process, if any (a worker told to stop)."""
    global _CURRENT
    if _CURRENT is not None:
        _CURRENT.close()
        _CURRENT = None


def serving(kf: Any) -> ReferenceProcess | None:
    """The reference process that serves ``kf``'s reference, or None (then the reference runs in this process)."""
    server = _CURRENT
    return server if server is not None and server.serves(kf) else None


def start_for(reference_path: str | Path, device: str) -> ReferenceProcess | None:
    """Start and install the reference process for a worker (None, nothing started, when the reference is not a
    ``.py`` file)."""
    import hashlib

    path = Path(reference_path)
    if path.suffix != ".py" or not path.is_file():
        return None
    server = ReferenceProcess(path, hashlib.sha256(path.read_bytes()).hexdigest(), device)
    install(server)
    return server


# -- the server side (runs in the spawned process)

def _die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``); elsewhere a
    no-op (the pipe's EOF ends the loop instead)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except Exception:  # noqa: BLE001 - not Linux
        pass


def _serve(conn: Any, path: str, sha256: str, device: str) -> None:
    """The server's loop: import the reference file, then answer ``("ref", inputs, outputs)`` requests."""
    import signal

    _die_with_parent()
    for sig in (signal.SIGTERM, signal.SIGINT):  # a fork of a worker inherits its ignored SIGTERM: stoppable again
        signal.signal(sig, signal.SIG_DFL)
    import hashlib

    try:
        if hashlib.sha256(Path(path).read_bytes()).hexdigest() != sha256:
            raise ReferenceServerError(f"{path} changed after the worker loaded it")
        from kernelpilot.kernels.contract import import_module_file

        reference = import_module_file(Path(path), "reference_server").reference
    except BaseException as exc:  # noqa: BLE001 - answered to every request, then exit on stop/EOF
        reference, failure = None, f"{type(exc).__name__}: {exc}"
    cache = _Cache(device)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "stop":
            return
        try:
            if reference is None:
                raise ReferenceServerError(f"the reference process could not load {path}: {failure}")
            conn.send(("ok", cache.answer(reference, msg[1], msg[2])))
        except BaseException as exc:  # noqa: BLE001 - the reference's own failure is the check's business
            conn.send(("raised", f"{type(exc).__name__}: {exc}"))


class _Cache:
    """Reference results by a keyed content fingerprint of the inputs (server side)."""

    def __init__(self, device: str) -> None:
        import secrets

        self.device = device
        self.key = secrets.randbits(61) | 1
        self.entries: dict[Any, tuple[dict[str, Any], str, int]] = {}
        self.bytes = 0

    def fingerprint(self, inputs: dict[str, Any], outputs: list[str]) -> Any:
        """A key of the inputs' contents: per tensor, its dtype, shape and two sums of its 32-bit words weighted by
        powers of a secret odd key modulo 2⁶¹ − 1 (computed on the tensor's device; a worker that does not know the
        key cannot make two input sets collide); scalars as they are."""
        import torch

        parts: list[Any] = [tuple(outputs)]
        for name in sorted(inputs):
            v = inputs[name]
            if not isinstance(v, torch.Tensor):
                parts.append((name, repr(v)))
                continue
            raw = v.detach().contiguous().view(-1).view(torch.uint8)
            pad = (-raw.numel()) % 4
            if pad:
                raw = torch.cat([raw, raw.new_zeros(pad)])
            all_words = raw.view(torch.int32)
            s1 = s2 = 0
            for start in range(0, all_words.numel(), _CHUNK):  # bounded temporaries on a multi-GiB input
                words = all_words[start:start + _CHUNK].to(torch.int64) & 0xFFFFFFFF
                idx = torch.arange(start, start + words.numel(), device=words.device, dtype=torch.int64)
                w = (idx * self.key + (self.key >> 7)) & ((1 << 31) - 1)
                s1 += int((words * w).sum())
                s2 += int((words ^ w).sum())
            parts.append((name, str(v.dtype), tuple(v.shape), s1, s2))
        return tuple(parts)

    def answer(self, reference: Any, inputs: dict[str, Any], outputs: list[str]) -> tuple[dict[str, Any], str, bool]:
        """(results, precision, cache hit) for one request; the results are the server's own tensors."""
        import torch

        from kernelpilot.measure.correctness import reference_outputs_local

        key = self.fingerprint(inputs, outputs)
        if key in self.entries:
            refs, precision, size = self.entries.pop(key)
            self.entries[key] = (refs, precision, size)  # most recently used last
            return refs, precision, True
        refs, precision = reference_outputs_local(reference, inputs, outputs)
        if self.device == "cuda":
            torch.cuda.synchronize()
        size = sum(t.numel() * t.element_size() for t in refs.values() if isinstance(t, torch.Tensor))
        while self.entries and self.bytes + size > CACHE_BYTES:
            _, (_, _, old) = next(iter(self.entries.items()))
            self.entries.pop(next(iter(self.entries)))
            self.bytes -= old
        if size <= CACHE_BYTES:
            self.entries[key] = (refs, precision, size)
            self.bytes += size
        return refs, precision, False
