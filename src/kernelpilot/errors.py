"""Errors kernelpilot raises on bad input, missing tools and failed runs.

Every error carries what went wrong (``message``) and what to do about it (``hint``), so the CLI can print
both and exit non-zero, and agents reading ``--json`` output get the same two fields.
"""

from __future__ import annotations


class KernelpilotError(Exception):
    """Base class: a problem the user can act on.

    Args:
        message: what is wrong, naming the file, field or tool involved.
        hint: what to do next (may be empty).
    """

    #: The process exit status the command line gives this error (1; a bad option 2, an interrupted run 130/143).
    exit_code: int = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_dict(self) -> dict[str, str]:
        """The error as a JSON-ready dict: ``{"error": type name, "message": ..., "hint": ...}``."""
        return {"error": type(self).__name__, "message": self.message, "hint": self.hint}

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class ContractError(KernelpilotError):
    """A kernel file (or reference file) breaks the kernel-file contract in docs/contract."""


class ScreenRefused(ContractError):
    """The static screen (:mod:`kernelpilot.measure.screen`) refused a kernel or reference file before it ran: it
    patches timing or kernelpilot functions, runs hidden code, walks the heap or frames, reads /proc, ..."""


class DeclarationError(ContractError):
    """A kernel file declares less work than its tensors or its reference need (``bytes_moved()``/``flops()``
    below the minimum): accepting it would lower the speed-of-light floor (:mod:`kernelpilot.kernels.workload`)."""


class CompileError(ContractError):
    """A kernel file did not compile (nvcc for a CUDA ``.cu`` file): the message holds the compiler's error lines
    with their file:line, the hint the command that failed. In a search it is the config's ``compile_error``."""


class ToolMissingError(KernelpilotError):
    """An external tool (ncu, a GPU, git) that the command needs is not available."""


class MissingDependencyError(KernelpilotError, ImportError):
    """An optional Python package a feature needs is not installed (pandas for ``to_dataframe()``). It is also an
    :class:`ImportError`, so ``except ImportError`` catches it; the hint names the extra that installs it."""


class ProfileError(KernelpilotError):
    """Nsight Compute ran but produced no usable report (permission, crash, no kernel matched)."""


class CountersNotPermitted(ProfileError):
    """The driver refused Nsight Compute access to the GPU's performance counters (``ERR_NVGPUCTRPERM``): no
    profile can be taken on this machine until an administrator allows it; a light card is the fallback."""


class ReportError(KernelpilotError):
    """An Nsight Compute report or a kernelpilot record could not be read (missing, corrupt, wrong kind)."""


class SpecError(KernelpilotError):
    """A GPU spec file is malformed, a value lacks its source, or the GPU is unknown."""


class KernelRunError(KernelpilotError):
    """The kernel raised, crashed the GPU context, or timed out while being checked, timed or profiled."""


class KernelFailed(KernelRunError):
    """The kernel file failed inside its isolated worker process, with a typed failure.

    Args:
        message: what happened, naming the kernel file and (for a dead process) its exit code or signal.
        hint: what to do next.
        failure: the failure status, in the vocabulary of :data:`kernelpilot.search.model.Status`: ``timeout``
            (no answer within ``--timeout-s``), ``worker_crash`` (the process died: a segfault, ``os._exit``, or a
            ``sys.exit`` the worker caught), ``compile_error``, ``runtime_error``, ``illegal_memory_access``, ...
    """

    def __init__(self, message: str, hint: str = "", failure: str = "runtime_error") -> None:
        super().__init__(message, hint)
        self.failure = failure

    def to_dict(self) -> dict[str, str]:
        """``{"error", "message", "hint", "failure"}``: the base fields plus the typed failure status."""
        return {**super().to_dict(), "failure": self.failure}


class RunFolderError(KernelpilotError):
    """The run folder cannot be used (exists and is not a kernelpilot run, or a record in it is corrupt)."""


class SearchError(KernelpilotError):
    """A search cannot be set up: a bad search space (constraint syntax, unknown name), an unknown strategy."""


