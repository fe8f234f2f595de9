"""``hexbuild chat``: questions to the model through a server ``hexbuild serve`` runs on the
target, or through one started for the chat and stopped afterwards. Each answer streams to
stdout; time to first token and tokens/s follow it on stderr (or in the JSON result)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from .. import fidelity
from ..errors import HexbuildError
from ..ui import raw_to_stderr, ui
from . import control as serve_control, server as serve
from .openai_http import Answer, chat


@dataclass
class ChatOptions:
    prompt: str | None = None  # None: interactive, one question per line of stdin
    system: str | None = None
    max_tokens: int | None = None


def _write(text: str) -> None:
    if ui.json:
        return
    sys.stdout.write(text)
    sys.stdout.flush()


def run_chat(req: serve.ServeRequest, settings, opts: ChatOptions) -> list[Answer]:
    rec = serve_control.find_running(req.target, req.model)
    server = None
    if rec is not None:
        port = int(rec["local_port"])
        ui.info(f"using the server at {rec.get('url')} ({rec.get('model_name')})")
        fidelity.say(req.target, fidelity.carried(rec))
    else:
        ui.info(f"no server of hexbuild runs on {req.target}; starting one for this chat")
        server = serve.start(req, settings, sink=raw_to_stderr if ui.verbose else None)
        port = server.local_port
        ui.info(f"ready at {server.url} ({server.model_name})")
    answers: list[Answer] = []
    try:
        history = [{"role": "system", "content": opts.system}] if opts.system else []
        for question in _questions(opts.prompt):
            history.append({"role": "user", "content": question})
            answer = chat(port, history, max_tokens=opts.max_tokens, on_text=_write)
            _write("\n")
            history.append({"role": "assistant", "content": answer.text})
            answers.append(answer)
            ui.info(answer.summary())
    except KeyboardInterrupt:
        pass
    finally:
        if server is not None:
            try:
                serve.stop(server)
            except HexbuildError as e:
                ui.warn(f"stopping the chat's server: {e.message}")
    mark = fidelity.carried(rec if rec is not None else server.record)  # the virtual NPU's answers say so
    docs = [{**a.to_json(), **mark} for a in answers]
    ui.result(docs if opts.prompt is None else (docs[0] if docs else None))
    return answers


def _questions(prompt: str | None):
    if prompt is not None:
        yield prompt
        return
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            sys.stderr.write("> ")
            sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            return
        line = line.strip()
        if line in ("/exit", "/quit"):
            return
        if line:
            yield line
