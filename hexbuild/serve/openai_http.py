"""The streamed chat hexbuild asks of llama-server, with the standard library's HTTP client: no
client library at run time. (Readiness and the model's name, asked while a server starts, are
probe.py's: a plain socket.)

A streamed answer is read as server-sent events (``data: {...}`` lines, ``data: [DONE]`` last).
Time to first token is measured from sending the request to the first content delta; tokens/s
comes from llama-server's own ``timings`` in the last chunk when it sends them, else from the
usage count over the time between the first and the last token.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import RemoteFailed


@dataclass
class Answer:
    text: str
    ttft_s: float | None  # request sent → first content token
    total_s: float
    completion_tokens: int | None
    prompt_tokens: int | None
    tokens_per_s: float | None
    finish_reason: str | None

    def to_json(self) -> dict[str, Any]:
        r = lambda v: None if v is None else round(v, 4)  # noqa: E731
        return {"answer": self.text, "ttft_s": r(self.ttft_s), "total_s": r(self.total_s),
                "completion_tokens": self.completion_tokens, "prompt_tokens": self.prompt_tokens,
                "tokens_per_s": r(self.tokens_per_s), "finish_reason": self.finish_reason}

    def summary(self) -> str:
        parts = []
        if self.ttft_s is not None:
            parts.append(f"time to first token {self.ttft_s:.3f} s")
        if self.tokens_per_s is not None:
            parts.append(f"{self.tokens_per_s:.1f} tokens/s")
        if self.completion_tokens is not None:
            parts.append(f"{self.completion_tokens} tokens")
        return ", ".join(parts) or "no tokens"


def chat(port: int, messages: list[dict[str, str]], *, max_tokens: int | None = None,
         on_text: Callable[[str], None] | None = None, timeout: float = 600.0,
         extra: dict[str, Any] | None = None) -> Answer:
    """One streamed chat completion; ``on_text`` gets each piece of the answer as it arrives."""
    body: dict[str, Any] = {"messages": messages, "stream": True, "stream_options": {"include_usage": True}}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    body.update(extra or {})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.monotonic()
    first = last = None
    pieces: list[str] = []
    usage: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    finish = None
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RemoteFailed(f"the server answered HTTP {resp.status}: {resp.read(500).decode('utf-8', 'replace').strip()}")
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            event = json.loads(payload)
            usage = event.get("usage") or usage
            timings = event.get("timings") or timings
            for choice in event.get("choices") or []:
                finish = choice.get("finish_reason") or finish
                text = (choice.get("delta") or {}).get("content")
                if text:
                    now = time.monotonic()
                    first = first or now
                    last = now
                    pieces.append(text)
                    if on_text:
                        on_text(text)
        else:
            raise RemoteFailed("the answer ended before the server said it was done (did the server stop?)")
    except (OSError, http.client.HTTPException) as e:
        raise RemoteFailed(f"the connection to the server broke during the answer ({type(e).__name__}: {e})",
                           hint="hexbuild serve status shows whether the server still runs") from None
    except ValueError as e:
        raise RemoteFailed(f"the server sent an event that is not JSON: {e}") from None
    finally:
        conn.close()
    end = time.monotonic()
    n = usage.get("completion_tokens")
    tps = timings.get("predicted_per_second")
    if tps is None and n and first is not None and last is not None and last > first and n > 1:
        tps = (n - 1) / (last - first)  # the first token's time is the prompt's
    generated = timings.get("predicted_n", n)
    if isinstance(generated, int) and generated <= 1:
        tps = None  # one token has no generation time of its own: llama-server's rate for it is 1e6/s
    return Answer("".join(pieces), None if first is None else first - t0, end - t0, n,
                  usage.get("prompt_tokens"), tps, finish)