class ExperienceError(KernelpilotError):
    """The experience log (:mod:`kernelpilot.experience`) cannot be used: its file is not a SQLite database or not
    an experience log, was written by a newer kernelpilot, cannot be created; or a file to import or merge is
    missing or holds a line that is not a valid entry (the message names the file and line)."""


class OptionError(KernelpilotError):
    """A command-line option (or the API keyword behind it) has a value no run can use: a negative time limit, zero
    seeds, a shape value of the wrong type, an unknown arch. The message names the option and the value given; the
    command line exits 2 (a usage error)."""

    exit_code = 2


class SkillInstallError(KernelpilotError):
    """``kernelpilot skill install`` cannot write the agent skill: a different file already sits where it goes (it
    is left as it was unless ``--force``), or the path is a folder or cannot be written. The message names the path."""


class RecordError(RunFolderError):
    """Records of a run folder fail validation (against their schema, against each other, or against git).

    Args:
        message: a summary naming the folder and the first problems.
        hint: what to do.
        problems: one dict per problem: ``{"file": path relative to the run, "problem": what is wrong,
            "fix": what to do}``.
    """

    def __init__(self, message: str, hint: str = "", problems: list[dict[str, str]] | None = None) -> None:
        super().__init__(message, hint)
        self.problems = list(problems or [])

    def to_dict(self) -> dict:  # type: ignore[override]
        """``{"error", "message", "hint", "problems"}``: the base fields and every problem found."""
        return {**super().to_dict(), "problems": self.problems}


class Interrupted(KernelpilotError):
    """A run stopped on SIGINT or SIGTERM: what was decided before is recorded; the hint says how to resume.

    Args:
        message: what was interrupted and what is kept. hint: the command that resumes it.
        signum: the signal's number (the command line exits ``128 + signum``: 130 for SIGINT, 143 for SIGTERM).
    """

    def __init__(self, message: str, hint: str = "", signum: int = 2) -> None:
        super().__init__(message, hint)
        self.signum = signum
        self.exit_code = 128 + signum


class RoleMismatch(DeclarationError):
    """A buffer's declared role (``outputs``, ``inplace``, ``partial``, ``scratch``, a ``const`` pointer) contradicts
    what running the reference showed (:mod:`kernelpilot.kernels.roles`): an input declared scratch that the
    reference reads, an output it never writes, an input it writes, ``partial`` on a tensor read in full.

    Args:
        message: what was declared and what was observed, naming the file and the tensor.
        hint: what to declare instead.
        tensor: the tensor's name. claim: the declared role. observed: what running the reference showed.
    """

    def __init__(self, message: str, hint: str = "", *, tensor: str = "", claim: str = "", observed: str = "") -> None:
        super().__init__(message, hint)
        self.tensor, self.claim, self.observed = tensor, claim, observed

    def to_dict(self) -> dict[str, str]:
        """``{"error", "message", "hint", "tensor", "claim", "observed"}``."""
        return {**super().to_dict(), "tensor": self.tensor, "claim": self.claim, "observed": self.observed}


class BuildIntegrityError(KernelpilotError):
    """A cached build is not what its build record says: the binary about to be loaded hashes to another sha256
    than the one recorded when nvcc wrote it (:mod:`kernelpilot.backends.cuda.buildrecord`). Nothing was loaded;
    the message names the file and both hashes."""


class DispatchError(KernelpilotError):
    """A dispatch table (``dispatch.json``, :mod:`kernelpilot.dispatch`) cannot be built, read or used: bucket
    ranges that overlap, a measured shape outside its bucket, totals that differ from their rows, a winner asked of
    no eligible candidate, a file that is not a dispatch table. The message names the file, bucket or shape."""


class DispatchIntegrityError(DispatchError):
    """A ``dispatch.json`` on disk is not what kernelpilot wrote: the sha256 of its canonical body differs from the
    ``sha256`` stored in it (edited by hand or by a tool), or it has none. Nothing of it was used; the message names
    the file and both hashes."""


class ShapeOutOfRange(DispatchError, LookupError):
    """A shape lies outside every bucket range of a dispatch table (or lacks a dispatch key): no config was chosen
    for it, since no measurement covers it. The message names the shape and every bucket's ranges."""
