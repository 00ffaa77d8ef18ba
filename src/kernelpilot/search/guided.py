"""The next change: one tunable and a direction, taken from the bottleneck card, with the reason and what should move.

This is the loop's ``guided`` strategy: a one-variable move away from the incumbent config. The card
(:mod:`kernelpilot.profile.card`) ranks its suggested changes: defects found by the numeric patterns first
(register spill, no tensor cores, …), then the patterns that explain the bottleneck class (long-scoreboard latency,
small grid, …), then the class's default moves. Each tunable step of those changes, in that order, becomes a move
when the neighbouring config has not been tried. Code changes (e.g. "use tl.dot") cannot be made by a search and
are reported, not tried. Without a card (the Triton interpreter, or ``--no-profile`` without timing evidence) the
moves are exploration: tiles up, warps up, stages up, then down. A config whose binary spills (static inspection's
``n_spills``, on the evaluation as ``static["spills"]``) first tries smaller tiles, fewer stages, fewer warps, with
or without a card. After the card's moves, every remaining one-step
neighbour is offered as exploration, so the loop only stops when the neighbourhood is exhausted.

Tunables get a role from their name: ``BLOCK_K*`` → tile_k, other ``BLOCK*``/``TILE*`` → tile, ``num_warps`` →
warps, ``num_stages`` → stages, ``GROUP*`` → group, anything else → other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kernelpilot.records.evaluation import Move, config_key

if TYPE_CHECKING:
    from kernelpilot.profile.card import BottleneckCard, CardChange

Role = str
UP, DOWN = "up", "down"


def tunable_role(name: str) -> Role:
    """The role a tunable plays, from its name (see the module docstring)."""
    upper = name.upper()
    if upper == "NUM_WARPS":
        return "warps"
    if upper == "NUM_STAGES":
        return "stages"
    if upper.startswith(("BLOCK_K", "BLOCK_SIZE_K", "TILE_K")):
        return "tile_k"
    if upper.startswith(("BLOCK", "TILE")):
        return "tile"
    if upper.startswith("GROUP"):
        return "group"
    return "other"


def neighbour(values: list[Any], current: Any, direction: str) -> Any | None:
    """The next candidate above/below ``current`` (numeric order when all are numbers, else list order)."""
    ordered = sorted(values) if all(isinstance(v, (int, float)) for v in values) else list(values)
    i = ordered.index(current)
    j = i + 1 if direction == UP else i - 1
    return ordered[j] if 0 <= j < len(ordered) else None


EXPLORATION = [("tile", UP), ("warps", UP), ("stages", UP), ("group", UP), ("tile_k", UP), ("tile", DOWN),
               ("warps", DOWN), ("stages", DOWN)]


def _expectation(card: BottleneckCard, change: CardChange) -> tuple[str, str]:
    """(metric, expected movement) for a card change: the first held comparison of the first fired pattern behind
    it, which the change should undo; for a class default move, the duration."""
    for pid in change.patterns:
        if pid.startswith("class:"):
            continue
        try:
            result = card.pattern(pid)
        except KeyError:
            continue
        held = next((e for e in result.evidence if e.holds), None)
        if held is not None and held.value is not None:
            return held.metric, (f"{held.value:.3g} {held.unit} should move back across {held.threshold:g} "
                                 f"({result.title}); duration down")
    return "duration", f"duration down ({card.class_}-bound: {card.summary})"


#: What a binary that spills tries first (the register_spill pattern's changes, in its order): a smaller tile holds
#: fewer registers per thread, fewer stages keep fewer operands live, fewer warps raise ptxas's register cap.
SPILL_MOVES = [("tile", DOWN), ("stages", DOWN), ("warps", DOWN)]


def propose_moves(config: dict[str, Any], tunables: dict[str, list[Any]], tried: Iterable[str], *,
                  card: BottleneckCard | None = None, spills: int | None = None) -> list[Move]:
    """Ranked one-variable moves from ``config`` to configs not yet ``tried`` (keys from :func:`config_key`).

    Args:
        config: the incumbent config.
        tunables: the kernel file's TUNABLES.
        tried: config keys already evaluated (accepted, rejected or failed).
        card: the incumbent's bottleneck card, or None without evidence (then: exploration).
        spills: registers the incumbent's binary spills (``Evaluation.static["spills"]``, 4-byte units, from static
            inspection), None when unknown.

    Returns:
        Moves, most promising first: with ``spills > 0``, :data:`SPILL_MOVES` (tile, stages, warps down) before
        anything else; then the card's tunable steps in card order, then exploration of the remaining neighbours.
        Empty when every one-step neighbour was tried.
    """
    tried = set(tried)
    moves: list[Move] = []
    seen: set[str] = set()

    def add(name: str, direction: str, rule: str, why: str, metric: str, expected: str) -> None:
        new = neighbour(tunables[name], config[name], direction)
        if new is None:
            return
        key = config_key({**config, name: new})
        if key in tried or key in seen:
            return
        seen.add(key)
        moves.append(Move(tunable=name, old=config[name], new=new, direction=direction, rule=rule, why=why,
                          expected_metric=metric, expected=expected))

    if spills:
        why = (f"the binary spills {spills} registers (4-byte words of local memory per thread, read from the cubin); "
               f"spills cost local-memory traffic on every use")
        for role, direction in SPILL_MOVES:
            for name in tunables:
                if tunable_role(name) == role:
                    add(name, direction, "binary spills", why, "static.spills", f"spills {spills} -> fewer; duration down")
    if card is None:
        rule, why = "exploration (no profile)", "no bottleneck evidence for this version; stepping through neighbours"
        for role, direction in EXPLORATION:
            for name in tunables:
                if tunable_role(name) == role:
                    add(name, direction, rule, why, "median time", "unknown without a profile; accepted only if "
                        "faster beyond the spread")
    else:
        for change in card.suggested_changes:
            metric, expected = _expectation(card, change)
            rule = ", ".join(change.patterns)
            for step in change.tunables:
                for name in tunables:
                    if tunable_role(name) == step.role:
                        add(name, step.direction, rule, f"{change.action}: {change.why}", metric, expected)
    after = "exploration (no profile)" if card is None else f"exploration after the card ({card.class_})"
    for name in tunables:
        for direction in (UP, DOWN):
            add(name, direction, after, "the evidence-driven moves were tried; stepping to an untried neighbour",
                "median time", "unknown; accepted only if faster beyond the spread")
    return moves
