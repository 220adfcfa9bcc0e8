"""`hr1 serve --checkpoint=DIR --port=P`: a target or engineer checkpoint as an OpenAI-compatible
endpoint (`/v1/models`, `/v1/chat/completions` with tools and structured tool_calls, usage), decoded
by the project's JAX sampler; requests arriving together are decoded as one batch.

Use it as the target of `hr1 rollout/baseline/reward/grpo/eval`
(`--config.target.kind=openai --config.target.base_url=http://127.0.0.1:P/v1 --config.target.model=ID`)
or as an endpoint engineer of `hr1 eval`. Runs until interrupted (Ctrl-C / SIGTERM).
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from hr1_jax.utils.argv import snake_case_flags

EPILOG = """reads no config file. Flags are snake_case (kebab spellings such as --max-batch also work).

example:
  hr1 serve --checkpoint=runs/target/final_params --port=8000
  hr1 probe-target --base_url=http://127.0.0.1:8000/v1 --model=target"""


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="hr1 serve", description=__doc__, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, help="a stage's final_params (or its workdir) or an HF folder")
    ap.add_argument("--port", type=int, default=8000, help="TCP port (0 = any free port, printed at start)")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on")
    ap.add_argument("--model_name", default="", help="the model id clients send (default: the checkpoint's "
                                                     "folder name, its stage workdir for final_params)")
    ap.add_argument("--max_batch", type=int, default=8, help="requests decoded together at most")
    ap.add_argument("--batch_window_ms", type=float, default=10.0,
                    help="how long the first request of a batch waits for others")
    ap.add_argument("--min_prompt_bucket", type=int, default=256,
                    help="prompts are padded to a power of two of at least this many tokens (fewer compiled shapes)")
    ap.add_argument("--max_model_len", type=int, default=32768, help="prompt + completion tokens at most")
    ap.add_argument("--default_max_tokens", type=int, default=1024, help="completion tokens when a request sets none")
    ap.add_argument("--enable_thinking", action="store_true",
                    help="render prompts with thinking on unless a request's chat_template_kwargs says otherwise "
                         "(default off: a target)")
    ap.add_argument("--guided_tools", choices=["on", "off"], default="on",
                    help="make tool calls name a declared tool with JSON arguments fitting its schema and enforce "
                         "tool_choice (serve/guided.py); off: the model's text as it is, calls parsed when well formed")
    ap.add_argument("--param_dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--seed", type=int, default=0, help="sampling seed (temperature > 0)")
    args = ap.parse_args(snake_case_flags(argv))
    if args.max_batch < 1 or args.max_model_len < 2 or args.default_max_tokens < 1 or args.batch_window_ms < 0 \
            or args.min_prompt_bucket < 1:
        ap.error("--max_batch, --max_model_len, --default_max_tokens and --min_prompt_bucket must be positive, "
                 "--batch_window_ms >= 0")
    return args


def main(argv: list[str]) -> int:
    from hr1_jax.serve.openai_api import ServeOptions
    from hr1_jax.serve.server import ChatServer, default_model_id, load_sampler
    from hr1_jax.utils.logging import log_event

    args = parse_args(argv)
    sampler, tokenizer = load_sampler(args.checkpoint, param_dtype=args.param_dtype)
    opts = ServeOptions(model_id=args.model_name or default_model_id(args.checkpoint),
                        max_model_len=args.max_model_len, default_max_tokens=args.default_max_tokens,
                        enable_thinking=args.enable_thinking)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with ChatServer(sampler, tokenizer, opts, host=args.host, port=args.port, max_batch=args.max_batch,
                    window_s=args.batch_window_ms / 1000.0, seed=args.seed,
                    min_prompt_bucket=args.min_prompt_bucket, guided_tools=args.guided_tools == "on") as srv:
        log_event("serve", "ready", model=opts.model_id, base_url=srv.base_url, tokenizer=tokenizer.source)
        print(f"hr1 serve: {opts.model_id} at {srv.base_url}", file=sys.stderr, flush=True)
        try:
            done.wait()
        except KeyboardInterrupt:
            pass
        log_event("serve", "stop", **{k: v for k, v in srv.batcher.stats.items()})
    return 0
