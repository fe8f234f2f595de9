"""Timing lines: llama_perf_context_print / common_perf_print and the sampler's perf lines."""

from __future__ import annotations

import re
from typing import Any

from .lines import NUM, LineFamily, finite

# llama-context.cpp llama_perf_context_print (and common/sampling.cpp common_perf_print):
#   "%s:        load time = %10.2f ms\n"
#   "%s: prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n"
#   "%s:        eval time = %10.2f ms / %5d runs   (%8.2f ms per token, %8.2f tokens per second)\n"
#   "%s:       total time = %10.2f ms / %5d tokens\n"
#   "%s: unaccounted time = %10.2f ms / %5.1f %%      (total - sampling - prompt eval - eval) / (total)\n"
#   "%s:    graphs reused = %10d\n"
_PERF_FN = r"(?:llama_perf_context_print|common_perf_print):"
_LOAD = re.compile(_PERF_FN + r"\s+load time =\s*" + NUM + r" ms")
_PROMPT = re.compile(_PERF_FN + r"\s+prompt eval time =\s*" + NUM + r" ms /\s*(\d+) tokens \(\s*" + NUM
                     + r" ms per token,\s*" + NUM + r" tokens per second\)")
_EVAL = re.compile(_PERF_FN + r"\s+eval time =\s*" + NUM + r" ms /\s*(\d+) runs\s+\(\s*" + NUM
                   + r" ms per token,\s*" + NUM + r" tokens per second\)")
_TOTAL = re.compile(_PERF_FN + r"\s+total time =\s*" + NUM + r" ms /\s*(\d+) tokens")
_UNACC = re.compile(_PERF_FN + r"\s+unaccounted time =\s*" + NUM + r" ms")
_REUSED = re.compile(_PERF_FN + r"\s+graphs reused =\s*(\d+)")
# llama-sampler.cpp llama_perf_sampler_print: "%s:    samplers time = %10.2f ms / %5d runs\n";
# common_perf_print: "%s:    sampling time = %10.2f ms\n", "%s:    samplers time = %10.2f ms / %5d tokens\n";
# older llama_perf_sampler_print (docs/backend/snapdragon/README.md transcript):
#   "sampling time = 30.08 ms / 487 runs   (    0.06 ms per token, 16191.77 tokens per second)"
_SAMPLING = re.compile(r"(?:llama_perf_sampler_print|common_perf_print):\s+sampling time =\s*" + NUM
                       + r" ms(?: /\s*(\d+) runs\s+\(\s*" + NUM + r" ms per token,\s*" + NUM
                       + r" tokens per second\))?")
_SAMPLERS = re.compile(r"(?:llama_perf_sampler_print|common_perf_print):\s+samplers time =\s*" + NUM
                       + r" ms /\s*(\d+) (?:runs|tokens)")


class PerfLines(LineFamily):
    """Fills ``perf`` and ``sampler``."""

    def _perf(self) -> dict[str, Any]:
        if self.out["perf"] is None:
            self.out["perf"] = {"load_ms": None, "prompt_eval": None, "eval": None, "total": None,
                                "unaccounted_ms": None, "graphs_reused": None}
        return self.out["perf"]

    def _sampler(self) -> dict[str, Any]:
        if self.out["sampler"] is None:
            self.out["sampler"] = {"sampling_ms": None, "samplers_ms": None, "runs": None,
                                   "ms_per_token": None, "tokens_per_second": None}
        return self.out["sampler"]

    def feed(self, line: str) -> bool:
        if m := _PROMPT.search(line):
            self._perf()["prompt_eval"] = {"ms": finite(m[1]), "tokens": int(m[2]), "ms_per_token": finite(m[3]),
                                           "tokens_per_second": finite(m[4])}
        elif m := _EVAL.search(line):
            self._perf()["eval"] = {"ms": finite(m[1]), "runs": int(m[2]), "ms_per_token": finite(m[3]),
                                    "tokens_per_second": finite(m[4])}
        elif m := _TOTAL.search(line):
            self._perf()["total"] = {"ms": finite(m[1]), "tokens": int(m[2])}
        elif m := _LOAD.search(line):
            self._perf()["load_ms"] = finite(m[1])
        elif m := _REUSED.search(line):
            self._perf()["graphs_reused"] = int(m[1])
        elif m := _UNACC.search(line):
            self._perf()["unaccounted_ms"] = finite(m[1])
        elif m := _SAMPLING.search(line):
            s = self._sampler()
            s["sampling_ms"] = finite(m[1])
            if m[2] is not None:
                s["runs"], s["ms_per_token"], s["tokens_per_second"] = int(m[2]), finite(m[3]), finite(m[4])
        elif m := _SAMPLERS.search(line):
            s = self._sampler()
            s["samplers_ms"], s["runs"] = finite(m[1]), int(m[2])
        else:
            return False
        return self.hit()
