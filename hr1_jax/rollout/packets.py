"""The engineer's evidence: the failure packet of a batch of no-harness baseline episodes
(`EpisodeResult` records). The generic trace packet (spec §1.2) is shaped by the benchmark's
descriptor (`envs.plugin.Packets`: title, what else not to encode, its runtime signals); a
benchmark may build its own packet instead (`Packets.evidence`, e.g. DBBench's §1.3 evidence).

Runtime signals come only from structured tool calls, never from regex-scraped observation text.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import re

from envs.registry import benchmark, import_object

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


def failure_cases(batches: list[tuple[int, list]], threshold: float) -> list[TraceCase]:
    """Episodes with reward < threshold, an integer index and messages (infra failures are not traces)."""
    cases = []
    for batch_id, episodes in batches:
        for ep in _scored(episodes):
            if float(ep.reward) < threshold and isinstance(ep.task_id, int) and ep.trajectory:
                cases.append(TraceCase(ep.task_id, batch_id, float(ep.reward), str(ep.status), ep.trajectory))
    return cases


def _scored(episodes: list) -> list:
    return [ep for ep in episodes if not ep.infra_failed and ep.reward is not None]


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


def generic_signals(actions: list[tuple[str, str]], observations: list[str]) -> list[str]:
    """Action-tool calls, "nothing happens" observations, repeated actions and observations."""
    sig = [f"take_action: {sum(n == 'take_action' for n, _ in actions)}",
           f"nothing_happens_observations: {sum('nothing happens' in o.lower() for o in observations)}"]
    rep_a = _repeats([v.lower() for _, v in actions])
    if rep_a:
        sig.append(f"repeated_action_values: {rep_a}")
    norm = [re.sub(r"\s+", " ", sanitise(o)).strip().lower()[:200] for o in observations]
    dup = {o: n for o, n in collections.Counter(norm).items() if n > 1}
    if dup:
        sig.append(f"repeated_observations: total {sum(dup.values())}, distinct {len(dup)}")
    return sig


def runtime_signals(bench: str, case: TraceCase) -> list[str]:
    msgs = case.messages
    actions = _tool_calls(msgs)
    text_only = sum(1 for m in msgs if m.get("role") == "assistant" and (m.get("content") or "").strip()
                    and not m.get("tool_calls"))
    sig = [f"total_actions: {len(actions)}", f"assistant_text_without_tool_turns: {text_only}"]
    own = benchmark(bench).packets.signals
    observations = [str(m.get("content") or "") for m in msgs if m.get("role") == "tool"]
    sig += (import_object(own) if own else generic_signals)(actions, observations)
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


def trace_packet(bench: str, batches: list[tuple[int, list]], *, source: str = "", threshold: float = 1.0,
                 max_traces: int = 20, strategy: str = "round_robin", max_obs_chars: int = 1200,
                 max_assistant_chars: int = 600, max_approx_tokens: int = 18000) -> tuple[str, int]:
    """The §1.2 markdown packet and the number of included traces (0 = nothing to learn from)."""
    cases = failure_cases(batches, threshold)
    chosen = select(cases, strategy, max_traces)
    rules = benchmark(bench).packets
    name = rules.title or bench

    def header(included: int) -> list[str]:
        return [f"# {name} no-harness failure traces",
                "These traces are deterministic extracts of no-harness failures of the target agent. They carry no "
                "debugger labels or diagnoses.", "", "## Scope", f"- benchmark: {bench}",
                f"- source run: {sanitise(source) or '(unspecified)'}", f"- candidate failures: {len(cases)}",
                f"- included traces: {included}", f"- selection strategy: {strategy}", "",
                "## Instructions for Harness Engineer",
                "- Infer recurring, general failure modes from these traces.",
                "- Do not encode product ids, exact product names, task indices or answers"
                + (f", nor {rules.also_forbid}." if rules.also_forbid else "."),
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


def failure_packet(bench: str, name: str, episodes: list, *, batch_id: int = 0, task_ids: list[int] | None = None,
                   threshold: float = 1.0, strategy: str = "round_robin", max_traces: int = 20,
                   max_failures: int | None = None, limits: dict | None = None) -> tuple[str, int]:
    """The failure packet of one batch of `bench` (its `name`, e.g. "batch_000") and the number of
    failures it includes (0 = nothing to learn from). `limits` override the descriptor's;
    `max_failures` caps the failures included (None = `max_traces`, or the benchmark's own cap)."""
    rules = benchmark(bench).packets
    limits = {**dict(rules.limits), **(limits or {})}
    if rules.evidence:
        ids = [ep.task_id for ep in episodes] if task_ids is None else task_ids
        return import_object(rules.evidence)(name, _scored(episodes), ids, threshold=threshold,
                                             max_failures=max_failures, **limits)
    return trace_packet(bench, [(batch_id, episodes)], source=f"{bench}/{name}", threshold=threshold,
                        max_traces=max_traces if max_failures is None else max_failures, strategy=strategy, **limits)
