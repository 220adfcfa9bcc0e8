"""The OpenAI-compatible teacher over real HTTP on loopback: prefill request shape, reasoning
content joined as the prefill continuation, retries, and a dead endpoint giving no candidate."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hr1_jax.train.teacher import EndpointTeacher

PATCH = '<patch>\n{"benchmark": "dbbench", "actions": []}\n</patch>'


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


def test_endpoint_teacher_prefill_and_retry(server, monkeypatch):
    url, seen = server
    monkeypatch.setenv("TEACHER_KEY", "sk-test")
    t = EndpointTeacher(url, "frontier", api_key_env="TEACHER_KEY", retries=2, timeout_s=10)
    monkeypatch.setattr("time.sleep", lambda s: None)
    row = {"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}
    out = t.responses(row)
    assert out == [("endpoint", "- one\n- two\n</think>\n" + PATCH)]
    assert len(seen) == 2
    path, auth, body = seen[-1]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-test"
    assert body["messages"][-1] == {"role": "assistant", "content": "<think>\n"}
    assert body["continue_final_message"] and body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["temperature"] == 0.0


def test_dead_endpoint_gives_no_candidate(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    t = EndpointTeacher("http://127.0.0.1:9/v1", "m", retries=1, timeout_s=2)
    assert t.responses({"prompt": [{"role": "user", "content": "u"}]}) == []
