"""The OpenAI-compatible teacher over real HTTP on loopback: the prefill request on a vLLM-like
server and a plain one on a strict (hosted-style) server, reasoning under either field name joined
as the prefill continuation, the reference's clean-up of that text into the SFT target, retries,
no retry on a final 4xx, a dead endpoint giving no candidate, and `concurrency` requests in flight."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hr1_jax.agents.openai_server import LoopbackOpenAIServer
from hr1_jax.patch.parse import extract_response_json
from hr1_jax.train.teacher import EndpointTeacher
from hr1_jax.train.teacher.reasoning import MAX_WORDS, clean_reasoning, clean_text, sft_target

PATCH_JSON = {"benchmark": "dbbench", "description": "Check the schema first.", "actions": []}
PATCH = f'<patch>\n{json.dumps(PATCH_JSON)}\n</patch>'
ROW = {"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}


@pytest.fixture
def server():
    seen, fail_first = [], {"n": 1}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, self.headers.get("Authorization"), body))
            if fail_first["n"] > 0:      # one transient failure: the client must retry
                fail_first["n"] -= 1
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            msg = {"role": "assistant", "reasoning_content": "- one\n- two", "content": PATCH}
            data = json.dumps({"choices": [{"message": msg}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1", seen
    httpd.shutdown()


class Replying:
    """A loopback 'agent' answering every request with one assistant message."""

    def __init__(self, **message):
        self.message = message

    def chat(self, messages, tools):
        return dict(self.message)


def test_endpoint_teacher_prefill_retry_and_clean_target(server, monkeypatch):
    url, seen = server
    monkeypatch.setenv("TEACHER_KEY", "sk-test")
    t = EndpointTeacher(url, "frontier", api_key_env="TEACHER_KEY", retries=2, timeout_s=10, vllm_fields=True)
    monkeypatch.setattr("time.sleep", lambda s: None)
    assert t.complete(ROW["prompt"]) == "- one\n- two\n</think>\n" + PATCH   # eval reads the raw text
    (label, text), = t.responses(ROW)
    assert label == "endpoint" and text.startswith("- one - two.\n</think>\n\n<patch>\n")
    assert extract_response_json(text, "prefill_think_patch") == PATCH_JSON   # well-formed under the protocol
    assert len(seen) == 3
    path, auth, body = seen[-1]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-test"
    assert body["messages"][-1] == {"role": "assistant", "content": "<think>\n"}
    assert body["continue_final_message"] and body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["add_generation_prompt"] is False
    assert body["temperature"] == 0.0 and body["max_completion_tokens"] == 12288 and "max_tokens" not in body


def test_dead_endpoint_gives_no_candidate(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    t = EndpointTeacher("http://127.0.0.1:9/v1", "m", retries=1, timeout_s=2)
    assert t.responses({"prompt": [{"role": "user", "content": "u"}]}) == []


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_vllm_server_in_auto_mode_gets_the_prefill(key):
    agent = Replying(content=PATCH, reasoning_content="The agent never reads the schema.")
    with LoopbackOpenAIServer(lambda m: agent, reasoning_key=key) as srv:
        t = EndpointTeacher(srv.base_url, "frontier", retries=0, timeout_s=10)
        text = t.complete(ROW["prompt"])
    sent = srv.requests[-1]
    assert sent["continue_final_message"] and sent["messages"][-1]["content"] == "<think>\n"
    assert text == "The agent never reads the schema.\n</think>\n" + PATCH


def test_strict_server_gets_a_plain_request_and_a_forced_extra_field_is_not_retried():
    agent = Replying(content="<think>\nNo schema read.\n</think>\n" + PATCH)
    with LoopbackOpenAIServer(lambda m: agent, strict=True) as srv:
        hosted = EndpointTeacher(srv.base_url, "gpt-x", retries=2, timeout_s=10, omit_fields="temperature,top_p")
        (_, text), = hosted.responses(ROW)
        sent = srv.requests[-1]
        assert sent["messages"] == ROW["prompt"] and set(sent) == {"model", "messages", "max_completion_tokens"}
        assert text.startswith("No schema read.\n</think>")
        forced = EndpointTeacher(srv.base_url, "gpt-x", retries=2, timeout_s=10, vllm_fields=True)
        n = len(srv.requests)
        assert forced.responses(ROW) == [] and len(srv.requests) == n + 1   # HTTP 400: one attempt


def test_concurrency_requests_in_flight_and_order_kept():
    class Echo:
        def chat(self, messages, tools):
            return {"content": f"row {messages[1]['content']}\n</think>\n{PATCH}"}

    rows = [{"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": str(i)}]} for i in range(8)]
    with LoopbackOpenAIServer(lambda m: Echo()) as srv:
        # Each request is held until 4 are in flight: fewer in flight would fail the barrier.
        srv.hold = threading.Barrier(4, timeout=60)
        t = EndpointTeacher(srv.base_url, "frontier", retries=0, timeout_s=120, concurrency=4)
        out = t.responses_many(rows)
    assert srv.max_in_flight == 4 and not srv.hold.broken
    assert [o[0][1].split(".")[0] for o in out] == [f"row {i}" for i in range(8)]


def test_reasoning_clean_up_rules():
    raw = ("<think>The agent `SELECT`s before it reads the schema {\"x\": {\"y\": 1}} twice.\n"
           "```sql\nSELECT * FROM t;\n```\n  Fix:   read first</think>\n" + PATCH)
    assert clean_reasoning(raw, PATCH_JSON) == "The agent SELECTs before it reads the schema twice. Fix: read first."
    assert clean_reasoning("no close tag, but " + PATCH, PATCH_JSON) == "no close tag, but."
    assert clean_reasoning(PATCH, PATCH_JSON) == "Check the schema first."  # nothing before the patch
    long = " ".join(f"w{i}" for i in range(400)) + "</think>" + PATCH
    capped = clean_reasoning(long, PATCH_JSON)
    assert len(capped.split()) == MAX_WORDS and capped.endswith("w159.")
    assert clean_text("a ```unclosed fence\nrest") == "a"


def test_sft_target_reserialises_the_patch_and_keeps_text_without_one():
    raw = "reasoning\n</think>\n<patch>\n{\"benchmark\":  \"dbbench\", \"actions\":[]}\n</patch> trailing"
    target = sft_target(raw, "prefill_think_patch")
    assert target == 'reasoning.\n</think>\n\n<patch>\n{"benchmark": "dbbench", "actions": []}\n</patch>'
    assert sft_target(raw, "full_think_patch").startswith("<think>\nreasoning.\n</think>")
    assert sft_target("no patch here", "prefill_think_patch") == "no patch here"
