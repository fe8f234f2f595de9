"""`hexbuild bench` and what stands on its figures.

- ``matrix``: llama-bench over targets × session counts × models, medians over repeats, the
  JSON/CSV/markdown/PNG outputs.
- ``history``: every bench row in a SQLite database, keyed by what was measured.
- ``compare``: two sets of rows side by side, with the noise of the repeats (``bench compare``).

Callers import the module they need: ``bench compare`` loads no runner, ``bench`` no comparison.
"""
