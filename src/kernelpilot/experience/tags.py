"""Tags of a change: the small keyword table that names what a change does, so that changes written in different
words ("raise num_warps to 8", "num_warps: 4 -> 8") land in the same group of the experience log.

A tag is a short lowercase word (``vectorize``, ``num_warps``, ``l2-grouping``). :data:`TAG_PATTERNS` maps each
tag to the regular expressions that find it in a change's text; :func:`derive_tags` applies them, and also adds a
direction tag (``num_warps-up``, ``block_n-down``) for every ``NAME a -> b`` move it reads. The curated strategy
guide (:mod:`kernelpilot.experience.guide`) uses the same vocabulary, so a recommendation links to the guide
entries of its tag. :data:`ROLE_TAGS` maps the tunable roles of a bottleneck card's suggested changes
(:class:`kernelpilot.profile.patterns.TunableStep`) to tags, for the same link from a card.
"""

from __future__ import annotations

import re
from typing import Iterable

__all__ = ["TAG_PATTERNS", "ROLE_TAGS", "derive_tags", "link_tags", "normalize_tag", "normalize_tags", "role_tags"]

#: Tag -> regular expressions (case-insensitive) that find it in a change's text. Ours, kept small on purpose: a
#: tag exists when a guide entry or a common search move needs it.
TAG_PATTERNS: dict[str, tuple[str, ...]] = {
    "vectorize": (r"vectori[sz]", r"\bfloat4\b", r"\bint4\b", r"128-bit", r"multiple_of", r"max_contiguous",
                  r"wide (loads?|stores?)"),
    "coalesce": (r"coalesc", r"\bstrided?\b(?! loop)", r"\btranspos"),
    "one-block-per-row": (r"(one|a single) (block|program|cta) (per|for each) row", r"row per (block|program)",
                          r"whole row"),
    "online-softmax": (r"online[- ]softmax", r"online normali[sz]er", r"running max"),
    "fusion": (r"\bfus(e|ed|es|ing|ion)\b",),
    "block_size": (r"\bblock_[a-z]+\b", r"\bblock[_ ]size\b", r"\btiles?\b", r"\btile[_ ]size"),
    "num_warps": (r"num_warps", r"\bwarps\b"),
    "num_stages": (r"num_stages", r"\bstages?\b", r"pipelin", r"double[- ]buffer"),
    "l2-grouping": (r"group_(m|size)", r"grouped (ordering|launch)", r"swizzl", r"\bl2 (reuse|locality|hit)"),
    "split-k": (r"split[-_ ]?k\b",),
    "persistent": (r"persistent",),
    "tensor-cores": (r"tensor[- ]cores?", r"tl\.dot", r"\bw?gmma\b", r"\bmma\b", r"\btf32\b", r"\bwmma\b"),
    "low-precision": (r"\bbf16\b", r"\bfp16\b", r"\bfp8\b", r"half precision", r"bfloat16", r"float16"),
    "fp64": (r"\bfp64\b", r"double precision", r"\bfloat64\b"),
    "cache-hints": (r"evict", r"cache_modifier", r"cache hint", r"__ldg", r"read-only (data )?cache",
                    r"access policy window", r"persisting l2"),
    "registers": (r"\bregisters?\b", r"\bspill", r"maxnreg", r"maxrregcount", r"launch_bounds"),
    "shared-memory": (r"shared memory", r"\bsmem\b", r"bank conflict"),
    "occupancy": (r"occupancy",),
    "launch-overhead": (r"cuda graphs?", r"launch overhead", r"fewer launches"),
    "unroll": (r"unroll",),
    "fast-math": (r"\bexp2\b", r"fast[- ]math", r"intrinsic", r"\brsqrt\b", r"reciprocal", r"__expf"),
    "tma": (r"\btma\b", r"tensor descriptor", r"tensor memory accelerator"),
    "warp-specialize": (r"warp[- ]speciali[sz]",),
    "warp-shuffle": (r"shuffle", r"\bshfl", r"warp[- ]level reduc"),
    "async-copy": (r"cp\.async", r"memcpy_async", r"async(hronous)? cop"),
    "divergence": (r"diverg",),
    "grid-size": (r"grid[- ]stride", r"more (blocks|programs)", r"fewer (blocks|programs)", r"grid size",
                  r"fill (all|the) sms"),
    "autotune": (r"autotun",),
}

#: Tunable roles of a card's suggested changes -> the tag their moves carry.
ROLE_TAGS: dict[str, str] = {"tile": "block_size", "tile_k": "block_size", "warps": "num_warps",
                             "stages": "num_stages", "group": "l2-grouping"}

_COMPILED = {tag: tuple(re.compile(p, re.IGNORECASE) for p in pats) for tag, pats in TAG_PATTERNS.items()}
#: ``NAME a -> b`` (also ``NAME: a -> b``, ``NAME=a→b``, ``NAME from a to b``): a move of one tunable.
_MOVE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*(?:[:=]|\bfrom\b)?\s*(\d+(?:\.\d+)?)\s*(?:->|→|\bto\b)\s*"
                   r"(?:\1\s*=\s*)?(\d+(?:\.\d+)?)")


def normalize_tag(tag: str) -> str:
    """A tag as stored: stripped, lowercase, inner spaces as ``-`` (``"Split K"`` -> ``"split-k"``). Raises nothing."""
    return re.sub(r"\s+", "-", tag.strip().lower())


def normalize_tags(tags: Iterable[str]) -> list[str]:
    """Tags normalized (:func:`normalize_tag`), empty ones dropped, each once, in first-seen order."""
    seen: list[str] = []
    for tag in tags:
        t = normalize_tag(tag)
        if t and t not in seen:
            seen.append(t)
    return seen


def derive_tags(text: str) -> list[str]:
    """Tags found in a change's text by :data:`TAG_PATTERNS`, plus one direction tag per tunable move read in it.

    A move ``NAME a -> b`` (NAME with an underscore or in capitals, as tunables are named) adds ``name-up``
    (b > a) or ``name-down`` (b < a), lowercase; ``num_warps 4 -> 8`` gives ``["num_warps", "num_warps-up"]``.
    Tags come in table order, then the direction tags. Raises nothing; an empty list when nothing matches.
    """
    found = [tag for tag, pats in _COMPILED.items() if any(p.search(text) for p in pats)]
    for name, before, after in _MOVE.findall(text):
        a, b = float(before), float(after)
        if a != b and ("_" in name or name.isupper()):  # a tunable's name, not a word of the sentence
            direction = f"{name.lower()}-{'up' if b > a else 'down'}"
            if direction not in found:
                found.append(direction)
    return found


def role_tags(roles: Iterable[str]) -> list[str]:
    """The tags of a card change's tunable roles (``["warps", "tile"]`` -> ``["num_warps", "block_size"]``); roles
    without a tag are skipped. Raises nothing."""
    return normalize_tags(ROLE_TAGS[r] for r in roles if r in ROLE_TAGS)


def link_tags(tag: str) -> list[str]:
    """The tags to look up in the strategy guide for one tag: the tag itself, and for a direction tag
    (``block_n-up``) the tags of its tunable's name (``block_size``). Raises nothing."""
    base, _, direction = tag.rpartition("-")
    if direction in ("up", "down") and base:
        return normalize_tags([tag, *derive_tags(base)])
    return [tag]
