"""DBBench (AgentBench, function-calling version) as an `Environment` (reference spec §4.3).

One episode = one task = one fresh database holding the task's single table (every column TEXT,
rows as strings; see `backends`), dropped when the next episode starts or at `close()`. The agent
has two tools, `execute_sql(query)` and `commit_final_answer(answers)`, and 20 rounds; every tool
call of a turn is processed (`process_all_tool_calls`), and hook rewrite/force results are ignored
as in the reference v1 DBBench runtime. A commit ends the episode: SELECT-type tasks are judged by
`judge.answers_match` against `label`, mutation tasks by the table hash against `answer_md5`.
No commit within the rounds = status `task_limit_reached`, reward 0.

SQL output is `str(list of row tuples)` (`[('x',)]`, `[(Decimal('3.5000'),)]`, `[]` after DML),
errors are returned as text (`1054 (42S22): Unknown column ...`), an empty statement gives
"No response from database.", and output is cut at 800 chars + "[TRUNCATED]". The server commits
after every statement and rolls back on error.

Backends: `backend="mariadb"` (config section `dbbench`: host/port/user/password/socket; the
project's server is started by `launch/mariadb.sh`), `"sqlite"` (embedded), or `"auto"` = MariaDB
when a server answers, else SQLite. `auto` is decided once per process (logged; `resolve_backend`)
and never switched: a later env in the same process gets the same kind. The backend is in every
task manifest (`manifest_extras`) and in `final_result`, so runs on different backends never pair.
A lost MariaDB connection (server stopped, connection killed; also during a commit or the table-hash
check) raises `backends.DBUnavailable`: the runtime records the episode as "infra_error" (the pool
retries it, else it is excluded), never as a 0 and never rerun on SQLite; the next `reset` reconnects
to the same server. Errors of the agent's SQL stay observations. SQLite is for plumbing tests only; its
dialect gaps (full list in `backends`): SHOW TABLES / DESCRIBE are emulated, CONCAT/CONCAT_WS/MD5/
REGEXP are user functions, other MySQL functions and CAST types are missing; no accent folding or
PAD SPACE; TEXT-vs-number comparisons are textual; integer division; double-quoted names are
identifiers; no backslash escapes; 195/200 gold hashes reproduce instead of 199/200.

The hook `ctx` (field names of spec §4.3; the derivations are ours):
- `action`: tool, query, answers, and the reference built-in fields h2_action, h2_blocked_reason,
  commit_gate_action, commit_gate_reason (always "": we have no built-in gates). At
  `on_before_action`/`on_post_step` it is the action at hand; at `make_pre_hint` the agent's last
  action (empty before the first one).
- `state`: sql_count (executed statements), last_sql, last_result (rows as lists of JSON-able
  values, or the error text), last_error_kind, last_error_text, last_result_was_error,
  error_streak / empty_streak (consecutive errored / empty results), text_only_streak
  (consecutive turns without a tool call), loop_streak (consecutive repeats of the same
  whitespace/case-normalised SQL), mutation_attempted (an INSERT/UPDATE/DELETE/REPLACE ran
  without error), candidate_answer (string cells of the last successful non-empty SELECT-like
  result, ≤ 20), candidate_answer_shape (`scalar` 1x1, `column` nx1, `row` 1xk, `table` nxk, ""),
  candidate_implausible (all cells NULL/blank, a non-numeric cell when the task asks for a number,
  or more than 20 rows), remaining_rounds (rounds left before this turn; after the step at
  `on_post_step`).
  last_error_kind: `unknown_col` (error 1054 / "no such column"), `syntax` (1064 / "syntax"),
  `empty` (a SELECT-like statement returned no rows, or an empty statement), `null_agg` (an
  aggregate query returned only NULL), "" otherwise (other errors too, e.g. 1146 missing table:
  look at last_error_text).
- `task`: task_type (the data's type: INSERT/UPDATE/DELETE or other/counting/comparison/ranking/
  aggregation-SUM...), answer_shape (`none` for mutations, `number` for counting/aggregation,
  `values` when the question asks for several things, else `value`; derived from the task type and
  question wording, never from the gold), target_table (sanitised name), description.
- `dbbench`: sql_history (normalised SQL, last 20), sql_history_raw, discovered_columns
  (table -> column names seen in DESCRIBE/SHOW COLUMNS output), db_response (the tool text the
  agent saw last), round (1-based).
- `predicates`: see `_predicates`.
"""
from __future__ import annotations

import copy
import re
from typing import Any

