"""Requests that arrive together are decoded together: one queue, one decode thread, the project's
`Sampler` on a batch of prompts.

The decode thread takes the oldest request, then waits up to `window_s` for more (up to `max_batch`)
with the same sampling settings; the rest stay queued, in order, for the next batch. Shapes are
rounded so few programs compile (each new shape compiles once, seconds to a minute on a loaded CPU):
the batch to a power of two (filled with copies of the first prompt, whose output is dropped), the
prompt width to a power of two of at least `min_prompt_bucket`, the decode length to a power of two. Each
request then gets its own result cut at its own `max_tokens`, and a request that offers tools goes
through `guide` (`serve.guided.Guide`: its tool call made well formed); a guide failure fails that
request only.
"""
from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import threading
import time

import jax

from hr1_jax.utils.logging import log_event


@dataclasses.dataclass
class GenRequest:
    prompt_ids: list[int]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    tools: object = None     # serve.guided.ToolPolicy: the declared tools and tool_choice (None: text only)
    future: concurrent.futures.Future = dataclasses.field(default_factory=concurrent.futures.Future)

    @property
    def group(self) -> tuple:
        return (self.temperature, self.top_p, self.stop)


@dataclasses.dataclass(frozen=True)
class GenResult:
    text: str
    tokens: list[int]
    finish_reason: str      # "stop" | "length"


def pow2_at_least(n: int, floor: int) -> int:
    size = floor
    while size < n:
        size *= 2
    return size


class Batcher:
    def __init__(self, sampler, *, max_batch: int = 8, window_s: float = 0.01, seed: int = 0,
                 min_prompt_bucket: int = 256, guide=None):
        if max_batch < 1 or window_s < 0 or min_prompt_bucket < 1:
            raise ValueError("max_batch and min_prompt_bucket must be >= 1, window_s >= 0")
        self.sampler, self.max_batch, self.window_s = sampler, max_batch, window_s
        self.min_prompt_bucket, self.guide = min_prompt_bucket, guide
        self._key = jax.random.key(seed)
        self._queue: collections.deque[GenRequest] = collections.deque()
        self._cv = threading.Condition()
        self._closed = False
        self.stats = {"requests": 0, "batches": 0, "batched_requests": 0, "max_batch_seen": 0,
                      "prompt_tokens": 0, "completion_tokens": 0, "decode_s": 0.0, "errors": 0}
        self._thread = threading.Thread(target=self._run, name="hr1-serve-decode", daemon=True)
        self._thread.start()

    def submit(self, req: GenRequest) -> concurrent.futures.Future:
        with self._cv:
            if self._closed:
                raise RuntimeError("server is shutting down")
            self._queue.append(req)
            self.stats["requests"] += 1
            self._cv.notify()
        return req.future

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._thread.join(timeout=60)

    def _take(self) -> list[GenRequest] | None:
        """The next batch: the oldest request plus those of its group arriving within the window."""
        with self._cv:
            while not self._queue and not self._closed:
                self._cv.wait()
            if self._closed:
                return None
            deadline = time.monotonic() + self.window_s
            while len(self._queue) < self.max_batch and (left := deadline - time.monotonic()) > 0:
                self._cv.wait(left)
            first = self._queue[0]
            batch = [r for r in self._queue if r.group == first.group][:self.max_batch]
            for r in batch:
                self._queue.remove(r)
            return batch

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            try:
                results = self._decode(batch)
            except Exception as e:  # a decode failure fails these requests, never the server
                self.stats["errors"] += len(batch)
                log_event("serve", "decode_failed", error=f"{type(e).__name__}: {e}"[:300], batch=len(batch))
                for r in batch:
                    r.future.set_exception(e)
                continue
            for r, res in zip(batch, results):
                if isinstance(res, Exception):
                    r.future.set_exception(res)
                else:
                    r.future.set_result(res)
        with self._cv:   # closed: requests still queued fail instead of waiting forever
            for r in self._queue:
                r.future.set_exception(RuntimeError("server shut down before decoding this request"))
            self._queue.clear()

    def _decode(self, batch: list[GenRequest]) -> list[GenResult | Exception]:
        first = batch[0]
        width = pow2_at_least(len(batch), 1)
        prompts = [r.prompt_ids for r in batch] + [first.prompt_ids] * (width - len(batch))
        self.sampler.prompt_bucket = pow2_at_least(max(len(p) for p in prompts), self.min_prompt_bucket)
        new_tokens = pow2_at_least(max(r.max_tokens for r in batch), 16)
        self._key, key = jax.random.split(self._key)
        t0 = time.monotonic()
        out = self.sampler.generate(prompts, key=key, max_new_tokens=new_tokens, temperature=first.temperature,
                                    top_p=first.top_p, stop=first.stop)
        dt = time.monotonic() - t0
        results = [self._guided(r, self._cut(r, res)) for r, res in zip(batch, out)]
        st = self.stats
        st["batches"] += 1
        st["batched_requests"] += len(batch)
        st["max_batch_seen"] = max(st["max_batch_seen"], len(batch))
        st["prompt_tokens"] += sum(len(r.prompt_ids) for r in batch)
        st["completion_tokens"] += sum(len(x.tokens) for x in results if isinstance(x, GenResult))
        st["decode_s"] += dt
        return results

    def _guided(self, req: GenRequest, res: GenResult) -> GenResult | Exception:
        """The result with its tool call made well formed (usage then counts the reply's own tokens)."""
        if self.guide is None or req.tools is None:
            return res
        self._key, key = jax.random.split(self._key)
        try:
            text = self.guide(req, res.text, key)
        except Exception as e:   # this request fails, its batch-mates are answered
            log_event("serve", "guide_failed", error=f"{type(e).__name__}: {e}"[:300])
            self.stats["errors"] += 1
            return e
        if text is None:
            return res
        return GenResult(text, self.sampler.tokenizer.encode(text), "stop")

    def _cut(self, req: GenRequest, res) -> GenResult:
        """A result within the request's own max_tokens (the batch may have decoded further)."""
        if len(res.tokens) <= req.max_tokens:
            return GenResult(res.text, list(res.tokens), res.finish_reason)
        tokens = list(res.tokens[:req.max_tokens])
        return GenResult(self.sampler.tokenizer.decode(tokens), tokens, "length")
