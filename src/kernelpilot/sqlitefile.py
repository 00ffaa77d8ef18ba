"""One SQLite file opened the way kernelpilot's databases are (the experience log, the config store): the folder
made, WAL journal, the schema checked or created, every failure a typed error naming the file. Each database
subclasses :class:`SqliteFile` and declares what it is (its error class, its name in messages, its default file
name and the setting that moves it)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Iterator, TypeVar

from kernelpilot.errors import KernelpilotError

__all__ = ["SqliteFile"]

T = TypeVar("T", bound="SqliteFile")


class SqliteFile:
    """An open SQLite database file; a context manager (closing on exit).

    Class attributes a subclass sets:
        error: the KernelpilotError subclass raised. what: the file's name in messages (``config store``).
        file_name: the file name suggested for a folder given as the path. setting: how to give another path
            (``$KERNELPILOT_CONFIG_STORE``). fix: the hint for a file that is not this database.

    Attributes:
        path: the file.
    """

    error: ClassVar[type[KernelpilotError]] = KernelpilotError
    what: ClassVar[str] = "database"
    file_name: ClassVar[str] = "kernelpilot.db"
    setting: ClassVar[str] = "another path"
    fix: ClassVar[str] = "move the file away to start a new one"

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        """Wrap an open connection (use :meth:`open_file`)."""
        self._conn = conn
        self.path = path

    @classmethod
    def open_file(cls: type[T], p: Path, connect: Callable[[Path], sqlite3.Connection],
                  check: Callable[[sqlite3.Connection, Path], Any]) -> T:
        """Open ``p`` (creating it and its folder): ``connect(p)``, WAL journal, ``check(conn, p)`` (the schema: it
        creates or refuses).

        Raises:
            cls.error: ``p`` is a folder; the folder cannot be created; the file is not a SQLite database, is another
                one, or ``check`` refused it (its own error, unchanged).
        """
        if p.is_dir():
            raise cls.error(f"{p} is a folder, not a {cls.what} file", f"give a file path, e.g. {p / cls.file_name}")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise cls.error(f"cannot create the folder of the {cls.what} {p}: {exc.strerror or exc}",
                            f"give a writable path or set {cls.setting}") from exc
        conn = None
        try:
            conn = connect(p)
            conn.execute("PRAGMA journal_mode = WAL")
            check(conn, p)
        except (sqlite3.DatabaseError, cls.error) as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, cls.error):
                raise
            raise cls.error(f"{p} cannot be used as {_article(cls.what)} {cls.what}: {exc}", cls.fix) from exc
        return cls(conn, p)

    @classmethod
    @contextlib.contextmanager
    def reading(cls, other: str | Path, connect: Callable[..., sqlite3.Connection],
                check: Callable[[sqlite3.Connection, Path], Any]) -> Iterator[sqlite3.Connection]:
        """Another file of this kind (a ``merge`` source), opened read-only with ``connect(path, read_only=True)``
        and ``check(conn, path)``; a SQLite error inside the block is this kind's error too; closed after.

        Raises:
            cls.error: ``other`` is missing, not a SQLite database, not this kind (``check``'s own error), newer.
        """
        o = Path(other).expanduser()
        again = f"give the path of another {cls.file_name} file"
        if not o.is_file():
            raise cls.error(f"no {cls.what} at {o}", again)
        conn = None
        try:
            conn = connect(o, read_only=True)
            check(conn, o)
            yield conn
        except sqlite3.DatabaseError as exc:
            raise cls.error(f"{o} cannot be read as {_article(cls.what)} {cls.what}: {exc}", again) from exc
        finally:
            if conn is not None:
                conn.close()

    @classmethod
    def write_jsonl(cls, path: Path, records: Iterable[dict[str, Any]]) -> int:
        """Write ``records`` to ``path`` as JSON Lines (keys sorted), atomically (a temporary file beside it, fsynced,
        then renamed); returns how many.

        Raises:
            cls.error: ``path`` cannot be written (nothing is left half written).
        """
        tmp = None
        n = 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                for record in records:
                    f.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
                    n += 1
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
            raise cls.error(f"cannot write {path}: {exc.strerror or exc}", "give a writable file path") from exc
        return n

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None  # type: ignore[assignment]

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"
