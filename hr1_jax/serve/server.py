"""`ChatServer`: a checkpoint behind an OpenAI-compatible HTTP endpoint.

`load_sampler(checkpoint)` loads a stage's `final_params` (or its workdir) or an HF folder the
way every training stage does (`train.engine.Engineer`: the checkpoint's own tokenizer, its saved
layout) and returns the project's `Sampler`. `ChatServer` fronts it with a stdlib
`ThreadingHTTPServer` (one thread per connection) and one `Batcher` (one decode thread):
  GET  /v1/models            the served model
  POST /v1/chat/completions  tools, tool_choice, tool_calls in the reply, usage
  GET  /health               {"ok": true, "stats": ..., "guided_tools": ...}
"""
from __future__ import annotations

import http.server
import json
import os
import threading

from hr1_jax.errors import InputError
from hr1_jax.serve.batcher import Batcher
from hr1_jax.serve.guided import Guide, json_call_format
from hr1_jax.serve.openai_api import APIError, ServeOptions, completion, parse_request
from hr1_jax.utils.logging import log_event

MAX_BODY_BYTES = 32 << 20


def default_model_id(checkpoint: str) -> str:
    path = os.path.abspath(checkpoint).rstrip("/")
    name = os.path.basename(path)
    return os.path.basename(os.path.dirname(path)) if name == "final_params" else name


def load_sampler(checkpoint: str, *, param_dtype: str = "float32"):
    """(Sampler, tokenizer) of a checkpoint: a stage's final_params / workdir, or an HF folder."""
    from hr1_jax.config import base_config
    from hr1_jax.train.engine import PARAMS_DIR, Engineer

    if not os.path.isdir(checkpoint):
        raise InputError(f"checkpoint not found: {checkpoint}")
    marks = ("config.json", "model_config.json", PARAMS_DIR)
    if not any(os.path.exists(os.path.join(checkpoint, m)) for m in marks):
        raise InputError(f"{checkpoint} is neither an HF folder (config.json) nor a stage's {PARAMS_DIR} "
                         "(params/ and model_config.json) or workdir")
    config = base_config()
    config.train.init_checkpoint = os.path.abspath(checkpoint)
    config.model.param_dtype = config.model.dtype = param_dtype
    config.train.checkpoint.export_hf = False
    eng = Engineer(config, stage="serve")
    eng.sync_sampler(eng.init_params)
    return eng.sampler, eng.tokenizer


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "hr1-serve/1"
    protocol_version = "HTTP/1.1"   # keep-alive: a pooled client reuses its connection

    def log_message(self, *args):
        pass

    def _send(self, code: int, payload: dict) -> None:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        owner: ChatServer = self.server.owner
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": owner.opts.model_id, "object": "model",
                                                         "owned_by": "hr1", "max_model_len": owner.opts.max_model_len}]})
        elif path.endswith("/health"):
            guide = owner.batcher.guide
            self._send(200, {"ok": True, "stats": dict(owner.batcher.stats),
                             "guided_tools": dict(guide.stats) if guide else None})
        else:
            self._send(404, APIError(404, f"no route {self.path}", kind="not_found_error").body())

    def _body(self) -> dict:
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            raise APIError(411, "Content-Length required")
        if int(length) > MAX_BODY_BYTES:
            raise APIError(413, f"request body over {MAX_BODY_BYTES} bytes")
        try:
            return json.loads(self.rfile.read(int(length)).decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise APIError(400, f"the request body is not JSON: {e}") from None

    def do_POST(self):
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError):   # the client gave up (its timeout): nobody to answer
            self.close_connection = True
            log_event("serve", "client_gone", path=self.path)

    def _post(self):
        owner: ChatServer = self.server.owner
        try:
            if not self.path.split("?", 1)[0].rstrip("/").endswith("/chat/completions"):
                raise APIError(404, f"no route {self.path}", kind="not_found_error")
            body = self._body()
            req = parse_request(owner.tokenizer, body, owner.opts)
            result = owner.batcher.submit(req).result(timeout=owner.request_timeout_s)
            self._send(200, completion(body, req, result, owner.opts))
        except APIError as e:
            self._send(e.status, e.body())
        except TimeoutError:
            self._send(503, APIError(503, "decode did not finish in time", kind="server_error").body())
        except (BrokenPipeError, ConnectionResetError):
            raise
        except Exception as e:  # a decode failure: the server keeps serving
            log_event("serve", "request_failed", error=f"{type(e).__name__}: {e}"[:300])
            self._send(500, APIError(500, f"{type(e).__name__}: {e}", kind="server_error").body())


class ChatServer:
    """`with ChatServer(sampler, tokenizer, ServeOptions(model_id=...), port=0) as srv: srv.base_url`."""

    def __init__(self, sampler, tokenizer, opts: ServeOptions, *, host: str = "127.0.0.1", port: int = 0,
                 max_batch: int = 8, window_s: float = 0.01, seed: int = 0, request_timeout_s: float = 3600.0,
                 min_prompt_bucket: int = 256, guided_tools: bool = True):
        self.tokenizer, self.opts, self.request_timeout_s = tokenizer, opts, request_timeout_s
        guide = None
        if guided_tools and json_call_format(tokenizer):
            guide = Guide(sampler, min_prompt_bucket=min_prompt_bucket)
        elif guided_tools:   # e.g. Qwen3.5's XML calls: parsed and filtered to declared names, not guided
            log_event("serve", "guided_tools_off", reason="the chat template's tool-call format is not Hermes JSON")
        self.batcher = Batcher(sampler, max_batch=max_batch, window_s=window_s, seed=seed,
                               min_prompt_bucket=min_prompt_bucket, guide=guide)
        self.httpd = http.server.ThreadingHTTPServer((host, port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="hr1-serve-http", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "ChatServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.batcher.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
