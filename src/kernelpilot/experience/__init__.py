"""The experience log: what every change tried on a kernel did, kept in a SQLite file and ranked for the next
kernel, with a curated strategy guide per bottleneck class.

``session try``, ``optimize`` and ``tune`` add an :class:`ExperienceEntry` per change they judge;
:meth:`ExperienceDB.recommend` ranks past changes for a kernel type, back end, arch and bottleneck;
:func:`guide_for` gives the curated changes of a class. docs/experience.md describes what is recorded, the
ranking rule and the team workflow (export and import JSON Lines).

Modules: :mod:`.model` (records, default path), :mod:`.tags` (keyword table), :mod:`.rank` (the ranking rule),
:mod:`.db` (the SQLite file), :mod:`.guide` (the strategy guide, ``guide.json``), :mod:`.from_runs` (entries
from optimize and tune evaluations). No torch import.
"""

from kernelpilot.experience.db import ExperienceDB, read_jsonl
from kernelpilot.experience.from_runs import entries_from_optimize, entry_from_evaluation, entry_from_tune
from kernelpilot.experience.guide import GuideEntry, guide_entries, guide_for, guide_ids_for
from kernelpilot.experience.model import ExperienceEntry, Recommendation, default_db_path
from kernelpilot.experience.tags import derive_tags, role_tags

__all__ = ["ExperienceDB", "ExperienceEntry", "Recommendation", "GuideEntry", "default_db_path", "guide_for",
           "guide_entries", "guide_ids_for", "derive_tags", "role_tags", "read_jsonl", "entries_from_optimize",
           "entry_from_evaluation", "entry_from_tune"]
