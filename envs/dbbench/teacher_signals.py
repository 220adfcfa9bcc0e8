"""DBBench's failure modes in a packet's traces (the template teacher's evidence for its library):
from the SQL calls, the committed answers, the question and the tool results the engineer sees."""
from __future__ import annotations

import re

from envs.plugin import TeacherSignals, call_args

_CALL = re.compile(r"^ASSISTANT_TOOL (execute_sql|commit_final_answer): (.*)$", re.M)
_MUTATION_Q = re.compile(r"\b(insert|add|update|change|modify|set|delete|remove)\b", re.I)
_MUTATION_SQL = re.compile(r"^\W*(insert|update|delete|replace)\b", re.I)
_NUMERIC_Q = re.compile(r"\b(highest|lowest|largest|smallest|most|least|maximum|minimum|average|total|sum|"
                        r"greater|more than|less than|fewer|rank|top|bottom|first|last)\b", re.I)


def detect(trace: str) -> set[str]:
    calls = [(name, call_args(raw)) for name, raw in _CALL.findall(trace)]
    sqls = [str(a.get("query", "")).strip() for n, a in calls if n == "execute_sql"]
    commits = [a.get("answers") for n, a in calls if n == "commit_final_answer"]
    question = " ".join(re.findall(r"^USER: (.*)$", trace, re.M))
    results = " ".join(re.findall(r"^TOOL_RESULT: (.*)$", trace, re.M)).lower()
    mutation_q = bool(_MUTATION_Q.search(question)) and not question.lower().lstrip().startswith(("what", "which", "how"))
    out = set()
    if calls and calls[0][0] == "commit_final_answer":
        out.add("commit_before_sql")
    if any(isinstance(c, list) and not any(str(x).strip() for x in c) for c in commits) and not mutation_q:
        out.add("empty_commit")
    if any(isinstance(c, list) and any(len(str(x).split()) > 5 or "answer is" in str(x).lower() for x in c)
           for c in commits) and not mutation_q:
        out.add("answer_format")
    mutations = [q for q in sqls if _MUTATION_SQL.match(q)]
    if mutation_q and commits and not mutations:
        out.add("mutation_commit")
    if len(mutations) != len(set(mutations)):
        out.add("mutation_verify")
    if re.search(r"1054|unknown column|no such column|1064|syntax|1146|doesn't exist|no such table", results):
        out.add("schema_probe")
    if len(sqls) != len(set(sqls)):
        out.add("query_loop")
    if _NUMERIC_Q.search(question) and not mutation_q:
        out.add("text_numeric")
    return out


SIGNALS = TeacherSignals(trace_start=re.compile(r"^Trace index=", re.M), detect=detect)
