"""`hexbuild lab`: hexbuild's runs, benchmarks and tests as jobs in a LAVA device lab.

- ``client``: LAVA's REST API v0.2 (requests; the token only in a header, scrubbed from all else).
- ``board``: the board as the job will find it, for rendering with the runner.
- ``plan``: a request (completion, bench, test ops, test ppl) as the job's steps, rendered by
  the local commands' own code.
- ``job``: the job script and the LAVA test definition; ``definition``: the LAVA job.
- ``bundle``: the job tarball, served over HTTP or published by a command.
- ``joblog``: the job's log read back; ``outcome``: the local command's document from it.
- ``session``: `lab run` end to end (validate, submit, queue timeout, Ctrl-C cancels).

Callers import the module they need: `lab status` loads no runner.
"""
