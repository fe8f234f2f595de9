"""`hexbuild serve` and `hexbuild chat`: an OpenAI-compatible llama-server on the device, reached
through a forwarded port. It stands above deploy (it deploys what it serves) and the runner (it
renders and starts the server as `run` does): server.py starts, supervises and stops one
server; control.py the detached ones (status, stop); state.py their records; daemon.py the
detached supervisor's process (prefork.py: forked before the parse); request.py what a serve asks
for; probe.py readiness and the model's name; openai_http.py the chat client; chat.py the chat command."""
