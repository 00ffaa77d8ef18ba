"""Checks of command options before any work starts: each bad value is an :class:`~kernelpilot.errors.OptionError`
naming the option and the value given, with a hint (the command line prints ``error:``/``hint:`` and exits 2).

Every command's API function calls the checks for the options it takes, so the Python API refuses the same values
as the command line: a negative or zero time limit, a negative cap, zero seeds, a kernel path that is a folder, a
``--shape`` value of the wrong type (``N=abc`` where ``SHAPE`` holds a number), an arch no spec or occupancy model
knows.

The options of the two searching commands and of a session are one typed record each (issue 28): :class:`TuneOptions`
(``kernelpilot tune``), :class:`OptimizeOptions` (``kernelpilot optimize``) and :class:`SessionOptions`
(``kernelpilot session start``). The command line builds them from its flags, :mod:`kernelpilot.api` passes them,
:func:`kernelpilot.app.tune.tune`, :func:`kernelpilot.app.optimize.optimize` and
:func:`kernelpilot.versions.session.start` take them, the run records store their JSON and ``--resume`` (a session's
next command) validates that JSON back into the model whole (:func:`stored_options`: a field it does not know, or a value of the wrong type,
is an error naming the file, not a value silently dropped).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kernelpilot.errors import ContractError, OptionError, RunFolderError, SearchError

__all__ = ["check_arch", "check_kernel_path", "check_shape_values", "known_archs", "positive", "at_least",
           "OptimizeOptions", "PRUNE_MODES", "SessionOptions", "TuneOptions", "build_options", "stored_options"]


def positive(option: str, value: float | None, example: str = "") -> None:
    """Refuse a ``value`` that is not a finite number > 0 (None passes: the option was not given).

    Raises:
        OptionError: ``value`` is zero, negative, NaN or infinite (the message names ``option``).
    """
    if value is None:
        return
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise OptionError(f"{option} {value} is not a positive number", f"e.g. {option} {example or '60'}")


def at_least(option: str, value: int | None, low: int, what: str) -> None:
    """Refuse an integer ``value`` below ``low`` (None passes).

    Raises:
        OptionError: ``value < low``; the hint says what the option counts (``what``).
    """
    if value is not None and value < low:
        raise OptionError(f"{option} {value} is below {low}", f"give {what} ({low} or more)")


def check_kernel_path(path: str | Path | None, what: str = "kernel file") -> None:
    """Refuse a path that is a folder (a missing file is left to the contract's own "not found" error).

    Raises:
        ContractError: ``path`` is a directory; the hint lists the ``.py`` files in it, if any.
    """
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        found = sorted(q.name for q in p.glob("*.py"))[:6]
        inside = f" (in it: {', '.join(found)})" if found else " (it holds no .py file)"
        raise ContractError(f"{p} is a folder, not a {what}",
                            f"pass the .py {what} itself{inside}")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "other"


def check_shape_values(overrides: dict[str, Any] | None, defaults: dict[str, Any], where: str = "") -> None:
    """Refuse ``--shape`` values whose type cannot be what the kernel file's ``SHAPE`` holds there: a word where
    the default is a number (``N=abc`` for ``N: 4096``), a fraction where it is a whole number, anything but
    true/false where it is a flag. Names not in ``defaults`` are left to the contract's own check.

    Args:
        overrides: the ``--shape`` values (name -> value as parsed). defaults: the kernel file's SHAPE (its
            CPU_SHAPE merged in). where: the kernel file, for the message.

    Raises:
        OptionError: a value of the wrong type (the message names the option, the value and the default).
    """
    for name, value in (overrides or {}).items():
        if name not in defaults:
            continue
        want, got = _kind(defaults[name]), _kind(value)
        ok = (want == "other" or want == got or (want == "float" and got == "int"))
        if not ok:
            words = {"int": "a whole number", "float": "a number", "bool": "true or false"}
            src = f" in {Path(where).name}'s SHAPE" if where else " in SHAPE"
            raise OptionError(f"--shape {name}={value}: `{name}` is {words[want]}{src} "
                              f"(default {defaults[name]!r}), not {value!r}",
                              f"e.g. --shape {name}={defaults[name]}")


def known_archs() -> list[str]:
    """The arch names kernelpilot knows: the compute capability of every GPU spec file and every arch of the
    occupancy model (``sm_70``, ``sm_80``, ``sm_89``, ``sm_90``, ``sm_100`` ...), sorted by capability."""
    from kernelpilot.hardware.specs import list_specs
    from kernelpilot.backends.binary.occupancy import ARCH_LIMITS

    caps: set[tuple[int, int]] = set(ARCH_LIMITS)
    for spec in list_specs():
        cc = spec.compute_capability
        if cc:
            major, _, minor = str(cc).partition(".")
            if major.isdigit() and minor.isdigit():
                caps.add((int(major), int(minor)))
    return [f"sm_{a}{b}" for a, b in sorted(caps)]


def check_arch(arch: str | None) -> None:
    """Refuse an ``--arch`` that is not an arch name, or one no spec or occupancy model knows (None passes: the
    arch of this GPU, else sm_90, is used).

    Raises:
        OptionError: the message names the value and lists :func:`known_archs`.
    """
    if arch is None:
        return
    from kernelpilot.backends.binary.arch import parse_arch

    known = known_archs()
    try:
        major, minor = parse_arch(arch)
    except ContractError:
        raise OptionError(f"--arch {arch!r} is not a GPU architecture name",
                          f"use one of {', '.join(known)} (sm_90: H100/H200)") from None
    if f"sm_{major}{minor}" not in known:
        raise OptionError(f"--arch {arch}: no GPU kernelpilot knows has compute capability {major}.{minor}",
                          f"use one of {', '.join(known)} (sm_90: H100/H200)")


#: ``kernelpilot tune --prune`` word -> the value of :attr:`TuneOptions.prune`.
PRUNE_MODES: dict[str, bool | str] = {"drop": True, "report": "report", "off": False}


def _path_text(value: Any) -> Any:
    """A path option as text (``Path`` -> ``str``), so that the model and its JSON round-trip equal."""
    return str(value) if isinstance(value, Path) else value


class TuneOptions(BaseModel):
    """Every option of one ``kernelpilot tune`` search (:func:`kernelpilot.app.tune.tune`): what ``tune-run.json``
    stores as ``options`` and ``tune --resume`` reads back. The kernel file, ``--out`` and the progress callback are
    not options of the search (they are arguments of the call).

    Attributes:
        strategy: ``auto``, ``guided``, ``exhaustive``, ``random``, ``local`` or ``bayes`` (checked when the search
            starts: :func:`kernelpilot.search.strategies.get_strategy`). seed: the strategy's seed.
        budget_evals: the most new evaluations (>= 1; None: no limit). budget_s: the most wall seconds (> 0; None:
            no limit); in a replay, the device seconds the replayed evaluations cost when they were measured.
        shape: overrides of the kernel's SHAPE (CPU_SHAPE under the interpreter); None: none.
        ref: a separate reference file (path as text). gpu: spec name for limits and the floor (None: this GPU).
        prune: True: compile ahead and drop configs that cannot win; ``"report"``: compile and report, run all;
            False: no compile-ahead. The words ``drop``/``report``/``off`` are read as those values.
        constraints: extra constraint expressions (None: none). max_spills: prune configs spilling more registers
            than this (count, >= 0; the default is :data:`kernelpilot.engine.prune.DEFAULT_MAX_SPILLS`).
        min_occupancy_pct: prune below this theoretical occupancy (%; None: no floor).
        timeout_s: seconds one config may take in its worker (> 0).
        devices: the workers' devices (None: every visible GPU, else the interpreter).
        ab_samples: interleaved samples per side per decision (>= 0). race: stop clearly slower candidates early.
        cache_root: the cache folder (None: ``$KERNELPILOT_CACHE`` or ``~/.kernelpilot/cache``).
        replay: answer from this cache file or prefix (no GPU). use_cache: read and append the cache.
        start: the starting config (None: DEFAULT_CONFIG). ray_address: evaluate on this Ray cluster.

    Raises (when built):
        OptionError: a budget, limit or count out of range (the messages of the command line's checks).
        SearchError: ``prune`` not one of drop, report, off.
        pydantic.ValidationError: a field it does not know, or a value of the wrong type (:func:`build_options`
            turns it into an OptionError).
    """

    model_config = ConfigDict(extra="forbid")

    strategy: str = "auto"
    budget_evals: int | None = None
    budget_s: float | None = None
    shape: dict[str, Any] | None = None
    seed: int = 0
    ref: str | None = None
    gpu: str | None = None
    prune: bool | Literal["report"] = True
    constraints: list[str] | None = None
    max_spills: int = 16
    min_occupancy_pct: float | None = None
    timeout_s: float = 120.0
    devices: list[str] | None = None
    ab_samples: int = 30
    race: bool = True
    cache_root: str | None = None
    replay: str | None = None
    use_cache: bool = True
    start: dict[str, Any] | None = None
    ray_address: str | None = None

    @field_validator("ref", "cache_root", "replay", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        return _path_text(value)

    @field_validator("prune", mode="before")
    @classmethod
    def _prune(cls, value: Any) -> Any:
        if isinstance(value, str) and value in PRUNE_MODES:
            return PRUNE_MODES[value]
        if value not in (True, False, "report") or isinstance(value, (int, float)) and not isinstance(value, bool):
            raise SearchError(f"--prune {value!r} is not one of drop, report, off",
                              "drop skips configs that cannot win; report only reports them; off compiles nothing "
                              "ahead")
        return value

    @model_validator(mode="after")
    def _ranges(self) -> "TuneOptions":
        at_least("--budget-evals", self.budget_evals, 1, "the most new evaluations")
        positive("--budget-s", self.budget_s, "600")
        positive("--timeout-s", self.timeout_s, "120")
        at_least("--ab-samples", self.ab_samples, 0, "interleaved samples per side")
        at_least("--max-spills", self.max_spills, 0, "the most spilled registers a config may have")
        return self


class OptimizeOptions(BaseModel):
    """Every option of one ``kernelpilot optimize`` run (:func:`kernelpilot.app.optimize.optimize`): what run.json
    stores as ``options`` and ``optimize --resume`` reads back. The kernel file, ``--out`` and the progress callback
    are arguments of the call, not options.

    Attributes:
        iterations: the most versions after v0 (>= 0; None: only the budget limits them).
        budget_s: seconds for the search (> 0; None: :data:`kernelpilot.app.optimize.DEFAULT_BUDGET_S` on a GPU and
            in a replay, ``DEFAULT_BUDGET_S_INTERPRETED`` under the interpreter).
        shape / config: overrides of SHAPE (CPU_SHAPE without a GPU) and of the starting config (None: none).
        ref: a separate reference file (path as text). gpu: spec name for the roofline (None: this GPU).
        profile: ncu on v0 and the final best (GPU only). git: a git history in the run folder.
        benchmark: time PyTorch eager and torch.compile and write benchmark.md.
        strategy: what proposes the next config (``auto``, ``guided``, ``exhaustive``, ``random``, ``local``,
            ``bayes``; checked when the run starts). seed: its seed.
        timeout_s: seconds one version may take in its worker before it is a ``timeout`` (> 0).
        replay: answer every version from this evaluation cache file or prefix (no GPU). cache_root: the folder
            searched for a replay prefix.
        constraints: extra constraint expressions (None: none).
        baselines_ns: medians (ns) of PyTorch eager / torch.compile measured elsewhere (for a replay).

    Raises (when built):
        OptionError: ``iterations`` negative, ``budget_s`` or ``timeout_s`` not a positive number of seconds.
        pydantic.ValidationError: a field it does not know, or a value of the wrong type (see :func:`build_options`).
    """

    model_config = ConfigDict(extra="forbid")

    iterations: int | None = None
    budget_s: float | None = None
    shape: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    ref: str | None = None
    gpu: str | None = None
    profile: bool = True
    git: bool = True
    benchmark: bool = True
    strategy: str = "auto"
    seed: int = 0
    timeout_s: float = 300.0
    replay: str | None = None
    cache_root: str | None = None
    constraints: list[str] | None = None
    baselines_ns: dict[str, float] | None = None

    @field_validator("ref", "cache_root", "replay", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        return _path_text(value)

    @model_validator(mode="after")
    def _ranges(self) -> "OptimizeOptions":
        at_least("--iterations", self.iterations, 0, "the most versions to try after v0")
        positive("--budget-s", self.budget_s, "120")
        positive("--timeout-s", self.timeout_s, "300")
        return self


class SessionOptions(BaseModel):
    """Every option of ``kernelpilot session start`` (:func:`kernelpilot.versions.session.start`): what
    ``session.json`` stores as ``options`` and every later command of the session (``try``, ``status``, ``finish``,
    ...) reads back whole. ``try`` and ``finish`` run with the stored ``profile`` and ``timeout_s`` unless given
    again. The kernel file, ``--out`` and the progress callback are arguments of the call, not options.

    Attributes:
        ref: a separate reference file (path as text; frozen into ``check/reference.py`` at start).
        shape: overrides of SHAPE (CPU_SHAPE without a GPU); None: none.
        gpu: spec name for the roofline (None: this GPU).
        kernel_type: for the experience log (None: guessed from the file name).
        profile: Nsight Compute cards (GPU only); False: light cards only.
        git: a git history in the session folder.
        timeout_s: seconds one step of a version may take in its worker (> 0).
        experience_db: the experience log (path as text; None: ``$KERNELPILOT_EXPERIENCE`` or
            ``~/.kernelpilot/experience.db``). no_experience: record nothing in a log.

    Raises (when built):
        OptionError: ``timeout_s`` not a positive number of seconds.
        pydantic.ValidationError: a field it does not know, or a value of the wrong type (see :func:`build_options`).
    """

    model_config = ConfigDict(extra="forbid")

    ref: str | None = None
    shape: dict[str, Any] | None = None
    gpu: str | None = None
    kernel_type: str | None = None
    profile: bool = True
    git: bool = True
    timeout_s: float = 300.0
    experience_db: str | None = None
    no_experience: bool = False

    @field_validator("ref", "experience_db", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        return _path_text(value)

    @model_validator(mode="after")
    def _ranges(self) -> "SessionOptions":
        positive("--timeout-s", self.timeout_s, "300")
        return self


_Options = TypeVar("_Options", TuneOptions, OptimizeOptions, SessionOptions)


def _first_problem(exc: ValidationError) -> tuple[str, str]:
    """(the field, what is wrong with it) of the first error of ``exc``."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err.get("loc", ())) or "?"
    return field, str(err.get("msg", ""))


def build_options(model: type[_Options], values: dict[str, Any] | None = None, /, **given: Any) -> _Options:
    """``model`` built from ``values`` updated by ``given`` (keywords); a None value in either means "not given" (a
    None keyword keeps the value of ``values``, a None there the default), the way the command line, the keyword
    forms of the API and ``--resume`` (the stored options, updated by the new values) build it.

    Raises:
        OptionError: a value out of range (the range checks' own message), an unknown option, or a value of the
            wrong type (the message names the option and what is wrong; the hint names the model).
        SearchError: (TuneOptions) ``prune`` not one of drop, report, off.
    """
    merged = {k: v for k, v in (values or {}).items() if v is not None}
    merged.update((k, v) for k, v in given.items() if v is not None)  # a keyword None leaves ``values``' own
    try:
        return model(**merged)
    except ValidationError as exc:
        field, problem = _first_problem(exc)
        flag = "--" + field.replace("_", "-")
        if problem.startswith("Extra inputs"):
            raise OptionError(f"{field} is not an option of {model.__name__}",
                              f"the options are {', '.join(model.model_fields)}") from None
        raise OptionError(f"{flag} {merged.get(field)!r}: {problem}",
                          f"see {model.__name__} (kernelpilot.options) for the type of each option") from None


def stored_options(model: type[_Options], data: Any, where: str | Path) -> _Options:
    """The options a run record stored (``options`` of ``tune-run.json``, ``run.json`` or ``session.json``), validated
    back into ``model`` whole: nothing in them is dropped or guessed.

    Args:
        model: :class:`TuneOptions`, :class:`OptimizeOptions` or :class:`SessionOptions`. data: the stored JSON object. where: the record
            file, for the message.

    Raises:
        RunFolderError: ``data`` is not an object, holds a field ``model`` does not know (written by another
            version of kernelpilot, or edited), a value of the wrong type, or a value out of range.
    """
    if not isinstance(data, dict):
        raise RunFolderError(f"{where}: `options` is not a JSON object", "the record was edited or damaged; start a "
                             "new run")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        field, problem = _first_problem(exc)
        raise RunFolderError(f"{where}: the stored option `{field}` cannot be read back into {model.__name__} "
                             f"({problem})",
                             "the record was written by another version of kernelpilot or edited by hand; start a "
                             "new run (or restore the record from the run's history)") from None
    except (OptionError, SearchError) as exc:
        raise RunFolderError(f"{where}: a stored option is out of range ({exc.message})",
                             "the record was edited by hand; restore it or start a new run") from None
