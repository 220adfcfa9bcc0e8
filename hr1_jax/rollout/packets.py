"""The engineer's evidence: trace packets (WebShop/ALFWorld, spec §1.2) and the DBBench evidence
packet (§1.3), built from no-harness baseline episodes (`results.jsonl` rows of a batch).

Runtime signals come only from structured tool calls, never from regex-scraped observation text.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import re

from hr1_jax.runtime.episode import INFRA_ERROR

# §1.2 step 3: product ids (B0 + 8 alnum, either case of the B) and local paths.
_PRODUCT_ID = re.compile(r"\b[bB]0[0-9a-zA-Z]{8}\b")
_MNT_PATH = re.compile(r"/mnt/[^\s'\"]*")
_HOME_PATH = re.compile(r"/(?:root|home|tmp)(?:/[^\s'\"]*)?")
TRUNC = "...[middle truncated]..."


@dataclasses.dataclass
class TraceCase:
    index: int
    batch_id: int
    reward: float
    status: str
    messages: list[dict]


def sanitise(text: str) -> str:
    text = _PRODUCT_ID.sub("[PRODUCT_ID]", str(text))
    text = _MNT_PATH.sub("[PATH]", text)
    return _HOME_PATH.sub("[PATH]", text)


def trim(text: str, n: int) -> str:
    """Sanitise, strip, collapse 3+ newlines; keep head n/2 + tail n/2 around a marker line."""
    text = re.sub(r"\n{3,}", "\n\n", sanitise(text or "").strip())
    if len(text) <= n:
        return text
    half = max(1, n // 2)
    return f"{text[:half]}\n{TRUNC}\n{text[-half:]}"


def approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def failure_cases(batches: list[tuple[int, list[dict]]], threshold: float) -> list[TraceCase]:
    """Rows with reward < threshold, an integer index and messages (infra failures are not traces)."""
    cases = []
    for batch_id, episodes in batches:
        for ep in episodes:
            if ep.get("status") == INFRA_ERROR or ep.get("reward") is None:
                continue
            if float(ep["reward"]) < threshold and isinstance(ep.get("task_id"), int) and ep.get("trajectory"):
                cases.append(TraceCase(ep["task_id"], batch_id, float(ep["reward"]), str(ep.get("status", "")),
                                       ep["trajectory"]))
    return cases


def select(cases: list[TraceCase], strategy: str, max_traces: int) -> list[TraceCase]:
    if strategy == "lowest_reward":
        return sorted(cases, key=lambda c: (c.reward, c.batch_id, c.index))[:max_traces]
    if strategy != "round_robin":
        raise ValueError(f"unknown selection strategy {strategy!r}")
    buckets = collections.OrderedDict()
    for c in sorted(cases, key=lambda c: c.batch_id):
        buckets.setdefault(c.batch_id, []).append(c)
    queues = [sorted(b, key=lambda c: (c.reward, c.index)) for b in buckets.values()]
    out = []
    while len(out) < max_traces and any(queues):
        for q in queues:
            if q and len(out) < max_traces:
                out.append(q.pop(0))
    return out


def _tool_calls(messages: list[dict]) -> list[tuple[str, str]]:
    """(tool name, first argument value sanitised) for every structured call."""
    out = []
    for m in messages:
        for call in m.get("tool_calls") or [] if m.get("role") == "assistant" else []:
            fn = call.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = {}
            first = next(iter(args.values()), "") if isinstance(args, dict) and args else ""
            out.append((str(fn.get("name", "")), sanitise(first if isinstance(first, str) else json.dumps(first))))
    return out


def _repeats(values: list[str]) -> str:
    counts = collections.Counter(v for v in values if v)
    rep = sorted((v, n) for v, n in counts.items() if n > 1)[:3]
    return ", ".join(f"{v!r} x{n}" for v, n in rep)


def runtime_signals(bench: str, case: TraceCase) -> list[str]:
    msgs = case.messages
    actions = _tool_calls(msgs)
    text_only = sum(1 for m in msgs if m.get("role") == "assistant" and (m.get("content") or "").strip()
                    and not m.get("tool_calls"))
    sig = [f"total_actions: {len(actions)}", f"assistant_text_without_tool_turns: {text_only}"]
    if bench == "webshop":
        searches = [v for n, v in actions if n == "search_action"]
        clicks = [v for n, v in actions if n == "click_action"]
        sig += [f"search_action: {len(searches)}", f"click_action: {len(clicks)}",
                f"buy_now_clicks: {sum(v.strip().lower() == 'buy now' for v in clicks)}"]
        rep_s, rep_c = _repeats([s.lower() for s in searches]), _repeats([c.lower() for c in clicks])
        if rep_s:
            sig.append(f"repeated_search_terms: {rep_s}")
        if rep_c:
            sig.append(f"repeated_click_values: {rep_c}")
        if not (rep_s or rep_c) and _repeats([v for _, v in actions]):
            sig.append(f"repeated_action_values: {_repeats([v for _, v in actions])}")
    else:
        observations = [str(m.get("content") or "") for m in msgs if m.get("role") == "tool"]
        sig += [f"take_action: {sum(n == 'take_action' for n, _ in actions)}",
                f"nothing_happens_observations: {sum('nothing happens' in o.lower() for o in observations)}"]
        rep_a = _repeats([v.lower() for _, v in actions])
        if rep_a:
            sig.append(f"repeated_action_values: {rep_a}")
        norm = [re.sub(r"\s+", " ", sanitise(o)).strip().lower()[:200] for o in observations]
        dup = {o: n for o, n in collections.Counter(norm).items() if n > 1}
        if dup:
            sig.append(f"repeated_observations: total {sum(dup.values())}, distinct {len(dup)}")
    if "task limit" in case.status.lower().replace("_", " "):
        sig.append("terminal_signal: task_limit_reached")
    return sig


def format_case(bench: str, case: TraceCase, max_obs: int, max_assistant: int) -> str:
    lines = ["### Trace case", f"- final_reward: {case.reward:.4f}", f"- status: {sanitise(case.status)}",
             f"- turns: {len(case.messages)}", "", "Runtime signals:"]
    lines += [f"- {s}" for s in runtime_signals(bench, case)]
    lines += ["", "Transcript:"]
    for pos, m in enumerate(case.messages):
        role, content = m.get("role"), str(m.get("content") or "")
        if role == "system":
            continue
        if role == "user":
            if pos < 3 or "Evaluation metadata" in content:
                lines.append("USER: " + trim(content, max_obs))
        elif role == "assistant":
            if m.get("tool_calls"):
                for call in m["tool_calls"]:
                    fn = call.get("function") or {}
                    lines.append(f"ASSISTANT_TOOL: {fn.get('name', '')} {sanitise(fn.get('arguments', ''))}")
            elif content.strip():
                lines.append("ASSISTANT_TEXT: " + trim(content, max_assistant))
        elif role == "tool":
            lines.append("OBSERVATION: " + trim(content, max_obs))
    return "\n".join(lines)


def trace_packet(bench: str, batches: list[tuple[int, list[dict]]], *, source: str = "", threshold: float = 1.0,
                 max_traces: int = 20, strategy: str = "round_robin", max_obs_chars: int = 1200,
                 max_assistant_chars: int = 600, max_approx_tokens: int = 18000) -> tuple[str, int]:
    """The §1.2 markdown packet and the number of included traces (0 = nothing to learn from)."""
    cases = failure_cases(batches, threshold)
    chosen = select(cases, strategy, max_traces)
    name = {"webshop": "WebShop", "alfworld": "ALFWorld"}.get(bench, bench)

    def header(included: int) -> list[str]:
        return [f"# {name} no-harness failure traces",
                "These traces are deterministic extracts of no-harness failures of the target agent. They carry no "
                "debugger labels or diagnoses.", "", "## Scope", f"- benchmark: {bench}",
                f"- source run: {sanitise(source) or '(unspecified)'}", f"- candidate failures: {len(cases)}",
                f"- included traces: {included}", f"- selection strategy: {strategy}", "",
                "## Instructions for Harness Engineer",
                "- Infer recurring, general failure modes from these traces.",
                "- Do not encode product ids, exact product names, task indices or answers"
                + (", nor numbered instance ids such as \"sinkbasin 1\"." if bench == "alfworld" else "."),
                "- Prefer auditable, general, typed actions.",
                "- Use hard blocking only for clearly observable runtime conditions; otherwise prefer hints or skills.",
                "", "## Failure Traces"]

    body, used = [], approx_tokens("\n".join(header(len(chosen))))
    for case in chosen:
        text = format_case(bench, case, max_obs_chars, max_assistant_chars)
        cost = approx_tokens(text)
        if body and used + cost > max_approx_tokens:
            break
        body.append(text)
        used += cost
    packet = "\n".join(header(len(body))) + "\n\n" + "\n\n".join(body)
    packet += f"\n\nIncluded traces: {len(body)}\nApproximate tokens: {approx_tokens(packet)}"
    return packet, len(body)


def _collapse(text: str, n: int) -> str:
    text = re.sub(r"\s+", " ", str(text)).strip()
    return text if len(text) <= n else text[:n] + "..."


def render_db_trace(ep: dict, *, max_messages: int = 22, max_tool_result_chars: int = 1200) -> str:
    lines = [f"Trace index={ep['task_id']} status={ep.get('status')} reward={float(ep['reward']):.3f}"]
    shown = 0
    for m in ep.get("trajectory") or []:
        role, content = m.get("role"), str(m.get("content") or "")
        if role == "system" or (role == "user" and "Evaluation metadata:" in content):
            continue
        if shown >= max_messages:
            lines.append("...[trace truncated]")
            break
        shown += 1
        if role == "assistant":
            for call in (m.get("tool_calls") or [])[:2]:
                fn = call.get("function") or {}
                lines.append(f"ASSISTANT_TOOL {fn.get('name', '')}: {_collapse(fn.get('arguments', ''), 600)}")
            if content.strip():
                lines.append("ASSISTANT: " + content.strip()[:500])
        elif role == "tool":
            lines.append("TOOL_RESULT: " + content[:max_tool_result_chars])
        else:
            lines.append("USER: " + content[:900])
    return "\n".join(lines)


def batch_overview(episodes: list[dict], threshold: float) -> str:
    """The heuristic per-batch overview the reference orchestrator wrote to debug/overview.md."""
    statuses = collections.Counter(str(ep.get("status")) for ep in episodes)
    tools = collections.Counter(n for ep in episodes for n, _ in _tool_calls(ep.get("trajectory") or []))
    lines = [f"- tasks: {len(episodes)}; passed: {sum((ep.get('reward') or 0) >= threshold for ep in episodes)}",
             "- statuses: " + ", ".join(f"{k}={v}" for k, v in sorted(statuses.items())),
             "- tool calls: " + (", ".join(f"{k}={v}" for k, v in sorted(tools.items())) or "none")]
    for ep in episodes:
        c = ep.get("counts") or {}
        lines.append(f"- index {ep['task_id']}: reward={float(ep.get('reward') or 0):.3f} status={ep.get('status')} "
                     f"turns={c.get('turns', 0)} invalid_calls={c.get('invalid_tool_calls', 0)} "
                     f"text_only_turns={c.get('no_tool_call_turns', 0)}")
    return "\n".join(lines)


def dbbench_evidence(batch_name: str, episodes: list[dict], task_ids: list[int], *, threshold: float = 1.0,
                     max_failures_per_batch: int = 4, max_messages_per_trace: int = 22,
                     max_tool_result_chars: int = 1200, max_evidence_chars: int = 26000) -> tuple[str, int]:
    """The §1.3 DBBench evidence markdown and the number of failures included."""
    scored = [ep for ep in episodes if ep.get("reward") is not None and ep.get("status") != INFRA_ERROR]
    passed = sum(float(ep["reward"]) >= threshold for ep in scored)
    failures = sorted((ep for ep in scored if float(ep["reward"]) < threshold),
                      key=lambda ep: (float(ep["reward"]), ep["task_id"]))[:max_failures_per_batch]
    span = f"[{min(task_ids)}, {max(task_ids) + 1})" if task_ids else "[]"
    parts = [f"# DBBench batch evidence: {batch_name}", f"- tasks: {len(task_ids)}", f"- source slice: {span}",
             f"- baseline pass: {passed}/{len(task_ids)}", f"- failures included: {len(failures)}", "",
             "## Existing Batch Overview", batch_overview(scored, threshold)[:3000] or "(no overview)", "",
             "## Failure Traces"]
    parts += [render_db_trace(ep, max_messages=max_messages_per_trace, max_tool_result_chars=max_tool_result_chars)
              + "\n" for ep in failures]
    text = "\n".join(parts)
    if len(text) > max_evidence_chars:
        text = text[:max_evidence_chars] + "\n...[evidence truncated]"
    return text, len(failures)
