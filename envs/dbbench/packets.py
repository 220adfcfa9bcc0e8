"""DBBench's evidence packet (reference spec §1.3): a batch overview and the lowest-reward
failures' SQL traces, instead of the generic trace packet. Episodes are the batch's scored
results (records with task_id, reward, status, trajectory and counts)."""
from __future__ import annotations

import collections
import re


def _collapse(text: str, n: int) -> str:
    text = re.sub(r"\s+", " ", str(text)).strip()
    return text if len(text) <= n else text[:n] + "..."


def render_trace(ep, *, max_messages: int = 22, max_tool_result_chars: int = 1200) -> str:
    lines = [f"Trace index={ep.task_id} status={ep.status} reward={float(ep.reward):.3f}"]
    shown = 0
    for m in ep.trajectory or []:
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


def _tool_names(messages: list[dict]):
    for m in messages:
        if m.get("role") == "assistant":
            yield from (str((call.get("function") or {}).get("name", "")) for call in m.get("tool_calls") or [])


def batch_overview(episodes, threshold: float) -> str:
    """The heuristic per-batch overview the reference orchestrator wrote to debug/overview.md."""
    statuses = collections.Counter(str(ep.status) for ep in episodes)
    tools = collections.Counter(n for ep in episodes for n in _tool_names(ep.trajectory or []))
    lines = [f"- tasks: {len(episodes)}; passed: {sum((ep.reward or 0) >= threshold for ep in episodes)}",
             "- statuses: " + ", ".join(f"{k}={v}" for k, v in sorted(statuses.items())),
             "- tool calls: " + (", ".join(f"{k}={v}" for k, v in sorted(tools.items())) or "none")]
    for ep in episodes:
        c = ep.counts or {}
        lines.append(f"- index {ep.task_id}: reward={float(ep.reward or 0):.3f} status={ep.status} "
                     f"turns={c.get('turns', 0)} invalid_calls={c.get('invalid_tool_calls', 0)} "
                     f"text_only_turns={c.get('no_tool_call_turns', 0)}")
    return "\n".join(lines)


def evidence(batch_name: str, scored, task_ids: list[int], *, threshold: float = 1.0, max_failures=None,
             max_failures_per_batch: int = 4, max_messages_per_trace: int = 22, max_tool_result_chars: int = 1200,
             max_evidence_chars: int = 26000) -> tuple[str, int]:
    """The evidence markdown and the number of failures included (at most `max_failures`, else
    `max_failures_per_batch`)."""
    cap = max_failures_per_batch if max_failures is None else max_failures
    passed = sum(float(ep.reward) >= threshold for ep in scored)
    failures = sorted((ep for ep in scored if float(ep.reward) < threshold),
                      key=lambda ep: (float(ep.reward), ep.task_id))[:cap]
    span = f"[{min(task_ids)}, {max(task_ids) + 1})" if task_ids else "[]"
    parts = [f"# DBBench batch evidence: {batch_name}", f"- tasks: {len(task_ids)}", f"- source slice: {span}",
             f"- baseline pass: {passed}/{len(task_ids)}", f"- failures included: {len(failures)}", "",
             "## Existing Batch Overview", batch_overview(scored, threshold)[:3000] or "(no overview)", "",
             "## Failure Traces"]
    parts += [render_trace(ep, max_messages=max_messages_per_trace, max_tool_result_chars=max_tool_result_chars)
              + "\n" for ep in failures]
    text = "\n".join(parts)
    if len(text) > max_evidence_chars:
        text = text[:max_evidence_chars] + "\n...[evidence truncated]"
    return text, len(failures)
