"""Every module in tests/infra/ is a pytest plugin: the fixtures that start real daemons
(Docker engine, adbd devices, sshd) and fetch real llama.cpp trees. Each daemon is started
once per session on first use and stopped by its PID at the end."""

import pkgutil
from pathlib import Path

pytest_plugins = [f"tests.infra.{m.name}" for m in pkgutil.iter_modules([str(Path(__file__).parent / "infra")])]
