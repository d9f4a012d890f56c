"""Where the store lives and how it is talked to: `--db` arguments to SQLAlchemy URLs, the engine
(SQLite pragmas, the kind of BEGIN), retried write transactions, and one-line database errors.

Concurrency: every write is one short transaction that is retried on a lost race.
- SQLite: WAL journal, a 60 s busy timeout, and writes start with `BEGIN IMMEDIATE`, so two
  writers queue on the file lock instead of one failing half-way with "database is locked"
  (pysqlite's default deferred BEGIN upgrades the lock late and can deadlock).
- PostgreSQL: rows that several runners may add at once (machines, commits, benchmarks) go in
  with `INSERT ... ON CONFLICT DO NOTHING` (`insert_ignore`); two runners ingesting the same file
  race on the unique run key, the loser gets an IntegrityError, retries, and finds the run
  already there.

Readers (`make_engine(..., read_only=True)`, the commands that only read a history) never take the
write lock and never wait on a writer for more than `READ_WAIT_S`: SQLite opened with `mode=ro`
(WAL lets it read beside a writer), PostgreSQL with every transaction READ ONLY and a lock timeout.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Table, create_engine, event
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.pool import StaticPool

DEFAULT_DB = ".asv/history.sqlite"
RETRIES = 8
# The longest a read-only open waits on a lock (SQLite's busy timeout, PostgreSQL's lock_timeout):
# in WAL mode a reader never waits on a writer, so this covers only a WAL recovery or a migration's
# table locks, after which the reader fails and says so instead of hanging behind them.
READ_WAIT_S = 2.0
# PostgreSQL: how long a connection may take to open, and TCP keepalives that notice a server gone
# silent (libpq's defaults wait forever: a server that accepted the connection and never answered
# left `compare` hanging without a word, 2026-12-07). A URL's own query parameters win.
CONNECT_TIMEOUT_S = 15
PG_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}

T = TypeVar("T")


class StoreError(RuntimeError):
    """The database cannot serve as a results store: missing, not a store, or from a newer schema."""


# A libpq connection string's keywords (`host=`, `dbname=`, ...) at the start or after a space.
_LIBPQ_DSN = re.compile(r"(?:^|\s)(?:host|hostaddr|port|dbname|user|password|sslmode|service)\s*=")
# A URL whose scheme was left out ("user:password@host:5432/db"): taken as a file path, it was echoed,
# password and all, in "no results store at ..." and in the ingest command suggested (2026-12-07).
_URL_WITHOUT_SCHEME = re.compile(r"^[^/\\\s:@]+:[^/\\\s@]*@[^/\s]+")
# The databases the store runs on (SQLAlchemy backend names).
_BACKENDS = ("sqlite", "postgresql")


def resolve_url(db: str | os.PathLike[str] | None, *, must_exist: bool = False) -> str:
    """The SQLAlchemy URL for a `--db` argument.

    Args:
        db: None for the default SQLite file (`.asv/history.sqlite`), a bare path for an SQLite
            file (its folder is created), `:memory:` for a private in-memory SQLite database, or
            any SQLAlchemy URL (`postgresql+psycopg://...`).
        must_exist: a bare path must name an existing file (commands that only read a history
            must not create an empty one where a path was mistyped).

    Returns:
        A SQLAlchemy URL string.
    """
    if db is None:
        db = DEFAULT_DB
    if not isinstance(db, str | os.PathLike):
        raise TypeError(f"db must be a path or SQLAlchemy URL string, got {type(db).__name__}")
    text_db = os.fspath(db)
    if not text_db.strip():
        raise ValueError("db must not be empty: give a path or a SQLAlchemy URL")
    if "://" in text_db:
        if not text_db.startswith("sqlite"):
            from sqlalchemy.engine import make_url

            scheme, _, rest = text_db.partition("://")
            where = f"{scheme}://{rest.rsplit('@', 1)[-1].split('?', 1)[0]}"  # no user-info part: no password
            try:
                parsed = make_url(text_db)
            except Exception as exc:  # noqa: BLE001 - any parse failure is the same user error
                # The parser's own message ("invalid literal for int() ...") names neither the option nor
                # the database.
                raise StoreError(f"--db {where}: not a database URL ({exc})") from None
            if parsed.host and "@" in parsed.host:
                # The parser reads the password's tail as the host, and the driver then prints it.
                raise StoreError(f"--db {where}: the user-info part holds an unescaped '@': percent-encode "
                                 "it in the password as %40")
            if parsed.get_backend_name() not in _BACKENDS:
                # SQLAlchemy's own words were a missing driver module ("No module named 'MySQLdb'") or
                # "Can't load plugin: sqlalchemy.dialects:postgres".
                raise StoreError(f"--db {where}: the store runs on SQLite (a file path) or PostgreSQL "
                                 "(postgresql+psycopg://USER@HOST:PORT/DBNAME), not "
                                 f"{parsed.get_backend_name()!r}")
            if parsed.get_driver_name() == "psycopg2" and importlib.util.find_spec("psycopg2") is None:
                # SQLAlchemy's words were "No module named 'psycopg2'": the service installs psycopg 3.
                raise StoreError(f"--db {where}: the psycopg2 driver is not installed; the service installs "
                                 "psycopg 3: postgresql+psycopg://USER@HOST:PORT/DBNAME (or postgresql://...)")
        return text_db
    if text_db == ":memory:":
        return "sqlite://"
    if _LIBPQ_DSN.search(text_db) and not Path(text_db).expanduser().exists():
        # "host=... dbname=... password=..." made an SQLite file of that name, the password in its name,
        # and the shared history got nothing (2026-12-07). Nothing of it is echoed: it may hold a password.
        raise StoreError("--db looks like a libpq connection string (key=value ...), not a path or URL: give a "
                         "SQLAlchemy URL, postgresql+psycopg://USER@HOST:PORT/DBNAME (the password in PGPASSWORD or "
                         "~/.pgpass)")
    if _URL_WITHOUT_SCHEME.match(text_db) and not Path(text_db).expanduser().exists():
        raise StoreError("--db looks like a database URL without its scheme (USER:PASSWORD@HOST...), not a path: "
                         "give postgresql+psycopg://USER@HOST:PORT/DBNAME (the password in PGPASSWORD or ~/.pgpass)")
    path = Path(text_db).expanduser().resolve()
    if path.is_dir():
        raise StoreError(f"{text_db} is a folder, not an SQLite file: give the database file's path")
    if must_exist and not path.exists():
        # The command is quoted for a shell: pasted, it names this --db whatever its path holds.
        raise StoreError(f"no results store at {path}: ingest results first (python -m ci ingest --db "
                         f"{shlex.quote(text_db)} RESULTS_DIR), or check the --db path")
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def is_memory(url: str) -> bool:
    """True for a private in-memory SQLite database (one connection, shared by every caller)."""
    return url in ("sqlite://", "sqlite:///:memory:")


def make_engine(url: str, echo: bool = False, *, read_only: bool = False) -> Engine:
    """The engine for a store URL: on SQLite with the pragmas and BEGIN kinds described above.

    Args:
        url: from `resolve_url`.
        echo: log SQL (debugging).
        read_only: connections that cannot write and wait at most `READ_WAIT_S` on a lock: an
            SQLite file opened with `mode=ro` (a file without write permission reads as well),
            PostgreSQL sessions with `default_transaction_read_only` and a `lock_timeout`.

    Returns:
        A SQLAlchemy Engine; a connection with execution option `write=True` begins a write
        transaction (`BEGIN IMMEDIATE` on SQLite).
    """
    if not url.startswith("sqlite"):
        from sqlalchemy.engine import make_url

        given = make_url(url).query
        args: dict[str, Any] = {k: v for k, v in {"connect_timeout": CONNECT_TIMEOUT_S, **PG_KEEPALIVES}.items()
                                if k not in given}
        if read_only:
            wait_ms = int(READ_WAIT_S * 1000)
            args["options"] = f"-c default_transaction_read_only=on -c lock_timeout={wait_ms}"
        return create_engine(url, echo=echo, pool_pre_ping=True, connect_args=args)
    memory = is_memory(url)
    wait_s = READ_WAIT_S if read_only else 60.0
    extra: dict[str, Any] = {"poolclass": StaticPool} if memory else {}
    if read_only and not memory:
        path = url[len("sqlite:///"):]
        extra["creator"] = lambda: _read_only_sqlite(path, wait_s)
    engine = create_engine(url, echo=echo, connect_args={"timeout": wait_s, "check_same_thread": False}, **extra)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from pysqlite so that "begin" below decides the BEGIN kind.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        if not memory and not read_only:
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL is still crash-safe, fsyncs less
        cur.execute("PRAGMA foreign_keys = ON")
        # 64 MiB page cache instead of 2 MiB: a 10^6-row history's indexes stay in memory.
        cur.execute("PRAGMA cache_size = -65536")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("write") else "BEGIN")

    return engine


def _read_only_sqlite(path: str, wait_s: float) -> Any:
    """A pysqlite connection that reads the store file at `path` and cannot write it.

    `mode=ro` opens it without write access, so no lock a writer holds is ever asked for and a file
    without write permission opens too. A WAL database also needs its `-shm` index, which a reader
    creates beside the file when none is open: in a folder it may not write, reading then fails
    ("attempt to write a readonly database", sqlite 3.40, 2026-12-05). Where nobody may write the
    file or its folder (no write bit on either), no writer can exist, and the file is read as
    immutable (no locks, no index).
    """
    import sqlite3
    import stat
    import urllib.parse

    uri = f"file:{urllib.parse.quote(path)}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=wait_s, check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
        nobody_writes = not any(os.stat(p).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
                                for p in (path, os.path.dirname(os.path.abspath(path))))  # fmt: skip
        if not nobody_writes:
            raise
    return sqlite3.connect(uri + "&immutable=1", uri=True, timeout=wait_s, check_same_thread=False)


def is_retryable(exc: DBAPIError) -> bool:
    """True for a lost race (a unique key another writer took, a lock, a deadlock): run it again."""
    if isinstance(exc, IntegrityError):
        return True  # lost a race on a unique key: the retry finds the winner's row
    message = str(exc.orig).lower() if exc.orig is not None else str(exc).lower()
    return any(s in message for s in ("database is locked", "deadlock", "could not serialize", "busy"))


def database_failed(exc: DBAPIError) -> bool:
    """True where the database failed as a whole, not one statement's data: a lost connection, a
    read-only, full or unreadable database. A file's savepoint then fails every file after it alike (a
    read-only store printed one error per file, 2026-12-07)."""
    if isinstance(exc, InterfaceError) or exc.connection_invalidated:
        return True
    message = str(exc.orig).lower() if exc.orig is not None else str(exc).lower()
    return isinstance(exc, OperationalError) and any(s in message for s in (
        "readonly database", "read-only", "disk is full", "no space left", "disk i/o error", "unable to open",
        "server closed", "terminating connection", "connection"))


def retry_write(engine: Engine, fn: Callable[[Connection], T]) -> T:
    """Run `fn(conn)` in one write transaction, retrying lost races with backoff; all or nothing.

    Args:
        engine: the store's engine.
        fn: the transaction's body; called again from the start on every retry.

    Returns:
        What `fn` returned in the attempt that committed.
    """
    delay = 0.05
    for attempt in range(RETRIES):
        try:
            with engine.connect() as conn:
                conn.execution_options(write=True)
                with conn.begin():
                    return fn(conn)
        except DBAPIError as exc:
            if attempt == RETRIES - 1 or not is_retryable(exc):
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    raise AssertionError("unreachable")


def _dialect_insert(dialect: str, table: Table) -> Any:
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table)
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert(table)
    return None


def insert_ignore(dialect: str, table: Table) -> Any:
    """An INSERT that skips rows whose unique key exists, where the dialect supports it, else None."""
    stmt = _dialect_insert(dialect, table)
    return None if stmt is None else stmt.on_conflict_do_nothing()


def upsert(dialect: str, table: Table, key: list[str], update: list[str]) -> Any:
    """An INSERT that updates the `update` columns of a row whose unique `key` exists (ON CONFLICT
    DO UPDATE), where the dialect supports it, else None."""
    stmt = _dialect_insert(dialect, table)
    if stmt is None:
        return None
    return stmt.on_conflict_do_update(index_elements=key, set_={c: getattr(stmt.excluded, c) for c in update})


def error_line(exc: BaseException) -> str:
    """An exception as one line: a database error as its driver's own message (SQLAlchemy adds the
    SQL, its parameters and a link on further lines), anything else as `Type: message`."""
    from sqlalchemy.exc import SQLAlchemyError

    if isinstance(exc, DBAPIError) and exc.orig is not None:
        text_ = str(exc.orig)
    elif isinstance(exc, SQLAlchemyError):
        text_ = str(exc).split("\n[SQL:")[0].split("\n(Background on this error")[0]
    else:
        text_ = f"{exc.__class__.__name__}: {exc}"
    lines = [line.strip() for line in text_.splitlines() if line.strip()]
    return " / ".join(lines[:3]) if lines else exc.__class__.__name__


# Query options of a database URL that hold a credential (libpq's password, sslpassword, passfile;
# any driver's token, secret or key): shown as *** like the URL's own password.
_SECRET_OPTION = re.compile(r"pass|secret|token|key|auth|cred", re.IGNORECASE)


def display_url(url: str) -> str:
    """A database (a URL or a bare path) as shown in messages: the file path for SQLite, the URL
    without its password otherwise, in the user-info part or in a query option (`?password=`), and
    with a password holding an unescaped "@" hidden whole (the parser reads its tail as the host);
    "the database" for a URL that does not parse."""
    if "://" not in url:
        return "***@" + url.rsplit("@", 1)[1] if _URL_WITHOUT_SCHEME.match(url) else url
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///"):]
    if url.startswith("sqlite://"):
        return "the in-memory SQLite database"
    try:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        if parsed.host and "@" in parsed.host:
            parsed = parsed.set(host=parsed.host.rsplit("@", 1)[1], password="***")
        hidden = {k: "SECRET-HIDDEN" if _SECRET_OPTION.search(k) else v for k, v in parsed.query.items()}
        return parsed.set(query=hidden).render_as_string(hide_password=True).replace("SECRET-HIDDEN", "***")
    except Exception:
        return "the database"
