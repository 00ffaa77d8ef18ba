"""What a cache line is worth: who signed it, whether its numbers agree with each other, whether it is under the
speed-of-light floor, and the measurement with the original run's verdicts taken off (issue 24, "records that
cannot be forged").

A cache line is a claim until checked. Three checks, cheapest first:

* **Signature.** Every line :meth:`~kernelpilot.search.cache_store.EvaluationCache.put` writes carries
  ``signer`` (an id of the key, not the key) and ``mac``: HMAC-SHA256 (RFC 2104, :mod:`hmac`) over the context key
  and the line's canonical JSON without ``mac``, keyed by a per-user secret kept outside every cache file
  (:func:`cache_secret`: ``$KERNELPILOT_SECRET_DIR/cache-hmac.key``, else ``<kernelpilot_home()>/keys/``; created
  0600 in a 0700 folder). Binding the context key means a line moved into another context's file does not verify.
  A line is ``signed`` (this user's key, MAC matches), ``forged`` (this user's signer id, MAC does not match: edited
  after it was written), ``foreign`` (another key: another user or machine) or ``unsigned`` (no MAC: written before
  lines were signed, e.g. the committed H100 caches in ``tests/data/search``).
* **Consistency.** A timed line (``ok`` or ``impossible``) has samples, every sample a positive finite time, and its
  median is the median of its samples (the median the decision used, :class:`~kernelpilot.records.evaluation
  .Evaluation`); in a cache of GPU measurements (context not ``interpreted``) an ``ok`` line is ``measured``, since
  an unmeasured time escapes the floor (:func:`kernelpilot.engine.guards.impossible`).
* **Floor.** A measured ``ok`` median under the roofline's floor (beyond its tolerance) is refused exactly as a live
  evaluation is (:meth:`kernelpilot.hardware.roofline.Roofline.impossible_reason`, the worker's ``floor`` stage).

A live search answers only ``signed`` lines that pass both other checks; a replay also answers ``foreign`` and
``unsigned`` ones that pass them (and says so: "consistency-checked only"); ``forged`` and inconsistent lines are
refused by name everywhere. Whatever is answered is a measurement only: the verdicts the original run recorded
(accepted, decision, "raced out", version numbers, speedups) are taken off (:func:`measurement_only`) and decided
again by the run that reads them.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
import stat
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from kernelpilot.errors import SearchError
from kernelpilot.facts import kernelpilot_home

if TYPE_CHECKING:
    from kernelpilot.hardware.roofline import Roofline
    from kernelpilot.records.evaluation import Evaluation

__all__ = ["FOREIGN", "FORGED", "SECRET_ENV", "SHORT_TIMING", "SIGNED", "UNSIGNED", "CacheEntryRefused",
           "CacheLineRefused", "LineTrust", "RefusedLine", "cache_secret", "check_line", "consistency_problem",
           "floor_problem", "line_mac", "measurement_only", "race_stored", "secret_dir", "signer_id", "trust_note"]

#: Environment variable naming the folder of the per-user secret (tests point it at a temporary folder).
SECRET_ENV = "KERNELPILOT_SECRET_DIR"
#: The secret's file name inside :func:`secret_dir`.
SECRET_FILE = "cache-hmac.key"
SIGNED, FORGED, FOREIGN, UNSIGNED = "signed", "forged", "foreign", "unsigned"
#: Relative difference allowed between a line's median and the median of its samples (float round-off only).
MEDIAN_REL_TOL = 1e-6
#: Fields of a stored evaluation that are a run's verdict about it, not its measurement: never reused.
VERDICT_FIELDS: dict[str, Any] = {"accepted": None, "decision": "", "decision_detail": None, "index": None,
                                  "parent": None, "move": None, "pct_of_roofline": None, "speedup_vs_parent": None,
                                  "speedup_vs_first": None, "commit": None, "observed": None}


class CacheLineRefused(UserWarning):
    """Warning: a cache line was not answered (forged, unsigned or signed elsewhere in a live search, inconsistent,
    or under the floor); the message names the file, the line and the config. The config is measured again."""


class RefusedLine(BaseModel):
    """One cache line that was not answered, and why.

    Attributes:
        file: the cache file. line: its 1-based line number. key: the config's :func:`config_key`.
        config: the config. why: the check it failed (one sentence).
    """

    file: str
    line: int
    key: str
    config: dict[str, Any]
    why: str

    def describe(self) -> str:
        """``<file>: line N (config K): why``. Raises nothing."""
        return f"{self.file}: line {self.line} (config {self.key}): {self.why}"


class CacheEntryRefused(SearchError):
    """A replay was asked to answer from a cache file holding lines that fail the checks a live evaluation passes
    (a MAC that does not match, a median that is not its samples' median, an unmeasured time in a GPU cache): the
    replay refuses the file instead of answering from it. ``refused`` lists every such line.

    Attributes:
        refused: the :class:`RefusedLine` of each refused line.
    """

    def __init__(self, refused: list[RefusedLine], what: str = "replay") -> None:
        self.refused = list(refused)
        shown = "; ".join(r.describe() for r in self.refused[:8])
        more = f"; and {len(self.refused) - 8} more" if len(self.refused) > 8 else ""
        super().__init__(f"{what}: {len(self.refused)} cache line(s) refused: {shown}{more}",
                         "a cache line is a measurement only when it checks out; fill a new cache with "
                         "`kernelpilot tune` on the GPU (or delete the file with `kernelpilot cache clear`)")


class LineTrust(BaseModel):
    """Who vouches for one cache line: ``state`` is :data:`SIGNED`, :data:`FORGED`, :data:`FOREIGN` or
    :data:`UNSIGNED`; ``why`` says it in words; ``line`` is its 1-based line number."""

    line: int
    state: str
    why: str


def dumps_compact(obj: Any) -> str:
    """``obj`` as one compact JSON line (sorted keys, no spaces; non-JSON leaves become their ``str``)."""
    import json

    return json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))


def secret_dir() -> Path:
    """The folder of the per-user secret: ``$KERNELPILOT_SECRET_DIR``, else ``<kernelpilot_home()>/keys`` (never
    the cache folder: whoever can write a cache file must not find the key beside it). Not created here."""
    env = os.environ.get(SECRET_ENV, "").strip()
    return Path(env).expanduser() if env else kernelpilot_home() / "keys"


_SECRETS: dict[str, bytes] = {}


def _read_secret(path: Path) -> bytes:
    """The key in ``path`` (64 hex digits); waits briefly for a creator that has not written it yet."""
    for _ in range(50):
        text = path.read_text(encoding="ascii", errors="replace").strip()
        if text:
            break
        time.sleep(0.01)
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SearchError(f"the cache secret {path} can be read or written by other users "
                          f"(mode {stat.S_IMODE(mode):o}): cache lines signed with it prove nothing",
                          f"run `chmod 600 {path}`, or delete it (cache lines signed with it are then measured again)")
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise SearchError(f"the cache secret {path} is not 64 hex digits",
                          "delete it: a new one is made on the next tune (cache lines signed with the old one are "
                          "measured again)")
    return key


def cache_secret(create: bool = True) -> bytes | None:
    """This user's 32-byte cache key, read from :func:`secret_dir` / ``cache-hmac.key``.

    Args:
        create: make the key when there is none (32 bytes from :mod:`secrets`, hex, mode 0600, folder 0700,
            created exclusively so concurrent processes agree on one key); False: None when there is none.

    Returns:
        The key, or None (``create`` False and no key).

    Raises:
        SearchError: the key file is readable by others or is not 64 hex digits.
        OSError: the folder or file cannot be created or read.
    """
    path = secret_dir() / SECRET_FILE
    cached = _SECRETS.get(str(path))
    if cached is not None and path.is_file():
        return cached
    if not path.is_file():
        if not create:
            return None
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            pass
        else:
            try:
                os.write(fd, (secrets.token_hex(32) + "\n").encode("ascii"))
                os.fsync(fd)
            finally:
                os.close(fd)
    key = _read_secret(path)
    _SECRETS[str(path)] = key
    return key


def signer_id(secret: bytes) -> str:
    """A 16-hex-digit id of ``secret`` (an HMAC of a fixed label: it names the key without revealing it)."""
    return hmac.new(secret, b"kernelpilot cache signer", hashlib.sha256).hexdigest()[:16]


def line_mac(secret: bytes, context_key: str, body: dict[str, Any]) -> str:
    """HMAC-SHA256 (hex) of ``context_key`` and ``body`` (a cache line's JSON object without ``mac``, in the
    canonical compact form with sorted keys that the file stores). Raises nothing."""

    message = (context_key + "\n" + dumps_compact(body)).encode("utf-8")
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def check_line(obj: dict[str, Any], context_key: str, secret: bytes | None, line: int) -> LineTrust:
    """Who vouches for the cache line ``obj`` (its parsed JSON), at 1-based ``line`` of a file of ``context_key``.

    Returns:
        :class:`LineTrust`: ``signed`` when its MAC matches under ``secret``; ``forged`` when it names this key's
        signer id but the MAC does not match; ``foreign`` when another key signed it (or none is known here);
        ``unsigned`` without a MAC. Raises nothing.
    """
    mac, signer = obj.get("mac"), obj.get("signer")
    if not isinstance(mac, str):
        return LineTrust(line=line, state=UNSIGNED, why="unsigned (no MAC): consistency-checked only")
    me = signer_id(secret) if secret is not None else None
    body = {k: v for k, v in obj.items() if k != "mac"}
    if secret is not None and hmac.compare_digest(mac, line_mac(secret, context_key, body)):
        return LineTrust(line=line, state=SIGNED, why="signed by this user's key")
    if me is not None and signer == me:
        return LineTrust(line=line, state=FORGED, why="its MAC does not match its content: edited after it was "
                                                      "written, or moved from another cache file")
    return LineTrust(line=line, state=FOREIGN, why=f"signed by another user's or machine's key (signer {signer}): "
                                                   "consistency-checked only")


def consistency_problem(ev: Evaluation, interpreted: bool | None) -> str | None:
    """Why the numbers of a cached evaluation disagree with each other, or None (see the module docstring).

    Args:
        ev: the evaluation read from the line.
        interpreted: the cache context's ``interpreted`` flag (None: unknown, no header).

    Returns:
        One sentence, or None. Raises nothing.
    """
    if ev.status not in ("ok", "impossible"):
        return None
    d = ev.duration_ns
    if d is None or not math.isfinite(d) or d <= 0:
        return f"a {ev.status} line without a positive median"
    if not ev.samples_ns:
        return f"median {d:.6g} ns with no timing samples behind it"
    if any(not math.isfinite(s) or s <= 0 for s in ev.samples_ns):
        return "a timing sample that is not a positive time"
    med = statistics.median(ev.samples_ns)
    if abs(med - d) > MEDIAN_REL_TOL * max(abs(d), abs(med)):
        return (f"its median {d:.6g} ns is not the median of its {len(ev.samples_ns)} samples ({med:.6g} ns): "
                "edited after it was measured")
    if interpreted is False and ev.status == "ok" and not ev.measured:
        return "marked not measured (interpreter) in a cache of GPU measurements, which would escape the floor"
    return None


def floor_problem(ev: Evaluation, roofline: Roofline | None) -> str | None:
    """Why a measured ``ok`` median is under ``roofline``'s speed-of-light floor (the live floor stage's rule), or
    None (no roofline, not a measured ``ok`` time, or above the floor). Raises nothing."""
    if roofline is None or ev.status != "ok" or not ev.measured or ev.duration_ns is None or not ev.duration_ns > 0:
        return None
    why = roofline.impossible_reason(ev.duration_ns)
    return None if why is None else f"under the speed-of-light floor: {why}"


#: Start of the note a stored "raced out" line carries when it is read back (it is not a verdict for the reader).
SHORT_TIMING = "short timing"


def measurement_only(ev: Evaluation) -> Evaluation:
    """A copy of ``ev`` without the verdicts the run that measured it recorded (:data:`VERDICT_FIELDS`: accepted,
    decision and its numbers, version numbers, speedups, percent of roofline, commit): the reader decides again on
    the samples. A stored "raced out" (clearly slower than *that* run's incumbent) becomes a note that the timing is
    short (``short timing: N samples ...``), so the reader's own rules judge it. Raises nothing."""
    update = dict(VERDICT_FIELDS)
    if ev.raced_out:
        update["message"] = (f"{SHORT_TIMING}: {len(ev.samples_ns)} samples (the measuring run stopped timing early "
                             "against its own incumbent; the reader decides on these samples)")
    return ev.model_copy(update=update, deep=True)


def race_stored(ev: Evaluation, race_against_ns: float | None) -> Evaluation | None:
    """A stored measurement as the reading run may use it: ``ev`` itself when its timing is whole; a short timing
    (a line the measuring run raced out, :data:`SHORT_TIMING`, or any ``ok`` line whose first samples the reader
    races) answered ``raced out`` when its first samples are clearly slower than the reader's incumbent
    (:func:`kernelpilot.search.stats.clearly_slower` with the live race's sample count and margin,
    :class:`kernelpilot.search.worker_child.WorkerOptions`); None when it is a short timing the reader cannot
    decide on (no racing, or not clearly slower), so the config is measured again in full.

    Args:
        ev: a stored evaluation, verdicts already off (:func:`measurement_only`).
        race_against_ns: the reader's incumbent median, ns, when it races; None when it does not (a cross-check
            or a run with ``race=False``: a short timing is never its answer).

    Raises nothing.
    """
    import statistics

    from kernelpilot.search.stats import clearly_slower
    from kernelpilot.search.worker_child import WorkerOptions

    short = ev.message.startswith(SHORT_TIMING)
    if not (ev.ok and ev.measured and ev.samples_ns):
        return ev
    if race_against_ns:
        fields = WorkerOptions.model_fields
        first = ev.samples_ns[: fields["race_samples"].default]
        if clearly_slower(first, race_against_ns, margin=fields["race_margin"].default):
            return ev.model_copy(update={"message": (
                f"raced out after {len(first)} samples: median {statistics.median(first):.0f} ns vs incumbent "
                f"{race_against_ns:.0f} ns (re-decided on the stored samples)")})
    return None if short else ev


def trust_note(states: list[str]) -> str:
    """One phrase for a file's lines' ``states``: ``signed by this user (MAC checked)`` when all are signed,
    ``unsigned: consistency-checked only`` when none is, else ``N of M lines unsigned or signed elsewhere:
    consistency-checked only`` (``no lines to vouch for`` for none). Raises nothing."""
    unverified = sum(1 for s in states if s in (UNSIGNED, FOREIGN))
    if not states:
        return "no lines to vouch for"
    if unverified == 0:
        return "signed by this user (MAC checked)"
    if unverified == len(states):
        return "unsigned: consistency-checked only"
    return f"{unverified} of {len(states)} lines unsigned or signed elsewhere: consistency-checked only"
