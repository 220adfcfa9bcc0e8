"""DBBench's side of the patch layer (envs.plugin.PatchSpec): the DBBench sections of the engineer
prompt and the vocabulary patch validation checks DBBench patches against. Its prompt adds a runtime-context section (two tools, no
ctx["world"], mutations judged on the database)."""
from __future__ import annotations

from envs.plugin import PatchSpec

RETURN_CONTRACTS = """Return contracts (anything else, or None, means "no effect")
- on_init -> {"skills": [{"text": TEXT}, ...], "tool_hint": TEXT}: runs once after reset; skills become tips in the system prompt and the tool hint is added to the system prompt.
- make_pre_hint -> {"message": TEXT}: runs before each agent turn; the message is shown to the agent as a user message.
- on_before_action -> {"kind": "block_and_prompt", "message": TEXT}: runs before each execute_sql or commit_final_answer call; block skips that call and returns the message as the tool result.
- on_post_step -> {"kind": "inject_hint", "message": TEXT}: runs after each executed SQL statement; the message is shown as a user message.
- rewrite_action and force_action are ignored in DBBench v1; do not return them."""

DESIGN_TARGET = """Design target (Life-Harness style)
Treat the patch as a small runtime program, not a one-step solver or planner. Keep a stage machine in nb and update it mainly in on_post_step; give soft guidance in make_pre_hint; intervene hard in on_before_action only under narrow conditions. Remember the last hint in nb["last_hint"] and do not repeat it; avoid broad hints that fire on every turn.
- Stages to track: need_schema_probe, fixing_unknown_column, fixing_empty_result, mutation_needs_execution, ready_to_commit_candidate, repeated_query_loop.
- Soft hints worth giving: DESCRIBE / SHOW TABLES after a schema error, look at sample rows after an empty SELECT, cast TEXT columns holding numbers before ranking or aggregating, check a mutation before committing.
- on_before_action may block only: a commit before any SQL ran, a commit with an empty answer list, a commit on a mutation task before any mutation was executed.
- Do not put exact SQL from the evidence into hooks, apart from generic schema probes."""

VARIABLES = """Variables available to hooks (ctx is read-only; read it as a dict or with attributes)
- ctx["action"]: tool ("execute_sql" | "commit_final_answer"), query, answers, h2_action, h2_blocked_reason, commit_gate_action, commit_gate_reason.
- ctx["state"]: sql_count, last_sql, last_result, last_error_kind ("unknown_col" | "syntax" | "empty" | "null_agg" | ""), last_error_text, last_result_was_error, error_streak, empty_streak, text_only_streak, loop_streak, mutation_attempted, candidate_answer, candidate_answer_shape, candidate_implausible, remaining_rounds.
- ctx["task"]: task_type (SELECT-like | INSERT | UPDATE | DELETE), answer_shape, target_table, description.
- ctx["dbbench"]: sql_history, sql_history_raw, discovered_columns (table -> columns), db_response, round.
- ctx["predicates"]: execute_sql, commit_final_answer, no_sql_yet, commit_before_sql, commit_empty_answer, mutation_task, mutation_not_attempted, last_result_error, last_result_empty, unknown_column_error, syntax_error, repeated_sql, candidate_answer_available, remaining_rounds_low, text_only_loop.
Code hook notes: last_error_kind "empty" is not a failure after a mutation; candidate_answer is a noisy guess. Aim for under 6000 characters per hook."""

RULES = """Rules
- No cell values, final answers or ground-truth SQL from the traces.
- Intervene only where the evidence shows a recurring failure; when the baseline already succeeds often, prefer no change or a soft hint over broad forcing.
- Put all JSON inside <patch>; no markdown."""

RUNTIME_CONTEXT = """DBBench Runtime Context
- The agent has two tools: execute_sql(query) runs one MySQL statement; commit_final_answer(answers) submits the final answer list and ends the episode.
- Hooks read ctx["action"], ctx["state"], ctx["task"], ctx["dbbench"] and ctx["predicates"]. There is no ctx["world"] in DBBench.
- SELECT-style tasks are judged on the committed answer values. INSERT / UPDATE / DELETE tasks are judged on the final database state, not on the committed text.
- A successful INSERT / UPDATE / DELETE often returns an empty result; that is success, not an error, so do not treat it as a failed query."""

PATCH = PatchSpec(
    task_words="SQL-agent traces",
    return_contracts=RETURN_CONTRACTS,
    design_target=DESIGN_TARGET,
    variables=VARIABLES,
    rules=RULES,
    runtime_context=RUNTIME_CONTEXT,
    tools=("execute_sql", "commit_final_answer"),
    condition_paths=frozenset(
        {"action." + k for k in ("tool", "query", "answers", "h2_action", "h2_blocked_reason",
                                 "commit_gate_action", "commit_gate_reason")}
        | {"state." + k for k in ("sql_count", "last_sql", "last_result", "last_error_kind", "last_error_text",
                                  "last_result_was_error", "error_streak", "empty_streak", "text_only_streak",
                                  "loop_streak", "mutation_attempted", "candidate_answer", "candidate_answer_shape",
                                  "candidate_implausible", "remaining_rounds")}
        | {"task." + k for k in ("task_type", "answer_shape", "target_table")}),
    predicates=("execute_sql", "commit_final_answer", "no_sql_yet", "commit_before_sql", "commit_empty_answer",
                "mutation_task", "mutation_not_attempted", "last_result_error", "last_result_empty",
                "unknown_column_error", "syntax_error", "repeated_sql", "candidate_answer_available",
                "remaining_rounds_low", "text_only_loop"),
    legacy_effective=False,   # DBBench v1 runs no legacy DSL rules, skills or tool hints
)
