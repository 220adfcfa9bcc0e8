"""Scripted DBBench target: a seeded simulator of a small LLM SQL agent.

It knows the task's gold from `Task.oracle` (the gold SQL of INSERT/UPDATE tasks; for SELECT-type
tasks the `label` and the data's own query, whose double-quoted identifiers it rewrites to
backticks, falling back to `SELECT * FROM t` when that query errors) and plays a competent episode
(optional DESCRIBE -> the query or mutation -> optional verification SELECT -> commit), except for the
failure modes below, drawn once per episode from `(seed, task)`:

| mode | rate at skill 0.6 | what it does | what rescues it |
|---|---|---|---|
| sloppy identifiers (no schema probe) | 0.55 if a name needs quoting, else 0.35 | first query has a bare or underscored table name (syntax / missing-table error) or a guessed column name (1054) | self-fix (0.35 per try), a schema/backtick/DESCRIBE hint or tip, a repeated-query hint |
| repeated failing query | when a self-fix fails | re-runs the same failing SQL; gives up after 3 tries and commits a guess | schema or loop hints |
| premature commit | 0.10 | commits a guess / "done" before any SQL | a block on commit |
| empty commit (SELECT) | 0.10 | commits `[]` | a block on empty commit |
| wrong format (SELECT) | 0.15 | commits "The answer is X." | a block on descriptive answers; tips on exact values/answer shape |
| text-numeric mistake (ranking, comparison, aggregation) | 0.45 | commits a wrong value (as if it had ordered TEXT lexicographically) | a cast/numeric hint or tip |
| mutation skipped | 0.20 | looks at rows, then commits "The record has been updated." without the INSERT/UPDATE | a block on mutation-not-executed; mutation tips |
| mutation executed twice (INSERT) | 0.10 | re-runs the INSERT, reading `[]` as failure | hints/tips that `[]` after a mutation is success or to verify |
| text-numeric mistakes that stay wrong | half of the above | as above | nothing |
| misread (capability limit) | 0.08 | SELECT: commits a wrong value; mutation: writes its first string literal slightly wrong (case / trailing dot) | nothing |
| text-only turn | 0.04 per turn | answers with text and no tool call | — |

Failure rates scale with `config.skill` (`rate * (1 - skill) / 0.4`; skill 1.0 = none). Every
message the harness adds (pre-hint and post-step user messages, block texts returned for a tool
call, on_init tips and the tool hint in the system prompt) is read for its *kind* (schema probing,
quoting, casting, executing/verifying mutations, answer format, repeated queries) and followed with
probability `config.hint_follow_prob` (tips and the tool hint in the system prompt, being less
salient, with half that probability): following clears the matching failure mode and makes the
agent take the plausible next step (DESCRIBE the table, execute first, commit raw values...).
A block it does not follow makes it retry the same commit. Hook texts are only classified by kind;
the answers always come from the oracle, never from hook messages.

Deterministic given (seed, messages): each random draw is keyed by (seed, task identity, draw name,
message index or turn), and the episode state is re-derived from the messages on every call.
At the defaults (skill 0.6, hint_follow_prob 0.7) baseline success on `test` is 52.7% on MariaDB
(seed 0; SELECT-type 0.48, INSERT 0.49, UPDATE 0.61; dev 58%); skill 1.0 gives 299/300 (task 225's
gold hash is unreproducible). The Harness-R1 held-out patches raise it to 0.80-0.83
(benchmarks/bench_envs_dbbench.py --tasks 300 --patches '*'; tests/envs/test_dbbench_episodes.py).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re

from envs.base import Task
from envs.scripted import behaviour, setting

DEFAULT_RATES = {
    "sloppy_quoted": 0.55, "sloppy_plain": 0.35, "premature_commit": 0.10, "empty_commit": 0.10,
    "wrong_format": 0.15, "textnum": 0.45, "skip_mutation": 0.20, "double_mutation": 0.10,
    "text_only": 0.04, "misread": 0.08,
}
DEFAULT_SKILLS = {"self_fix": 0.35, "probe": 0.2, "verify": 0.3}
TIP_SALIENCE = 0.5      # a tip in the system prompt is taken up half as often as a direct message
HARD_TEXTNUM = 0.5      # share of text-numeric mistakes that no hint repairs
MAX_REPEATS = 3
TEXTNUM_TYPES = ("ranking", "comparison", "aggregation")

# Kinds of harness text, by keywords (lower case).
_KINDS = {
    "schema": ("describe", "show tables", "schema", "backtick", "identifier", "column name", "quote"),
    "loop": ("repeat", "rerun", "re-run", "same sql", "same query", "change strategy", "loop"),
    "cast": ("cast", "numeric", "lexicographic", "signed", "decimal"),
    "mutation": ("insert", "update", "delete", "mutation", "data-changing", "modify"),
    "verify": ("verify", "still mean success", "[] ", "empty tool result", "empty result from"),
    "format": ("natural-language", "description", "success message", "raw", "exact value",
               "answer shape", "requested value", "output shape", "no extra", "data values"),
    "empty": ("empty answer", "empty list", "empty commit"),
}
_SIMPLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DB_OUTPUT = re.compile(r"^(\[.*\]|\d+ \([0-9A-Z]{5}\): .*|No response from database\.)", re.S)




def kinds_of(text: str) -> set[str]:
    low = " " + str(text).lower() + " "
    return {k for k, words in _KINDS.items() if any(w in low for w in words)}


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def needs_quoting(name: str) -> bool:
    return not _SIMPLE_NAME.match(name)


@dataclasses.dataclass
class _Step:
    index: int            # message index of the assistant message
    tool: str
    args: dict
    result: str | None    # tool message content (None when missing)
    result_index: int     # message index of that tool message (-1 when missing)
    blocked: bool         # the harness answered with something other than a DB result


class ScriptedAgent:
    name = "scripted-dbbench"

    def __init__(self, task: Task, seed: int, config=None):
        self.task = task
        self.seed = int(seed)
        self.rates, scale, self.hint_follow_prob = behaviour(config, DEFAULT_RATES, "dbbench_rates")
        overrides = dict(setting(config, "dbbench_rates", {}) or {})
        self.skills = {k: max(0.0, 1.0 - (1.0 - overrides.get(k, v)) * scale) for k, v in DEFAULT_SKILLS.items()}
        entry = task.payload["entry"]
        self.entry = entry
        self.table = entry["table"]["table_name"]
        self.columns = [c["name"] for c in entry["table"]["table_info"]["columns"]]
        self.rows = entry["table"]["table_info"]["rows"]
        self.type = str((entry.get("type") or ["other"])[0])
        self.mutation = self.type.upper() in ("INSERT", "UPDATE", "DELETE")
        self.label = [str(x) for x in task.oracle.get("label") or []]
        self.key = task.payload.get("task_sha256") or f"{task.split}:{task.task_id}"
        self.main_sql = self.label[0] if self.mutation and self.label else self._select_sql()
        if self.mutation and self._draw("misread") < self.rates["misread"]:
            self.main_sql = self._misread_literal(self.main_sql)
        self.sloppy_sql = self._sloppy(self.main_sql)
        sloppy_rate = self.rates["sloppy_quoted" if needs_quoting(self.table) else "sloppy_plain"]
        textnum_task = any(self.type.startswith(t) for t in TEXTNUM_TYPES)
        self.modes = {
            "sloppy": self.sloppy_sql is not None and self._draw("sloppy") < sloppy_rate,
            "probe": self._draw("probe") < self.skills["probe"],
            "premature_commit": self._draw("premature") < self.rates["premature_commit"],
            "empty_commit": not self.mutation and self._draw("empty") < self.rates["empty_commit"],
            "wrong_format": not self.mutation and self._draw("format") < self.rates["wrong_format"],
            "textnum": not self.mutation and textnum_task and self._draw("textnum") < self.rates["textnum"],
            "hard_textnum": self._draw("hard_textnum") < HARD_TEXTNUM,
            "misread": self._draw("misread") < self.rates["misread"],
            "skip_mutation": self.mutation and self._draw("skip") < self.rates["skip_mutation"],
            "double_mutation": self.type.upper() == "INSERT" and self._draw("double") < self.rates["double_mutation"],
            "verify": self.mutation and self._draw("verify") < self.skills["verify"],
        }

    # --- randomness: keyed, so the same messages always give the same reply ---------------------
    def _draw(self, *key) -> float:
        digest = hashlib.sha256(json.dumps([self.seed, self.key, *key]).encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big")).random()

    def _follows(self, *key) -> bool:
        return self._draw("follow", *key) < self.hint_follow_prob

    # --- the agent's own SQL ------------------------------------------------------------------
    def _select_sql(self) -> str:
        sql = str(self.task.oracle.get("sql") or "").strip().rstrip(";")
        if not sql:
            return f"SELECT * FROM {quote(self.table)}"
        return re.sub(r'"([^"]*)"', lambda m: quote(m.group(1)), sql)

    def _sloppy(self, sql: str) -> str | None:
        """The query a model writes without looking at the schema, or None if it would be right."""
        quoted_table = quote(self.table)
        if needs_quoting(self.table) and quoted_table in sql:
            if self._draw("sloppy_kind") < 0.5:
                return sql.replace(quoted_table, self.table, 1)
            return sql.replace(quoted_table, re.sub(r"\W+", "_", self.table).strip("_"), 1)
        for col in self.columns:
            pattern = re.compile(r"(?<![\w`])" + re.escape(col) + r"(?![\w`])")
            if col and _SIMPLE_NAME.match(col) and pattern.search(sql):
                guess = col.lower() + ("_name" if not col.lower().endswith("name") else "_id")
                return pattern.sub(guess, sql, count=1)
        return None

    def _misread_literal(self, sql: str) -> str:
        """The mutation with its first string literal slightly wrong (case, trailing punctuation)."""
        def spoil(m):
            text = m.group(1)
            changed = text.lower() if text != text.lower() else text + "."
            return "'" + changed + "'"
        return re.sub(r"'((?:[^']|'')+)'", spoil, sql, count=1)

    def _values_in_sql(self) -> list[str]:
        return re.findall(r"'((?:[^']|'')*)'", self.main_sql)[:6] or ["done"]

    def _wrong_value(self) -> list[str]:
        first = self.label[0] if self.label else ""
        try:
            value = float(first.replace(",", ""))
        except ValueError:
            value = None
        if value is not None:
            wrong = value + max(1.0, round(abs(value) * 0.1))
            return [str(int(wrong)) if "." not in first else str(wrong)]
        cells = [str(c) for row in self.rows for c in row if str(c) not in self.label and str(c).strip()]
        if not cells:
            return ["unknown"]
        return [cells[int(self._draw("wrong_cell") * len(cells))]]

    # --- reading the conversation -------------------------------------------------------------
    def _parse(self, messages: list[dict]) -> tuple[list[_Step], list[tuple[int, set[str]]]]:
        """My past tool calls with their results, and harness texts as (message index, kinds)."""
        results = {m.get("tool_call_id"): (i, str(m.get("content") or "")) for i, m in enumerate(messages)
                   if m.get("role") == "tool"}
        steps: list[_Step] = []
        harness: list[tuple[int, set[str]]] = []
        for i, m in enumerate(messages):
            role = m.get("role")
            if role == "assistant":
                for call in m.get("tool_calls") or []:
                    fn = call.get("function") or {}
                    try:
                        args = json.loads(fn.get("arguments") or "{}")
                    except (TypeError, ValueError):
                        args = {}
                    idx_res = results.get(call.get("id"))
                    res = idx_res[1] if idx_res else None
                    blocked = res is not None and not _DB_OUTPUT.match(res.strip())
                    steps.append(_Step(i, str(fn.get("name", "")), args, res,
                                       idx_res[0] if idx_res else -1, blocked))
                    if blocked:
                        harness.append((idx_res[0], kinds_of(res) | {"block"}))
            elif role == "user" and i > 1 and not str(m.get("content", "")).startswith("No executable tool"):
                harness.append((i, kinds_of(m.get("content", ""))))
        return steps, harness

    def _tip_kinds(self, messages: list[dict]) -> set[str]:
        """Kinds of the on_init tips / tool hint in the system prompt that this agent takes up."""
        from envs.dbbench.env import TIPS_HEADER, TOOL_HINT_HEADER
        system = str(messages[0].get("content", "")) if messages and messages[0].get("role") == "system" else ""
        cut = min([p for p in (system.find(TIPS_HEADER), system.find(TOOL_HINT_HEADER)) if p >= 0], default=-1)
        if cut < 0:
            return set()
        return {k for k in kinds_of(system[cut:])
                if self._draw("follow", "tip", k) < self.hint_follow_prob * TIP_SALIENCE}

    # --- policy -------------------------------------------------------------------------------
    def chat(self, messages: list[dict], tools: list[dict]) -> dict:
        steps, harness = self._parse(messages)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if self._draw("text_only", turn) < self.rates["text_only"]:
            return {"role": "assistant", "content": "Let me think about which SQL query answers this question."}
        name, args, thought = self._decide(steps, harness, self._tip_kinds(messages), turn)
        call = {"id": f"call_{turn}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}
        return {"role": "assistant", "content": thought, "tool_calls": [call]}

    def _decide(self, steps: list[_Step], harness: list[tuple[int, set[str]]], tips: set[str], turn: int):
        modes = dict(self.modes)
        # Tips in the system prompt act from the start.
        if "schema" in tips:
            modes["probe"] = True
        if modes["probe"]:
            modes["sloppy"] = False  # it saw the exact names before writing SQL
        if "cast" in tips and not modes["hard_textnum"]:
            modes["textnum"] = False
        if tips & {"mutation", "verify"}:
            modes["skip_mutation"] = False
            modes["double_mutation"] = False
        if "format" in tips:
            modes["wrong_format"] = False
        # Harness messages, each followed (or not) once.
        followed = [(i, k) for i, k in harness if self._follows("msg", i)]
        last_block = next((k for i, k in reversed(harness) if "block" in k), None)
        for i, kinds in followed:
            if "cast" in kinds and not modes["hard_textnum"]:
                modes["textnum"] = False
            if "format" in kinds:
                modes["wrong_format"] = False
            if "empty" in kinds:
                modes["empty_commit"] = False
            if kinds & {"verify"}:
                modes["double_mutation"] = False
            if "mutation" in kinds and self.mutation:
                modes["skip_mutation"] = False
            if "block" in kinds:
                modes["premature_commit"] = False
                if not kinds & {"cast", "format", "empty", "verify", "mutation"}:
                    # An unspecific block: the agent becomes careful about its answer.
                    modes.update(empty_commit=False, wrong_format=False, skip_mutation=False)

        sqls = [s for s in steps if s.tool == "execute_sql" and not s.blocked]
        ran = [str(s.args.get("query", "")) for s in sqls]
        described = any(q.lower().startswith(("describe", "desc ")) for q in ran)
        main_done = self.main_sql in ran and self._ok(sqls, self.main_sql)
        commits = [s for s in steps if s.tool == "commit_final_answer"]
        blocked_commit = bool(commits) and commits[-1].blocked
        if blocked_commit and not self._follows("msg", commits[-1].result_index):
            return ("commit_final_answer", commits[-1].args, "I am confident in this answer.")

        if modes["premature_commit"] and not sqls:
            return self._commit(self._guess(), "The answer follows directly from the question.")
        if modes["probe"] and not described and not sqls:
            return self._describe("Let me look at the table's columns first.")

        # The error-recovery path after a sloppy query.
        if modes["sloppy"] and self.sloppy_sql and not main_done:
            tries = [s for s in sqls if s.args.get("query") == self.sloppy_sql]
            if not tries:
                return self._sql(self.sloppy_sql, "I will query the table directly.")
            last_error = max(s.index for s in tries)
            # Schema/loop hints, or any block of its give-up commit, send it to the schema.
            help_ = [k for i, k in followed if i > last_error and k & {"schema", "loop", "block"}]
            described_after = any(s.index > last_error and str(s.args.get("query", "")).lower().startswith("desc")
                                  for s in sqls)
            if help_ and not described_after:
                return self._describe("The harness suggests checking the schema; let me describe the table.")
            if not (help_ or described_after):
                if self._draw("self_fix", len(tries)) >= self.skills["self_fix"]:
                    if len(tries) >= MAX_REPEATS:
                        return self._commit(self._guess(), "I could not get the query to run; committing my best guess.")
                    return self._sql(self.sloppy_sql, "Let me run the query again.")
        if self.mutation:
            return self._mutation_policy(modes, sqls, ran, main_done, commits)
        return self._select_policy(modes, sqls, ran, main_done)

    def _ok(self, sqls: list[_Step], query: str) -> bool:
        return any(s.args.get("query") == query and s.result is not None and s.result.startswith("[")
                   for s in sqls)

    def _mutation_policy(self, modes, sqls, ran, main_done, commits):
        if modes["skip_mutation"] and not main_done:
            look = f"SELECT * FROM {quote(self.table)} LIMIT 5"
            if look not in ran:
                return self._sql(look, "Let me look at some rows first.")
            return self._commit(self._mutation_answer(modes, commits), "The table looks right; the task is done.")
        if self.main_sql not in ran or (not main_done and ran.count(self.main_sql) < 2):
            return self._sql(self.main_sql, "I will apply the requested change.")
        if modes["double_mutation"] and ran.count(self.main_sql) < 2:
            return self._sql(self.main_sql, "The result was empty, so the change may not have been applied; retrying.")
        verify = f"SELECT * FROM {quote(self.table)}"
        if modes["verify"] and verify not in ran:
            return self._sql(verify, "Let me verify the change.")
        return self._commit(self._mutation_answer(modes, commits), "The change has been made.")

    def _mutation_answer(self, modes, commits) -> list[str]:
        if commits and commits[-1].blocked:
            return self._values_in_sql()  # a block on the answer text: give concrete values
        return ["The record has been " + {"INSERT": "inserted", "UPDATE": "updated"}.get(self.type.upper(), "changed")
                + " successfully."]

    def _select_policy(self, modes, sqls, ran, main_done):
        if self.main_sql not in ran:
            return self._sql(self.main_sql, "This query should answer the question.")
        if not main_done:
            look = f"SELECT * FROM {quote(self.table)}"
            if look not in ran:
                return self._sql(look, "That query failed; let me read the table instead.")
        if modes["empty_commit"]:
            return self._commit([], "No matching rows.")
        if modes["textnum"] or modes["misread"]:
            return self._commit(self._wrong_value(), "Taking the value from the result.")
        if modes["wrong_format"]:
            return self._commit([f"The answer is {', '.join(self.label)}."], "Here is the answer.")
        return self._commit(list(self.label), "The query result gives the answer.")

    def _guess(self) -> list[str]:
        return (["The record has been updated."] if self.mutation else self._wrong_value())

    def _describe(self, thought: str):
        return self._sql(f"DESCRIBE {quote(self.table)}", thought)

    @staticmethod
    def _sql(query: str, thought: str):
        return "execute_sql", {"query": query}, thought

    @staticmethod
    def _commit(answers: list[str], thought: str):
        return "commit_final_answer", {"answers": answers}, thought
