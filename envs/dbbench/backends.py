"""SQL backends for DBBench: one throwaway database per episode, AgentBench table layout and hash.

`MariaDBBackend` is the real one (a MySQL-family server, as AgentBench uses MySQL 8); `SQLiteBackend`
is the embedded fallback for machines without a server. Both expose the same small API:
`create(table_name, columns, rows) -> sanitised table name`, `execute(sql) -> ExecResult`,
`table_hash(table) -> md5 hex, or None when the table cannot be read`, `scratch()` (a second
backend of the same kind), `drop()`, `close()`.

Lost connections (server stopped, connection killed, broken pipe; `is_connection_loss`) raise
`DBUnavailable`, an infrastructure failure: the runtime ends the episode as "infra_error", never as an
observation or a 0. Only errors of the SQL itself (syntax, unknown column...) become `ExecResult`
errors. One exception: an agent statement `KILL ...` that kills the agent's own connection is the
agent's doing, so its error is the observation and the next statement reconnects to the same server
and database (else a patch could turn hard tasks into excluded ones). Any other lost connection is
reopened only by the next `create()` (the next episode), and only to the same server.

Table layout (reference spec §4.3): every column is `TEXT` whatever type the data declares; rows
are inserted as strings; identifiers get `\\n \\t \\r` replaced by spaces, are trimmed and cut to 64
chars, duplicate column names (case-insensitive, as MySQL compares them) get `_1`, `_2`... and an
empty column name becomes `column_<i>` (dev task 5 has one; MySQL-family servers reject it).

Table hash (AgentBench): `md5(group_concat(rowhash order by rowhash))` over
`rowhash = substring(md5(concat_ws(',', all columns)), 1, 5)`; `concat_ws` skips NULLs.
The MariaDB session uses `sql_mode='ONLY_FULL_GROUP_BY,NO_ENGINE_SUBSTITUTION'`: non-strict DML as the
gold hashes were made (strict mode turns two gold UPDATEs into errors), MySQL-8-like GROUP BY.

SQLite dialect gaps (environments.md §3e; use MariaDB for every reported number):
- `SHOW TABLES`, `DESCRIBE t` / `DESC t` / `SHOW COLUMNS FROM t` are emulated here (MySQL row shape);
  other SHOW statements are errors.
- `CONCAT`, `CONCAT_WS`, `MD5`, `REGEXP` are provided as user functions; most other MySQL functions
  (IF, DATE_FORMAT, CAST ... AS SIGNED/DECIMAL ...) are missing or behave differently.
- Columns are `TEXT COLLATE NOCASE` (case-insensitive like utf8mb4_general_ci) but there is no
  accent folding (`'Montreal'` != `'Montréal'`) and no PAD SPACE (`'alice '` != `'alice'`).
- TEXT-vs-number comparisons are textual (`'999' < 2008` is false), `7/2` is 3, SUM of TEXT is an
  int, double-quoted names are identifiers (in MySQL they are strings), backslash escapes in string
  literals are not interpreted, identifiers starting with a digit need quoting.
- Error texts use SQLite wording with MySQL-like codes only for the error kinds ctx classifies
  (1054 unknown column, 1064 syntax, 1146 missing table).
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import decimal
import hashlib
import re
import sqlite3
import time
import uuid
from typing import Any

import pymysql

SQL_MODE = "ONLY_FULL_GROUP_BY,NO_ENGINE_SUBSTITUTION"
STATEMENT_TIMEOUT_S = 60
PUBLIC_DATABASE_NAME = "dbbench"   # what the agent sees instead of the per-episode database name


@dataclasses.dataclass
class ExecResult:
    rows: list | None          # list of row tuples on success (empty list for DML/DDL), None on error
    error: str = ""            # "1054 (42S22): Unknown column ..." style text
    error_code: int = 0
    has_result_set: bool = False


def sanitise_identifier(name: str, fallback: str) -> str:
    name = str(name).replace("\n", " ").replace("\t", " ").replace("\r", " ").strip()[:64].strip()
    return name or fallback


def sanitise_columns(names: list[str]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for i, raw in enumerate(names):
        base = sanitise_identifier(raw, f"column_{i + 1}")
        name, k = base, 0
        while name.lower() in seen:
            k += 1
            name = f"{base[:60]}_{k}"
        seen.add(name.lower())
        out.append(name)
    return out


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def hash_rows(rows: list[tuple]) -> str:
    """The AgentBench table hash computed in Python (used by SQLite; equals the MariaDB query)."""
    rowhashes = []
    for row in rows:
        joined = ",".join(str(v) for v in row if v is not None)
        rowhashes.append(hashlib.md5(joined.encode("utf-8")).hexdigest()[:5])
    return hashlib.md5(",".join(sorted(rowhashes)).encode("utf-8")).hexdigest()


def plain_value(v: Any) -> Any:
    """A JSON-able form of a driver value for ctx (Decimal -> float, bytes -> str, dates -> str)."""
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (bytes, bytearray)):
        return v.decode("utf-8", "replace")
    if isinstance(v, (datetime.date, datetime.datetime, datetime.time, datetime.timedelta)):
        return str(v)
    return v


_SQLSTATE = {1054: "42S22", 1064: "42000", 1146: "42S02", 1136: "21S01", 1062: "23000",
             1049: "42000", 1051: "42S02", 1060: "42S21", 1292: "22007", 1366: "22007",
             1406: "22001", 1055: "42000", 1052: "23000", 1065: "42000", 1969: "70100"}


def mysql_error_text(code: int, message: str) -> str:
    return f"{code} ({_SQLSTATE.get(code, 'HY000')}): {message}"


class DBUnavailable(RuntimeError):
    """The episode's SQL backend cannot be reached (connect failed, connection lost): an
    infrastructure failure, retried by the rollout pool or excluded, never scored."""


# Server codes meaning "your connection is gone"; client codes 2000-2999 (2003 can't connect,
# 2006 gone away, 2013 lost during query, 2014 out of sync, 2055 lost while reading) all mean it too.
_SERVER_DISCONNECT_CODES = (1053, 1927, 4031)   # shutdown in progress, connection killed, idle timeout
_KILL_SQL = re.compile(r"^\s*kill\b", re.I)


def error_code(e: BaseException) -> int:
    return int(e.args[0]) if e.args and isinstance(e.args[0], int) else 0


def is_connection_loss(e: BaseException) -> bool:
    """True for a pymysql/socket error that means the connection is unusable, not a bad statement."""
    if isinstance(e, (pymysql.err.InterfaceError, OSError)):   # InterfaceError: used after a loss
        return True
    code = error_code(e)
    return isinstance(e, pymysql.err.Error) and (2000 <= code < 3000 or code in _SERVER_DISCONNECT_CODES)


class MariaDBBackend:
    name = "mariadb"

    def __init__(self, host: str = "127.0.0.1", port: int = 3307, user: str = "root", password: str = "",
                 socket: str = "", connect_timeout: float = 5.0):
        self.settings = dict(host=host, port=port, user=user, password=password, socket=socket,
                             connect_timeout=connect_timeout)
        self.address = socket or f"{host}:{port}"
        kwargs = dict(user=user, password=password, charset="utf8mb4", autocommit=False,
                      connect_timeout=connect_timeout, read_timeout=STATEMENT_TIMEOUT_S + 30,
                      write_timeout=STATEMENT_TIMEOUT_S + 30)
        if socket:
            kwargs["unix_socket"] = socket
        else:
            kwargs.update(host=host, port=int(port))
        self._connect_kwargs = kwargs
        self.database = ""
        self._reopen_before_next = False   # the agent killed its own connection
        self._open()

    def scratch(self) -> "MariaDBBackend":
        return MariaDBBackend(**self.settings)

    @contextlib.contextmanager
    def _lost_is_infra(self, doing: str):
        try:
            yield
        except (pymysql.err.Error, OSError) as e:
            if is_connection_loss(e):
                raise DBUnavailable(f"MariaDB at {self.address}: connection lost {doing}: {e}") from e
            raise

    def _open(self) -> None:
        """A new connection to the same server, with our session settings."""
        try:
            self.conn = pymysql.connect(**self._connect_kwargs)
            self._set_session()
        except (pymysql.err.Error, OSError) as e:
            raise DBUnavailable(f"MariaDB at {self.address} unreachable: {e}") from e

    def _set_session(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute(f"SET SESSION sql_mode='{SQL_MODE}'")
            cur.execute(f"SET SESSION max_statement_time={STATEMENT_TIMEOUT_S}")

    def _fresh_session(self) -> None:
        """A live connection with our session settings (an agent may have changed them, e.g.
        `SET sql_mode=...`, or the connection was lost in the previous episode)."""
        try:
            self.conn.ping(reconnect=False)
        except (pymysql.err.Error, OSError):
            self._open()
            return
        with self._lost_is_infra("resetting the session"):
            self._set_session()

    def _reopen_in_database(self) -> None:
        self._open()
        with self._lost_is_infra("reopening the episode's database"):
            with self.conn.cursor() as cur:
                cur.execute(f"USE {quote(self.database)}")
        self._reopen_before_next = False

    def create(self, table_name: str, columns: list[str], rows: list[list]) -> str:
        self._fresh_session()
        self.drop()
        self.database = f"dbbench_{uuid.uuid4().hex[:12]}"
        self._reopen_before_next = False
        table = sanitise_identifier(table_name, "table_1")
        cols = sanitise_columns(columns)
        with self._lost_is_infra("creating the task table"), self.conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {quote(self.database)} CHARACTER SET utf8mb4")
            cur.execute(f"USE {quote(self.database)}")
            cur.execute(f"CREATE TABLE {quote(table)} ({', '.join(quote(c) + ' TEXT' for c in cols)})")
            if rows:
                marks = ", ".join(["%s"] * len(cols))
                cur.executemany(f"INSERT INTO {quote(table)} VALUES ({marks})",
                                [[None if v is None else str(v) for v in row] for row in rows])
            self.conn.commit()
        return table

    def execute(self, sql: str) -> ExecResult:
        if self._reopen_before_next:
            self._reopen_in_database()
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql)
                has_rs = cur.description is not None
                rows = [self._public_row(r) for r in cur.fetchall()] if has_rs else []
            self.conn.commit()
            return ExecResult(rows=rows, has_result_set=has_rs)
        except (pymysql.err.Error, OSError) as e:
            if not is_connection_loss(e):
                self._rollback()
            elif _KILL_SQL.match(sql):
                self._reopen_before_next = True
            else:
                raise DBUnavailable(f"MariaDB at {self.address}: connection lost running SQL: {e}") from e
            code = error_code(e)
            message = str(e.args[1]) if len(e.args) > 1 else str(e)
            return ExecResult(rows=None, error=mysql_error_text(code, self._public(message)), error_code=code)

    def _public(self, text: str) -> str:
        """The episode's database under one fixed name: its random name would otherwise reach the
        agent (error texts, `SELECT DATABASE()`) and make two runs of a task differ."""
        return text.replace(self.database, PUBLIC_DATABASE_NAME) if self.database and isinstance(text, str) else text

    def _public_row(self, row: tuple) -> tuple:
        return tuple(self._public(v) if isinstance(v, str) else v for v in row)

    def _rollback(self) -> None:
        with self._lost_is_infra("rolling back a failed statement"):
            self.conn.rollback()

    def table_hash(self, table: str) -> str | None:
        if self._reopen_before_next:
            self._reopen_in_database()
        with self._lost_is_infra("hashing the answer table"):
            try:
                with self.conn.cursor() as cur:
                    cur.execute(f"USE {quote(self.database)}")
                    cur.execute(f"SHOW COLUMNS FROM {quote(table)}")
                    cols = [r[0] for r in cur.fetchall()]
                    concat = ", ".join(quote(c) for c in cols)
                    cur.execute(f"SELECT md5(group_concat(rowhash ORDER BY rowhash)) FROM "
                                f"(SELECT substring(md5(concat_ws(',', {concat})), 1, 5) AS rowhash "
                                f"FROM {quote(table)}) AS sub")
                    value = cur.fetchone()[0]
                self.conn.commit()
            except pymysql.err.Error as e:
                if is_connection_loss(e):
                    raise
                self._rollback()
                return None   # e.g. the agent dropped or renamed the table
        return str(value)

    def drop(self) -> None:
        if not self.database:
            return
        try:
            with self._lost_is_infra("dropping the episode's database"), self.conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {quote(self.database)}")
                self.conn.commit()
        finally:
            self.database = ""

    def close(self) -> None:
        try:
            self.drop()
        except DBUnavailable:
            pass   # the server or connection is gone: nothing of ours is left to drop
        finally:
            try:
                self.conn.close()
            except pymysql.err.Error:
                pass


_SHOW_TABLES = re.compile(r"^\s*show\s+(full\s+)?tables\s*;?\s*$", re.I)
_DESCRIBE = re.compile(
    r"^\s*(?:describe|desc|show\s+(?:full\s+)?(?:columns|fields)\s+(?:from|in))\s+"
    r"(`(?:[^`]|``)+`|\"[^\"]+\"|\S+)\s*;?\s*$", re.I)


def _unquote(name: str) -> str:
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "`\"":
        return name[1:-1].replace(name[0] * 2, name[0])
    return name


def _concat(*args):
    return None if any(a is None for a in args) else "".join(str(a) for a in args)


def _concat_ws(sep, *args):
    return None if sep is None else str(sep).join(str(a) for a in args if a is not None)


def _regexp(pattern, value):
    if pattern is None or value is None:
        return None
    return 1 if re.search(str(pattern), str(value), re.I) else 0


def _md5(value):
    return None if value is None else hashlib.md5(str(value).encode("utf-8")).hexdigest()


class SQLiteBackend:
    name = "sqlite"

    def __init__(self):
        self.conn: sqlite3.Connection | None = None
        self.table = ""
        self._deadline = float("inf")

    def create(self, table_name: str, columns: list[str], rows: list[list]) -> str:
        self.drop()
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        self.conn.set_progress_handler(self._over_time, 100_000)
        self.conn.create_function("CONCAT", -1, _concat, deterministic=True)
        self.conn.create_function("CONCAT_WS", -1, _concat_ws, deterministic=True)
        self.conn.create_function("MD5", 1, _md5, deterministic=True)
        self.conn.create_function("REGEXP", 2, _regexp, deterministic=True)
        self.table = sanitise_identifier(table_name, "table_1")
        cols = sanitise_columns(columns)
        self.conn.execute(f"CREATE TABLE {quote(self.table)} "
                          f"({', '.join(quote(c) + ' TEXT COLLATE NOCASE' for c in cols)})")
        if rows:
            marks = ", ".join(["?"] * len(cols))
            self.conn.executemany(f"INSERT INTO {quote(self.table)} VALUES ({marks})",
                                  [[None if v is None else str(v) for v in row] for row in rows])
        return self.table

    def _over_time(self) -> int:
        """SQLite progress handler: a non-zero return interrupts a statement past the timeout."""
        return int(time.monotonic() > self._deadline)

    def _columns(self, table: str) -> list[tuple]:
        return self.conn.execute(f"PRAGMA table_info({quote(table)})").fetchall()

    def execute(self, sql: str) -> ExecResult:
        assert self.conn is not None, "create() first"
        if _SHOW_TABLES.match(sql):
            rows = self.conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name").fetchall()
            return ExecResult(rows=[tuple(r) for r in rows], has_result_set=True)
        m = _DESCRIBE.match(sql)
        if m:
            table = _unquote(m.group(1))
            info = self._columns(table)
            if not info:
                return ExecResult(rows=None, error=mysql_error_text(1146, f"Table '{table}' doesn't exist"),
                                  error_code=1146)
            return ExecResult(rows=[(c[1], "text", "YES", "", None, "") for c in info], has_result_set=True)
        self._deadline = time.monotonic() + STATEMENT_TIMEOUT_S
        try:
            cur = self.conn.execute(sql)
            has_rs = cur.description is not None
            rows = [tuple(r) for r in cur.fetchall()] if has_rs else []
            return ExecResult(rows=rows, has_result_set=has_rs)
        except (sqlite3.Error, sqlite3.Warning, ValueError) as e:
            message = str(e)
            code = 1064
            if "no such column" in message:
                code = 1054
            elif "no such table" in message:
                code = 1146
            elif "interrupted" in message:
                code, message = 1969, "Query execution was interrupted (max_statement_time exceeded)"
            elif "syntax error" not in message and "incomplete input" not in message:
                code = 1105  # ER_UNKNOWN_ERROR
            return ExecResult(rows=None, error=mysql_error_text(code, message), error_code=code)

    def table_hash(self, table: str) -> str | None:
        try:
            rows = self.conn.execute(f"SELECT * FROM {quote(table)}").fetchall()
        except sqlite3.Error:
            return None   # e.g. the agent dropped or renamed the table
        return hash_rows(rows)

    def scratch(self) -> "SQLiteBackend":
        return SQLiteBackend()

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    def close(self) -> None:
        self.drop()