from envs.base import Action, Environment, StepResult, Task
from envs.dbbench import backends as B
from envs.dbbench import config as dbconfig
from envs.dbbench import judge, tasks
from hr1_jax.utils.logging import get_logger, log_event

MAX_OUTPUT_CHARS = 800
NO_RESPONSE = "No response from database."
HISTORY_LEN = 20
CANDIDATE_MAX_ROWS = 20
_MUTATION_SQL = re.compile(r"^\s*(insert|update|delete|replace)\b", re.I)
_SELECT_SQL = re.compile(r"^\s*(select|with|\()", re.I)
_AGG_SQL = re.compile(r"\b(sum|avg|min|max|count)\s*\(", re.I)
_DESCRIBE_SQL = re.compile(
    r"^\s*(?:describe|desc|show\s+(?:full\s+)?(?:columns|fields)\s+(?:from|in))\s+"
    r"(`(?:[^`]|``)+`|\"[^\"]+\"|\S+)", re.I)
_PLURAL_Q = re.compile(r"\b(list|all|which\s+\w+\s+(are|were|have)|what\s+are|names\s+of|both)\b", re.I)

SYSTEM_PROMPT = """You are a database assistant. I will give you a question about a MySQL database, and you help me answer it by operating the database with SQL.
Think step by step and explain your reasoning before each action. In every round you may call one of two tools:
- execute_sql: run exactly one SQL statement, written on one line without comments. You will see the raw MySQL output and nothing else; the table will not be shown to you otherwise.
- commit_final_answer: submit your final answer when you are confident, as a list of strings. Give exact values that match the question, with no extra words. If the question is about modifying the database (INSERT, UPDATE or DELETE), make the change with execute_sql first; then the answer field may hold anything.
Every round must call a tool. You have at most {max_rounds} rounds."""
TIPS_HEADER = "Some tips that may help for this task:"
TOOL_HINT_HEADER = "Additional reusable tool-use hint from the harness:"

TOOL_SPECS = [
    {"type": "function", "function": {
        "name": "execute_sql",
        "description": "Execute one SQL statement on the MySQL database and return the raw result.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "A single SQL statement on one line."}},
            "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "commit_final_answer",
        "description": "Commit the final answer and end the task. For questions, give the exact answer "
                       "values; for INSERT/UPDATE/DELETE tasks, commit after executing the change.",
        "parameters": {"type": "object", "properties": {
            "answers": {"type": "array", "items": {"type": "string"},
                        "description": "The answer values, one string each."}},
            "required": ["answers"]}}},
]

_log = get_logger("envs.dbbench")


def normalise_sql(sql: str) -> str:
    return re.sub(r"\s+", " ", str(sql)).strip().rstrip(";").strip().lower()


