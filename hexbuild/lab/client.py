"""LAVA's REST API (v0.2) through ``requests``: validate, submit, look at, cancel and read the
results of jobs. (lavacli is AGPLv3, so it is not used as a library; ``requests`` is already
installed as the Docker SDK's own dependency.)

The token travels only in the ``Authorization: Token …`` header. Nothing this module raises or
returns carries it: every message built from a server answer is scrubbed, and so are the
per-job ``token`` fields a job's JSON holds for the lab's own workers.
"""

from __future__ import annotations

import re
from typing import Any, Iterator
from urllib.parse import urlsplit, urlunsplit

from ..errors import LabFault, LabRefused, LabUnreachable, UsageError
from ..ui import ui

API = "/api/v0.2"
CALL_TIMEOUT = 30.0  # seconds for one HTTP call (a log of a long job may take more: see logs())
PAGE = 500  # test cases per page (the server's default is 50)
JOB_URL = re.compile(r"^(?P<base>https?://.+?)/scheduler/job/(?P<id>\d+)/?$")


def base_url(url: str) -> str:
    """``url`` as scheme://host[:port][/prefix] without a trailing slash (one line, exit 2, when
    it is not an http(s) URL)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"the lab URL must be http(s)://HOST[:PORT], got {url!r}")
    if parts.username or parts.password:
        raise UsageError("the lab URL must not hold credentials: the token goes in HEXBUILD_LAB_TOKEN")
    path = parts.path.rstrip("/")
    if path.endswith(API):
        path = path[: -len(API)]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def parse_job_ref(ref: str, lab: str | None) -> tuple[str, int]:
    """(lab base URL, job id) of a job given as its number (with ``lab``) or its URL."""
    m = JOB_URL.match(ref.strip())
    if m:
        return base_url(m.group("base")), int(m.group("id"))
    if ref.strip().isdigit():
        if not lab:
            raise UsageError(f"job {ref}: which lab? give --lab URL (or set lab.url), or the job's URL")
        return base_url(lab), int(ref.strip())
    raise UsageError(f"not a job id or a job URL: {ref!r} (e.g. 42 or https://lava.example.org/scheduler/job/42)")


class LavaClient:
    """One lab, one token. Every call has a timeout; every failure is one line (exit 16)."""

    def __init__(self, url: str, token: str, *, timeout: float = CALL_TIMEOUT) -> None:
        import requests

        self.base = base_url(url)
        self._token = token
        self.timeout = timeout
        self.session = requests.Session()
        self.session.trust_env = False  # a proxy from the environment must not see the token
        if token:
            self.session.headers["Authorization"] = f"Token {token}"
        self.session.headers["User-Agent"] = "hexbuild"

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> "LavaClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- URLs -----------------------------------------------------------------------------------
    def job_url(self, job_id: int) -> str:
        """The job's page in the lab's web UI (what people click in a CI log)."""
        return f"{self.base}/scheduler/job/{job_id}"

    def scrub(self, text: str) -> str:
        # a token of a few characters could not be told from the words around it
        return text.replace(self._token, "***") if len(self._token) >= 6 else text

    # -- the calls ------------------------------------------------------------------------------
    def _call(self, method: str, path: str, *, timeout: float | None = None, **kw: Any):
        import requests

        url = f"{self.base}{API}/{path.lstrip('/')}"
        ui.detail(f"{method} {url}")
        try:
            r = self.session.request(method, url, timeout=timeout or self.timeout, allow_redirects=False, **kw)
        except requests.Timeout:
            raise LabUnreachable(f"the lab at {self.base} did not answer within {timeout or self.timeout:g}s") from None
        except requests.ConnectionError as e:
            raise LabUnreachable(f"cannot reach the lab at {self.base}: {self.scrub(_reason(e))}") from None
        except requests.RequestException as e:
            raise LabFault(f"the call to the lab at {self.base} failed: {self.scrub(_reason(e))}") from None
        if r.status_code in (401, 403):
            what = "no token was given" if not self._token else "the token was refused"
            raise LabRefused(f"the lab at {self.base} answered {r.status_code} to {method} {API}/{path}: "
                             f"{what} ({self.scrub(_message(r))})",
                             hint="set HEXBUILD_LAB_TOKEN to a token of a LAVA user (API → Tokens in its web UI)")
        if r.status_code == 404:
            raise LabFault(f"the lab at {self.base} has no {API}/{path} (404)",
                           hint="check the job id and --lab (the server's URL, not a job page)")
        if 300 <= r.status_code < 400:
            raise LabFault(f"the lab at {self.base} redirected {method} {API}/{path} to "
                           f"{r.headers.get('Location', '?')}: give the server's own URL to --lab")
        if r.status_code >= 400:
            raise LabFault(f"the lab at {self.base} answered {r.status_code} to {method} {API}/{path}: "
                           f"{self.scrub(_message(r))}")
        return r

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        r = self._call(method, path, **kw)
        try:
            return r.json()
        except ValueError:
            raise LabFault(f"the lab at {self.base} answered {method} {API}/{path} with something other "
                           "than JSON: is it a LAVA server?") from None

    def whoami(self) -> str:
        """The user the token belongs to ('' for an anonymous call): the token checked first."""
        return str(self._json("GET", "system/whoami/").get("user") or "")

    def version(self) -> str:
        return str(self._json("GET", "system/version/").get("version") or "")

    def validate(self, definition: str) -> str | None:
        """None when the server's schema accepts the job, else its one-line reason."""
        msg = str(self._json("POST", "jobs/validate/", json={"definition": definition}).get("message") or "")
        return None if msg.strip() == "Job valid." else self.scrub(msg)

    def submit(self, definition: str) -> list[int]:
        data = self._json("POST", "jobs/", json={"definition": definition})
        ids = data.get("job_ids") if isinstance(data, dict) else None
        if not isinstance(ids, list) or not ids:
            raise LabFault(f"the lab at {self.base} accepted the job but gave no job id: {self.scrub(str(data))}")
        return [int(i) for i in ids]

    def job(self, job_id: int) -> dict[str, Any]:
        return scrub_job(self._json("GET", f"jobs/{job_id}/"))

    def cancel(self, job_id: int) -> None:
        self._call("POST", f"jobs/{job_id}/cancel/")

    def tests(self, job_id: int) -> list[dict[str, Any]]:
        """Every test case of the job (all suites), in the order they were logged."""
        return list(self._pages(f"jobs/{job_id}/tests/"))

    def suites(self, job_id: int) -> list[dict[str, Any]]:
        return list(self._pages(f"jobs/{job_id}/suites/"))

    def logs(self, job_id: int, *, start: int = 0) -> str:
        """The job's log (LAVA's YAML, one entry per line) from line ``start``."""
        params = {"start": start} if start else None
        r = self._call("GET", f"jobs/{job_id}/logs/", params=params, timeout=max(self.timeout, 120.0))
        # LAVA writes UTF-8 and says no charset: requests would guess one by reading the whole log
        r.encoding = "utf-8"
        return r.text

    def device(self, hostname: str) -> dict[str, Any]:
        return self._json("GET", f"devices/{hostname}/")

    def _pages(self, path: str) -> Iterator[dict[str, Any]]:
        offset = 0
        while True:
            data = self._json("GET", path, params={"limit": PAGE, "offset": offset})
            results = data.get("results") if isinstance(data, dict) else data
            if not isinstance(results, list):
                raise LabFault(f"the lab at {self.base} answered {API}/{path} with no results list")
            yield from results
            offset += len(results)
            if not isinstance(data, dict) or not data.get("next") or not results:
                return


def scrub_job(job: Any) -> Any:
    """A job's JSON without the per-job token LAVA gives its own workers."""
    if isinstance(job, dict):
        return {k: ("***" if k == "token" and v else v) for k, v in job.items()}
    return job


def _message(r) -> str:
    try:
        data = r.json()
    except ValueError:
        text = " ".join(r.text.split())
        return text[:200] or r.reason or "no message"
    if isinstance(data, dict):
        for key in ("message", "detail", "definition"):
            if key in data:
                return str(data[key])
    return str(data)[:200]


def _reason(e: Exception) -> str:
    """The innermost reason of a requests error (connection refused, name not known), one line."""
    while e.__context__ is not None and not str(e):
        e = e.__context__  # type: ignore[assignment]
    text = str(e)
    m = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", text)
    if m:
        return m.group(1)
    m = re.search(r"(Connection refused|Name or service not known|timed out|Temporary failure in name resolution)",
                  text)
    return m.group(1) if m else text.splitlines()[0][:200] if text else type(e).__name__
