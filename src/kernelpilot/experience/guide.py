"""The curated strategy guide: for each bottleneck class (memory, compute, latency, occupancy) and back end (Triton,
CUDA), a few changes worth trying, when each applies, which metric should move, and the public source it rests on.

The entries live in ``guide.json`` beside this module (package data), written in our own words; each cites one
public source (Triton's tutorials and API docs, NVIDIA's CUDA C++ Best Practices and Programming Guides, Nsight
Compute's Profiling Guide, NVIDIA's technical blog, papers). Their tags use the vocabulary of
:mod:`kernelpilot.experience.tags`, so a recommendation (:attr:`Recommendation.guide`) and a card's suggested change
(:func:`guide_ids_for` with :func:`kernelpilot.experience.tags.role_tags`) can point at them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Iterable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernelpilot.errors import ExperienceError, OptionError
from kernelpilot.experience.model import BACKENDS, BOTTLENECK_CLASSES, normalize_bottleneck
from kernelpilot.experience.tags import normalize_tags

__all__ = ["GUIDE_CLASSES", "GuideEntry", "guide_entries", "guide_for", "guide_ids_for"]

#: The classes the guide has entries for; ``small-grid`` is answered by the entries tagged ``grid-size`` (more
#: programs, split-K, persistent kernels), ``balanced`` and ``unknown`` by none.
GUIDE_CLASSES: tuple[str, ...] = ("memory", "compute", "latency", "occupancy")


class GuideEntry(BaseModel):
    """One curated change.

    Attributes:
        id: unique id, ``<backend>-<class>-<name>`` (``triton-memory-fuse-passes``).
        backend: ``triton`` or ``cuda``.
        bottleneck: ``memory``, ``compute``, ``latency`` or ``occupancy``.
        title: the change in a few words.
        change: what to do.
        when: when it applies (the evidence to look for first).
        metric: what should move if it works.
        tags: its tags (vocabulary of :mod:`kernelpilot.experience.tags`).
        source: the public URL it rests on. source_title: that page's title.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^(triton|cuda)-(memory|compute|latency|occupancy)-[a-z0-9-]+$")
    backend: Literal["triton", "cuda"]
    bottleneck: Literal["memory", "compute", "latency", "occupancy"]
    title: str = Field(min_length=1)
    change: str = Field(min_length=1)
    when: str = Field(min_length=1)
    metric: str = Field(min_length=1)
    tags: list[str] = Field(min_length=1)
    source: str = Field(pattern=r"^https://\S+$")
    source_title: str = Field(min_length=1)

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        return normalize_tags(v)


@lru_cache(maxsize=1)
def guide_entries() -> tuple[GuideEntry, ...]:
    """Every entry of the packaged guide, in file order.

    Raises:
        ExperienceError: ``guide.json`` is missing, not JSON, an entry breaks :class:`GuideEntry`, an id is used
            twice, or an id's back end or class disagrees with its fields (a broken install or edit).
    """
    try:
        raw = json.loads(resources.files("kernelpilot.experience").joinpath("guide.json").read_text("utf-8"))
        entries = tuple(GuideEntry.model_validate(e) for e in raw["entries"])
    except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
        raise ExperienceError(f"the strategy guide (kernelpilot/experience/guide.json) cannot be read: {exc}",
                              "reinstall kernelpilot (python3 -m pip install -e .)") from exc
    seen: set[str] = set()
    for e in entries:
        if e.id in seen or not e.id.startswith(f"{e.backend}-{e.bottleneck}-"):
            raise ExperienceError(f"the strategy guide has a duplicate or misnamed id: {e.id}",
                                  "ids are unique and start with <backend>-<class>-")
        seen.add(e.id)
    return entries


def _check(bottleneck: Optional[str], backend: str) -> tuple[Optional[str], str]:
    b = normalize_bottleneck(bottleneck) if bottleneck is not None else None
    if b is not None and b not in BOTTLENECK_CLASSES:
        raise OptionError(f"--bottleneck {bottleneck}: not a bottleneck class",
                          f"one of {', '.join(BOTTLENECK_CLASSES)}")
    k = backend.strip().lower()
    if k not in BACKENDS:
        raise OptionError(f"--backend {backend}: not a back end", f"one of {', '.join(BACKENDS)}")
    return b, k


def guide_for(bottleneck: str, backend: str = "triton") -> list[GuideEntry]:
    """The guide's entries for one bottleneck class and back end, in file order (most broadly useful first).

    Args:
        bottleneck: a card class (:data:`kernelpilot.experience.model.BOTTLENECK_CLASSES`; ``small_grid`` is read
            as ``small-grid``). ``small-grid`` returns the entries tagged ``grid-size`` of every class;
            ``balanced`` and ``unknown`` return none.
        backend: ``triton`` (default) or ``cuda``.

    Raises:
        OptionError: an unknown class or back end (the hint lists the known ones).
        ExperienceError: the packaged guide cannot be read (see :func:`guide_entries`).
    """
    b, k = _check(bottleneck, backend)
    if b == "small-grid":
        return [e for e in guide_entries() if e.backend == k and "grid-size" in e.tags]
    return [e for e in guide_entries() if e.backend == k and e.bottleneck == b]


def guide_ids_for(tags: Iterable[str], bottleneck: Optional[str] = None, backend: str = "triton") -> list[str]:
    """Ids of the guide's entries sharing a tag with ``tags``, for one back end and (if given) one class.

    This is the link from a recommendation or a card's suggested change to the guide: e.g.
    ``guide_ids_for(role_tags(["stages"]), "latency")`` for a card's "stages up" move.

    Args:
        tags: tags to match (normalized here).
        bottleneck: a card class to restrict to (as in :func:`guide_for`), or None for every class.
        backend: ``triton`` or ``cuda``.

    Raises:
        OptionError: an unknown class or back end. ExperienceError: the packaged guide cannot be read.
    """
    wanted = set(normalize_tags(tags))
    b, k = _check(bottleneck, backend)
    pool = guide_for(b, k) if b is not None else [e for e in guide_entries() if e.backend == k]
    return [e.id for e in pool if wanted & set(e.tags)]
