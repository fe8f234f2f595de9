"""serve/probe.py: /health and /v1/models on a raw socket, against real HTTP servers on loopback
(Python's http.server, answering with a length, chunked, or not HTTP at all)."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hexbuild.serve import probe


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    status = 200
    chunked = False

    def do_GET(self):  # noqa: N802
        body = json.dumps({"data": [{"id": "tiny.gguf"}]} if self.path == "/v1/models" else {"status": "ok"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        if self.chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (body[:5], body[5:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    servers = []

    def start(**attrs):
        handler = type("H", (Handler,), attrs)
        srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv.server_address[1]

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("chunked", [False, True])
def test_ready_and_the_models_name(server, chunked):
    port = server(chunked=chunked)
    assert probe.health(port) == "ready"
    assert probe.model_name(port) == "tiny.gguf"
    assert probe.get(port, "/v1/models", timeout=2)[1] == b'{"data": [{"id": "tiny.gguf"}]}'


def test_loading_down_and_not_http(server):
    assert probe.health(server(status=503)) == "loading"
    assert probe.model_name(server(status=503)) is None
    with socket.socket() as s:  # bound, not listening: refused
        s.bind(("127.0.0.1", 0))
        assert probe.health(s.getsockname()[1]) == "down"
    raw = socket.socket()
    raw.bind(("127.0.0.1", 0))
    raw.listen()

    def babble():
        conn, _ = raw.accept()
        conn.recv(1024)
        conn.sendall(b"SSH-2.0-OpenSSH\r\n")
        conn.close()

    threading.Thread(target=babble, daemon=True).start()
    try:
        assert probe.health(raw.getsockname()[1]) == "down"
    finally:
        raw.close()
