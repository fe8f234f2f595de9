"""Readiness (``/health``) and the model's name (``/v1/models``), asked of llama-server through
the forwarded port with one plain HTTP/1.0 GET on a socket.

Why not http.client, as openai_http.py's chat does: these are asked while the server starts, from
the supervisor, every 10 ms. On 2 cores, importing http.client (with email and ssl) and its
per-request parsing were CPU taken from the server's own start; a GET and a status line need
neither.
"""

from __future__ import annotations

import json
import socket


class BadAnswer(OSError):
    """Not an HTTP answer."""


def get(port: int, path: str, *, timeout: float) -> tuple[int, bytes]:
    """(status, body) of ``GET path`` on 127.0.0.1:``port``. OSError when nothing answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while data := s.recv(1 << 16):
            chunks.append(data)
    head, sep, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    words = lines[0].split()
    if not sep or len(words) < 2 or not words[0].startswith(b"HTTP/") or not words[1].isdigit():
        raise BadAnswer(f"not an HTTP answer from port {port}")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = _unchunk(body)
    return int(words[1]), body


def _unchunk(body: bytes) -> bytes:
    out, rest = [], body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2:]
    return b"".join(out)


def health(port: int, *, timeout: float = 2.0) -> str:
    """"ready" (200), "loading" (503: the model is loading) or "down" (no HTTP answer)."""
    try:
        status, _ = get(port, "/health", timeout=timeout)
    except (OSError, ValueError):
        return "down"
    return "ready" if status == 200 else "loading" if status == 503 else "down"


def model_name(port: int, *, timeout: float = 10.0) -> str | None:
    """The first model ``/v1/models`` lists (llama-server: the --alias or the model's path)."""
    try:
        status, raw = get(port, "/v1/models", timeout=timeout)
        data = json.loads(raw)
        return str(data["data"][0]["id"]) if status == 200 else None
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
