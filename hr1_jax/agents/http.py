"""Pooled HTTP for the OpenAI-compatible clients: one keep-alive `httpx.Client` per endpoint, every
request over by its own deadline, bodies read up to a cap, and the back-off between attempts.

httpx's timeouts bound each socket operation, not a request: a server that drips a byte per second
keeps a request alive forever. So the connection pool gets a network backend whose streams clip
every connect, read and write to the deadline of the request running in the calling thread (a sync
httpx request runs in its caller's thread). Host-name resolution happens before there is a socket
to bound: a hanging DNS lookup is not bounded here.
"""
from __future__ import annotations

import contextlib
import email.utils
import random
import threading
import time
import urllib.parse
import urllib.request

import httpcore
import httpx

_READ_CHUNK = 1 << 16
_local = threading.local()


class BodyTooLarge(Exception):
    """The reply is longer than the configured cap (never kept)."""


@contextlib.contextmanager
def request_deadline(deadline: float):
    """Every socket operation of this thread's request ends by `deadline` (time.monotonic)."""
    _local.deadline = deadline
    try:
        yield
    finally:
        _local.deadline = None


def _clip(timeout: float | None, error: type[Exception]) -> float | None:
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("request deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream):
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clip(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clip(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname,
                                                     _clip(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self):
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        return _DeadlineStream(self._inner.connect_tcp(host, port, _clip(timeout, httpcore.ConnectTimeout),
                                                       local_address, socket_options))

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return _DeadlineStream(self._inner.connect_unix_socket(path, _clip(timeout, httpcore.ConnectTimeout),
                                                               socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (httpx ignores the environment once it is given a
    transport, so this reads it the way urllib does)."""
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    return None if not proxy or urllib.request.proxy_bypass(parts.hostname or "") else proxy


def pooled_client(base_url: str, max_connections: int) -> httpx.Client:
    """A keep-alive client for one endpoint whose requests honour `request_deadline`."""
    transport = httpx.HTTPTransport(proxy=_env_proxy(base_url),
                                    limits=httpx.Limits(max_connections=max_connections,
                                                        max_keepalive_connections=max_connections))
    pool = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore.ConnectionPool):  # the pinned httpx keeps its httpcore pool here
        raise RuntimeError(f"httpx {httpx.__version__}: transport has no httpcore pool to bound")
    pool._network_backend = _DeadlineBackend()  # httpcore's network_backend hook; httpx does not forward it
    return httpx.Client(transport=transport)  # a redirect is an HTTP 3xx error, never followed


def read_capped(resp: httpx.Response, limit: int) -> bytes:
    """The (decoded) body, reading no more than `limit` + one chunk; BodyTooLarge when longer."""
    declared = resp.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"reply of {declared} bytes exceeds max_response_bytes={limit}")
    chunks, size = [], 0
    for chunk in resp.iter_bytes(_READ_CHUNK):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"reply exceeds max_response_bytes={limit}")
    return b"".join(chunks)


def retry_after_s(value: str | None) -> float | None:
    """Seconds a `Retry-After` header asks for (delta-seconds or an HTTP date); None if absent/invalid."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_s(attempt: int, base: float, cap: float, retry_after: float | None, rng: random.Random) -> float:
    """Exponential back-off with jitter (clients that failed together do not retry together),
    never shorter than what the server asked for."""
    pause = min(cap, base * (2 ** attempt)) * rng.uniform(0.5, 1.0)
    return pause if retry_after is None else max(pause, retry_after)
