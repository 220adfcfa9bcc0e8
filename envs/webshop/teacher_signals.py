"""WebShop's failure modes in a packet's traces (the template teacher's evidence for its library):
from the searches and clicks, the prices and the final reward the engineer sees."""
from __future__ import annotations

import re

from envs.plugin import TeacherSignals, call_args

_CALL = re.compile(r"^ASSISTANT_TOOL: (search_action|click_action) (.*)$", re.M)


def detect(trace: str) -> set[str]:
    calls = []
    for name, raw in _CALL.findall(trace):
        args = call_args(raw)
        calls.append((name, str(next(iter(args.values()), "")).strip().lower() if args else ""))
    clicks = [v for n, v in calls if n == "click_action"]
    out = set()
    if "buy now" in clicks:
        out.add("options_before_buy")
        if re.search(r"final_reward: 0\.\d*[1-9]", trace):
            out.add("careful_pick")
    if re.search(r"\$\s?\d", trace) and re.search(r"price|budget|lower than", trace, re.I) and "buy now" in clicks:
        out.add("budget")
    if re.search(r"repeated_search_terms:", trace):
        out.add("search_loop")
    return out


SIGNALS = TeacherSignals(trace_start=re.compile(r"^### Trace case", re.M), detect=detect)
