"""`hr1 probe-target --base_url=URL --model=M`: does the endpoint return STRUCTURED tool calls?

A target server without the right tool parser returns tool calls as text; the reference then scored
such episodes 0 without noticing (spec §4.4). The probe sends one tool-calling request and reports:
  exit 0  structured `tool_calls` returned;
  exit 1  tool calls only as text in content (our client repairs them, but fix the server's
          tool parser: e.g. vLLM `--enable-auto-tool-choice --tool-call-parser ...`);
  exit 2  no tool call at all, or the endpoint failed.
`--demo {structured,xml,json,think_xml}` probes a loopback server started here (no endpoint needed).
"""
from __future__ import annotations

import argparse
import json
import sys

from hr1_jax.agents.base import AgentError
from hr1_jax.agents.openai_client import OpenAIChatClient, reasoning_text
from hr1_jax.agents.tool_repair import repair_message
from hr1_jax.utils.argv import snake_case_flags
from hr1_jax.utils.jsonsafe import safe_str

PROBE_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
PROBE_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant. Always answer by calling a tool."},
    {"role": "user", "content": "What is the weather in Paris? Use the get_weather tool."}]


class _DemoAgent:
    name = "probe-demo"

    def chat(self, messages, tools):
        return {"role": "assistant", "content": "",
                "tool_calls": [{"id": "call_0", "type": "function",
                                "function": {"name": tools[0]["function"]["name"],
                                             "arguments": json.dumps({"city": "Paris"})}}]}


def probe(base_url: str, model: str, *, api_key: str = "", timeout_s: float = 60.0,
          enable_thinking: bool | None = False, vllm_fields: bool | None = None) -> dict:
    client = OpenAIChatClient(base_url, model, api_key=api_key, timeout_s=timeout_s, max_retries=1,
                              retry_budget_s=2 * timeout_s + 1.0, backoff_s=0.5, enable_thinking=enable_thinking,
                              vllm_fields=vllm_fields)
    report = {"base_url": base_url, "model": model}
    try:  # complete() checks the reply's shape: a malformed one is a TargetProtocolError
        raw = client.complete(client.request_body(PROBE_MESSAGES, [PROBE_TOOL]))["choices"][0]["message"]
    except AgentError as e:
        return {**report, "ok": False, "verdict": "endpoint_error", "error": str(e)[:500], "exit_code": 2}
    structured = [c["function"].get("name") for c in raw.get("tool_calls") or []]
    _, repaired = repair_message({"content": raw.get("content") or "",
                                  "reasoning_content": reasoning_text(raw)}, {"get_weather"})
    report.update(vllm_fields=client.vllm_fields, structured_tool_calls=structured, repairable_text_tool_calls=repaired,
                  content_head=safe_str(raw.get("content") or "")[:200])
    if "get_weather" in structured:
        return {**report, "ok": True, "verdict": "structured_tool_calls", "exit_code": 0}
    if repaired:
        return {**report, "ok": False, "verdict": "tool_calls_as_text", "exit_code": 1,
                "advice": "the server returned tool calls in content; enable its tool-call parser "
                          "(hr1's client repairs and counts them meanwhile)"}
    return {**report, "ok": False, "verdict": "no_tool_call", "exit_code": 2}


EPILOG = """reads no config file. Flags are snake_case (kebab spellings such as --base-url also work).

example:
  hr1 probe-target --base_url=http://127.0.0.1:8000/v1 --model=Qwen3.5-9B
  hr1 probe-target --demo=xml      # a loopback server that returns tool calls as text"""


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="hr1 probe-target", description=__doc__, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base_url", default="", help="the endpoint, e.g. http://host:port/v1")
    ap.add_argument("--model", default="", help="model name the endpoint serves")
    ap.add_argument("--api_key_env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    ap.add_argument("--enable_thinking", action="store_true", help="ask the server for thinking output")
    ap.add_argument("--vllm_fields", choices=["auto", "true", "false"], default="auto",
                    help="send vLLM/SGLang-only fields (chat_template_kwargs); auto: when GET /models says "
                         "the server is vLLM, SGLang or hr1 serve")
    ap.add_argument("--demo", choices=["structured", "xml", "json", "think_xml"], default=None,
                    help="probe a loopback server started here that answers in this format")
    args = ap.parse_args(snake_case_flags(argv))
    import os
    if args.demo:
        from hr1_jax.agents.openai_server import LoopbackOpenAIServer
        with LoopbackOpenAIServer(lambda messages: _DemoAgent(), mode=args.demo) as srv:
            report = probe(srv.base_url, "probe-demo", timeout_s=args.timeout)
    else:
        if not args.base_url or not args.model:
            ap.error("--base_url and --model are required (or use --demo MODE)")
        report = probe(args.base_url, args.model, api_key=os.environ.get(args.api_key_env, ""),
                       timeout_s=args.timeout, enable_thinking=args.enable_thinking,
                       vllm_fields={"auto": None, "true": True, "false": False}[args.vllm_fields])
    print(json.dumps(report, indent=1))
    print(f"probe-target: {report['verdict']}", file=sys.stderr)
    return int(report["exit_code"])