def format_output(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT_CHARS else text[:MAX_OUTPUT_CHARS] + "[TRUNCATED]"


def _answer_shape(entry: dict) -> str:
    kind = tasks.task_type(entry).lower()
    if tasks.is_mutation(entry):
        return "none"
    if kind.startswith("aggregation") or kind == "counting":
        return "number"
    return "values" if _PLURAL_Q.search(str(entry.get("description", ""))) else "value"


def _is_number(text: str) -> bool:
    try:
        float(judge.normalise(text))
        return True
    except ValueError:
        return False


# The kind `auto` chose, per server address, for the life of this process: an env rebuilt after an
# infra error (the rollout pool does that) must get the same kind, never a silent SQLite fallback.
_AUTO_CHOICES: dict[str, str] = {}


def _server_address(cfg) -> str:
    return cfg.socket or f"{cfg.host}:{cfg.port}"


def resolve_backend(cfg) -> str:
    """The concrete backend ("mariadb"/"sqlite") of the `dbbench` section; `auto` is decided at
    its first use in this process (MariaDB when a server answers then, else SQLite; logged)."""
    if cfg.backend != "auto":
        return cfg.backend
    address = _server_address(cfg)
    if address not in _AUTO_CHOICES:
        try:
            _connect_mariadb(cfg).close()
            _AUTO_CHOICES[address], reason = "mariadb", "server answered"
        except B.DBUnavailable as e:
            _AUTO_CHOICES[address], reason = "sqlite", f"no MariaDB at {address}: {e}"
        log_event("dbbench", "backend", backend=_AUTO_CHOICES[address], server=address, reason=reason,
                  scope="decided once for this process")
    return _AUTO_CHOICES[address]


def _connect_mariadb(cfg) -> B.MariaDBBackend:
    try:
        return B.MariaDBBackend(host=cfg.host, port=cfg.port, user=cfg.user, password=cfg.password,
                                socket=cfg.socket, connect_timeout=cfg.connect_timeout_s)
    except B.DBUnavailable as e:
        raise B.DBUnavailable(f"dbbench: {e}; start it with `bash launch/mariadb.sh start`") from e


def connect_backend(cfg) -> Any:
    """The backend of the `dbbench` config section (see `resolve_backend`). Raises `DBUnavailable`
    when the backend is MariaDB and the server does not answer: never falls back to SQLite."""
    return _connect_mariadb(cfg) if resolve_backend(cfg) == "mariadb" else B.SQLiteBackend()


class DBBenchEnv(Environment):
    benchmark = "dbbench"
    env_version = "dbbench-v1"
    process_all_tool_calls = True
    honours_rewrite_and_force = False

    @classmethod
    def pin_run_section(cls, section: dict) -> dict:
        cfg = dbconfig.defaults()
        cfg.update(dict(section))
        return {**dict(section), "backend": resolve_backend(cfg)}

    def __init__(self, config=None, backend=None, data_dir=None):
        """`config`: the `dbbench` section (defaults when None); `backend`: an already built
        backend object (tests/benchmarks), else one is connected from the config."""
        self.cfg = dbconfig.defaults()
        if config is not None:  # a ConfigDict section or its dict form (rollout workers)
            self.cfg.update(dict(config))
        self.max_turns = int(self.cfg.max_rounds)
        self.data_dir = data_dir or tasks.DATA_DIR
        self.backend = backend if backend is not None else connect_backend(self.cfg)
        self._task: Task | None = None

    # --- tasks ---------------------------------------------------------------------------------
    def tasks(self, split: str) -> list[Task]:
        return tasks.load_split(split, self.env_version, self.data_dir, self.cfg.task_files)

    # --- prompt and tools ----------------------------------------------------------------------
    def tool_specs(self) -> list[dict]:
        return copy.deepcopy(TOOL_SPECS)

    def apply_tool_hint(self, tools: list[dict], tool_hint: str) -> list[dict]:
        return copy.deepcopy(tools)  # DBBench puts the tool hint in the system prompt instead

    def system_prompt(self, tips: list[str], tool_hint: str) -> str:
        parts = [SYSTEM_PROMPT.format(max_rounds=self.max_turns)]
        tips = [t for t in tips if t]
        if tips:
            parts.append(TIPS_HEADER + "\n" + "\n".join(f"- {t}" for t in tips))
        if tool_hint:
            parts.append(TOOL_HINT_HEADER + "\n" + tool_hint)
        return "\n\n".join(parts)

    # --- episode -------------------------------------------------------------------------------
    def reset(self, task: Task) -> str:
        if task.benchmark != self.benchmark:
            raise ValueError(f"task of benchmark {task.benchmark!r} given to DBBenchEnv")
        entry = task.payload["entry"]
        info = entry["table"]["table_info"]
        self._task = task
        self.entry = entry
        self.mutation_task = tasks.is_mutation(entry)
        self.table = self.backend.create(entry["table"]["table_name"], [c["name"] for c in info["columns"]],
                                         info["rows"])
        self.committed = False
        self.reward = 0.0
        self.answers: list[str] = []
        self.last_action: Action | None = None
        self.s = {"sql_count": 0, "last_sql": "", "last_result": None, "last_error_kind": "",
                  "last_error_text": "", "last_result_was_error": False, "error_streak": 0,
                  "empty_streak": 0, "text_only_streak": 0, "loop_streak": 0, "mutation_attempted": False,
                  "candidate_answer": [], "candidate_answer_shape": "", "candidate_implausible": False}
        self.sql_history: list[str] = []
        self.sql_history_raw: list[str] = []
        self.discovered: dict[str, list[str]] = {}
        self.db_response = ""
        parts = []
        if entry.get("evidence"):
            parts.append(f"Evidence about the question: {entry['evidence']}")
        if entry.get("add_description"):
            parts.append(f"Additional table information about the question: {entry['add_description']}")
        parts.append(f"Question: {entry.get('description', '')}")
        return "\n".join(parts)

    def action_from_tool_call(self, name: str, arguments: dict) -> Action | None:
        if not isinstance(arguments, dict):
            return None
        if name == "execute_sql":
            query = arguments.get("query")
            if not isinstance(query, str):
                return None
            return Action("execute_sql", {"query": query}, query)
        if name == "commit_final_answer":
            raw = arguments.get("answers", [])
            answers = [("" if a is None else str(a)) for a in raw] if isinstance(raw, list) else [str(raw)]
            return Action("commit_final_answer", {"answers": answers}, f"commit_final_answer({answers!r})")
        return None

    def invalid_call_message(self, name: str, arguments: Any) -> str:
        return (f"Invalid function call {name!r}: use execute_sql with a 'query' string or "
                f"commit_final_answer with an 'answers' list of strings.")

    def no_tool_call_message(self) -> str:
        return ("No executable tool calls found. Call execute_sql to run SQL or commit_final_answer to "
                "submit your answer.")

    def action_from_hook(self, action: str, current: Action | None, site: str) -> Action | None:
        # Never executed (honours_rewrite_and_force is False); the SQL reading is for the event log.
        action = str(action or "").strip()
        return Action("execute_sql", {"query": action}, action) if action else None

    def on_no_tool_call(self) -> StepResult | None:
        self.s["text_only_streak"] += 1
        return None

    def step(self, action: Action) -> StepResult:
        assert self._task is not None, "reset() first"
        if self.committed:
            raise RuntimeError("dbbench: step() after the episode ended")
        self.last_action = action
        self.s["text_only_streak"] = 0
        if action.tool == "execute_sql":
            observation = self._execute(action.arguments["query"])
            return StepResult(observation=observation, reward=0.0, done=False,
                              info={"error_kind": self.s["last_error_kind"]})
        if action.tool == "commit_final_answer":
            self.answers = list(action.arguments["answers"])
            self.committed = True
            if self.mutation_task:
                self.reward = 1.0 if self._hash_matches() else 0.0
            else:
                self.reward = 1.0 if judge.answers_match(self.answers, self._task.oracle["label"]) else 0.0
            return StepResult(observation="Your answer has been committed.", reward=self.reward, done=True,
                              info={"committed": True})
        raise ValueError(f"dbbench: unknown tool {action.tool!r}")

    def _execute(self, sql: str) -> str:
        s = self.s
        norm = normalise_sql(sql)
        s["loop_streak"] = s["loop_streak"] + 1 if self.sql_history and self.sql_history[-1] == norm else 0
        self.sql_history = (self.sql_history + [norm])[-HISTORY_LEN:]
        self.sql_history_raw = (self.sql_history_raw + [sql])[-HISTORY_LEN:]
        s["sql_count"] += 1
        s["last_sql"] = sql
        if not sql.strip():
            result, text = B.ExecResult(rows=[]), NO_RESPONSE
        else:
            result = self.backend.execute(sql)
            text = result.error if result.error else str(result.rows)
        self.db_response = format_output(text)
        self._track(sql, result)
        return self.db_response

    def _track(self, sql: str, result: B.ExecResult) -> None:
        s = self.s
        is_mutation_sql = bool(_MUTATION_SQL.match(sql))
        if result.error:
            code = result.error_code
            low = result.error.lower()
            kind = ("unknown_col" if code == 1054 or "unknown column" in low or "no such column" in low
                    else "syntax" if code == 1064 or "syntax" in low else "")
            s.update(last_result=result.error, last_error_kind=kind, last_error_text=result.error,
                     last_result_was_error=True, error_streak=s["error_streak"] + 1, empty_streak=0)
            return
        rows = [[B.plain_value(v) for v in row] for row in result.rows]
        kind = ""
        if not sql.strip() or (not rows and not is_mutation_sql and result.has_result_set):
            kind = "empty"
        elif rows and _AGG_SQL.search(sql) and all(v is None for row in rows for v in row):
            kind = "null_agg"
        s.update(last_result=rows, last_error_kind=kind, last_error_text="", last_result_was_error=False,
                 error_streak=0, empty_streak=s["empty_streak"] + 1 if kind == "empty" else 0)
        if is_mutation_sql:
            s["mutation_attempted"] = True
            return
        m = _DESCRIBE_SQL.match(sql)
        if m and rows:
            name = m.group(1).strip("`\"")
            self.discovered[name] = [str(r[0]) for r in rows]
            return
        if rows and _SELECT_SQL.match(sql):
            self._set_candidate(rows)

    def _set_candidate(self, rows: list[list]) -> None:
        n_rows, n_cols = len(rows), max(len(r) for r in rows)
        cells = [v for row in rows[:CANDIDATE_MAX_ROWS] for v in row]
        shape = ("scalar" if n_rows == 1 and n_cols == 1 else "column" if n_cols == 1
                 else "row" if n_rows == 1 else "table")
        answer = ["" if v is None else str(v) for v in cells]
        blank = all(a.strip() == "" for a in answer)
        not_number = _answer_shape(self.entry) == "number" and not all(_is_number(a) for a in answer)
        self.s.update(candidate_answer=answer, candidate_answer_shape=shape,
                      candidate_implausible=bool(blank or not_number or n_rows > CANDIDATE_MAX_ROWS))

    def _hash_matches(self) -> bool:
        gold = self._task.oracle.get("answer_md5") or ""
        if not gold:
            gold = self.gold_hash(self._task)
        got = self.backend.table_hash(self.table)   # a lost connection raises: infra, not a 0
        if got is None:   # the agent dropped/renamed the table: a wrong answer
            _log.info("dbbench task %s: answer table %r unreadable", self._task.task_id, self.table)
            return False
        return got in gold

    def gold_hash(self, task: Task) -> str:
        """The gold table hash of a mutation task without `answer_md5` (synthetic tasks): run the
        gold SQL on a scratch database of the same backend and server."""
        scratch = self.backend.scratch()
        try:
            info = task.payload["entry"]["table"]["table_info"]
            table = scratch.create(task.payload["entry"]["table"]["table_name"],
                                   [c["name"] for c in info["columns"]], info["rows"])
            for sql in task.oracle.get("label") or []:
                scratch.execute(sql)
            digest = scratch.table_hash(table)
        finally:
            scratch.close()
        if digest is None:
            raise ValueError(f"dbbench task {task.task_id}: the gold SQL leaves no table to hash")
        return digest

    # --- ctx -----------------------------------------------------------------------------------
    def hook_context(self, site: str, *, turn: int, action: Action | None = None, raw_output: str = "") -> dict:
        assert self._task is not None, "reset() first"
        if action is None and site == "make_pre_hint":
            action = self.last_action
        tool = action.tool if action else ""
        remaining = self.max_turns - turn - (1 if site == "on_post_step" else 0)
        # A shallow view of the env's state: the hook call copies ctx once (frozen inline, pickled
        # to the hook process) before any hook code sees it.
        state = dict(self.s)
        state["remaining_rounds"] = remaining
        action_ctx = {"tool": tool,
                      "query": action.arguments.get("query", "") if action and tool == "execute_sql" else "",
                      "answers": list(action.arguments.get("answers", [])) if action and tool == "commit_final_answer" else [],
                      "h2_action": "", "h2_blocked_reason": "", "commit_gate_action": "", "commit_gate_reason": ""}
        return {
            "site": site,
            "action": action_ctx,
            "state": state,
            "task": {"task_type": tasks.task_type(self.entry), "answer_shape": _answer_shape(self.entry),
                     "target_table": self.table, "description": str(self.entry.get("description", ""))},
            "dbbench": {"sql_history": list(self.sql_history), "sql_history_raw": list(self.sql_history_raw),
                        "discovered_columns": dict(self.discovered), "db_response": self.db_response,
                        "round": turn + 1},
            "predicates": self._predicates(action_ctx, state),
        }

    def _predicates(self, a: dict, s: dict) -> dict:
        commit = a["tool"] == "commit_final_answer"
        no_sql = s["sql_count"] == 0
        return {
            "execute_sql": a["tool"] == "execute_sql",
            "commit_final_answer": commit,
            "no_sql_yet": no_sql,
            "commit_before_sql": commit and no_sql,
            "commit_empty_answer": commit and not any(str(x).strip() for x in a["answers"]),
            "mutation_task": self.mutation_task,
            "mutation_not_attempted": self.mutation_task and not s["mutation_attempted"],
            "last_result_error": bool(s["last_result_was_error"]),
            "last_result_empty": s["last_error_kind"] == "empty",
            "unknown_column_error": s["last_error_kind"] == "unknown_col",
            "syntax_error": s["last_error_kind"] == "syntax",
            "repeated_sql": (len(self.sql_history) >= 2 and self.sql_history[-1] == self.sql_history[-2])
                            or s["loop_streak"] > 0,
            "candidate_answer_available": bool(s["candidate_answer"]),
            "remaining_rounds_low": s["remaining_rounds"] <= 3,
            "text_only_loop": s["text_only_streak"] >= 2,
        }

    def manifest_extras(self, task: Task) -> dict:
        # Scores differ between backends (SQLite dialect gaps): never pair across them.
        return {"backend": self.backend.name}

    def final_result(self) -> dict:
        status = "completed" if self.committed else "task_limit_reached"
        return {"reward": self.reward, "success": self.reward >= 1.0, "status": status,
                "answers": list(self.answers), "task_type": tasks.task_type(self.entry),
                "backend": self.backend.name, "sql_count": self.s["sql_count"]}

    def close(self) -> None:
        self.backend.close()
