"""Progress of the long commands on stderr: one adapter from the API's ``log`` callbacks to what a person sees.

:class:`Reporter` is the ``log`` callback a command hands to :mod:`kernelpilot.api` (and a context manager around
the call, through :func:`kernelpilot.cli.common.run_command`). Each message is a line; a
:class:`~kernelpilot.progress.ProgressLine` also carries a :class:`~kernelpilot.progress.Step`:

* on a terminal, every phase with a count (the search, compile-ahead, a session's version, ncu, the baselines) is a
  Rich progress bar — done/total, the best time so far in its description, elapsed time and ETA — and the lines
  scroll above it (intermediate counter ticks only move the bar);
* elsewhere (CI, a pipe, an agent reading stderr) no control codes at all: plain lines, time-stamped, such as
  ``12:03:41 [3/12] eval 3 {"BLOCK":64}: ok 81.40 µs (best 80.90 µs · ETA 0:00:21)``, counter ticks thinned to
  about 20 lines per phase;
* ``--quiet``: nothing (errors still print).

It always writes to stderr, also under ``--json``, whose stdout stays one JSON object.
"""

from __future__ import annotations

import datetime as _dt
import threading
from types import TracebackType
from typing import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from kernelpilot.fmt import format_clock, format_duration_ns
from kernelpilot.progress import Step, counter, is_milestone, step_of

__all__ = ["Reporter"]


class Reporter:
    """The ``log`` callback of one command, and the progress display around its call (see the module docstring).

    Args:
        quiet: print nothing (``--quiet``).
        console: where to write (default: the CLI's stderr console); a bar is drawn only when it is a terminal
            (not a dumb one).

    Calling it with a message prints (or displays) that message; it may be called from several threads (the
    compile-ahead thread reports beside the search).
    """

    def __init__(self, *, quiet: bool = False, console: Console | None = None) -> None:
        from kernelpilot.cli.common import err

        self.console = console if console is not None else err
        self.quiet = quiet
        #: True when steps are drawn as bars (a real terminal); False: plain lines.
        self.live = not quiet and self.console.is_terminal and not self.console.is_dumb_terminal
        self._lock = threading.RLock()
        self._bars: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    # -- the display around a call ----------------------------------------------------------------------------------
    def __enter__(self) -> Reporter:
        if self.live and self._bars is None:
            self._bars = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.fields[eta]}"),
                                  console=self.console, transient=True)
            self._bars.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with self._lock:
            if self._bars is not None:
                self._bars.stop()
                self._bars = None
                self._tasks.clear()

    # -- the log callback ---------------------------------------------------------------------------------------------
    def __call__(self, message: str) -> None:
        """Show one message from the API (see the module docstring). Raises nothing for the message's content."""
        if self.quiet:
            return
        step = step_of(message)
        with self._lock:
            if self._bars is not None and step is not None:
                self._show(step)
                if step.tick:  # the bar shows it
                    return
            elif step is not None and step.tick and not is_milestone(step.done, step.total or step.done):
                return
            line = Text(_dt.datetime.now().strftime("%H:%M:%S") + " ", style="dim")
            line.append(str(message))
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def counter(self, phase: str, noun: str) -> Callable[[int, int], None]:
        """A ``progress(done, total)`` callback for an API that counts (``inspect --all-configs``): every count
        moves the bar; without a terminal about 20 lines per phase are printed
        (:func:`kernelpilot.progress.counter`)."""
        return counter(self, phase, noun, every=True)

    def _show(self, step: Step) -> None:
        """Create, move or finish the bar of ``step.phase`` (a finished phase's bar is removed: its line stays)."""
        assert self._bars is not None
        bars = self._bars
        described = step.phase + (f" · best {format_duration_ns(step.best_ns)}" if step.best_ns is not None else "")
        eta = f"ETA {format_clock(step.eta_s)}" if step.eta_s is not None else ""
        task = self._tasks.get(step.phase)
        if task is not None and step.done < bars.tasks[_index(bars, task)].completed:
            bars.remove_task(task)  # the phase runs again (a second ncu profile): a fresh bar
            task = None
        if task is None:
            task = self._tasks[step.phase] = bars.add_task(described, total=step.total, completed=step.done, eta=eta)
        else:
            bars.update(task, description=described, total=step.total, completed=step.done, eta=eta)
        if step.total is not None and step.done >= step.total:
            bars.remove_task(task)
            del self._tasks[step.phase]


def _index(bars: Progress, task: TaskID) -> int:
    return next(i for i, t in enumerate(bars.tasks) if t.id == task)

