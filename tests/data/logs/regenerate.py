"""Regenerate the logs in this directory from real llama.cpp programs (run by hand, not by pytest).

Every log here is the unedited console output (stdout + stderr) of a llama.cpp program built
for the CPU from the cached tree, run on a tiny model written with the `gguf` package:

    B=~/.cache/hexbuild-tests/llama-build-0.3.20
    S=~/.cache/hexbuild-tests/llama-cpp-python-0.3.20/vendor/llama.cpp
    apt-get install -y libopenblas-dev      # the BLAS backend: a second backend for test-backend-ops
    cmake -S $S -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX2=ON \
          -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BLAS=ON -DGGML_BLAS_VENDOR=OpenBLAS -DLLAMA_CURL=OFF \
          -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF
    ninja -C $B -j2 test-backend-ops llama-bench llama-completion
    python tests/data/logs/regenerate.py $B/bin

The failing test-backend-ops log comes from the same program with a fault injected below it:
an LD_PRELOAD library wraps OpenBLAS's cblas_sgemm and corrupts one output value when k is 77 or 128,
so the BLAS backend really computes wrong results and test-backend-ops reports them its own way.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WORK = Path.home() / ".cache" / "hexbuild-tests" / "logs-work"

FAULT_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
typedef void (*sgemm_t)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                        float, float *, int);
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc) {
    static sgemm_t real;
    if (!real) real = (sgemm_t) dlsym(RTLD_NEXT, "cblas_sgemm");
    real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if ((k == 128 || k == 77) && m > 0 && n > 0) c[0] += 1000.0f;
}
"""


def write_tiny_model(path: Path) -> None:
    """A 2-layer llama with a 288-token SPM vocabulary, Q4_0 matmul weights, Q8_0 embeddings."""
    import gguf
    from gguf.quants import quantize

    rng = np.random.default_rng(0)
    n_embd, n_ff, n_layer, n_head = 256, 512, 2, 4
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    pieces = ["\u2581", "\u2581the", "\u2581a", "\u2581hello", "\u2581world", "e", "t", "a", "o", "i", "n", "s",
              "h", "r", "d", "l", "u", "c", "m", "w", "f", "g", "y", "p", "b", "\u2581is", "\u2581of", "\u2581to", "."]
    tokens += pieces
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(len(pieces))]
    n_vocab = len(tokens)
    assert n_vocab % 32 == 0

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("hexbuild-tiny")
    w.add_context_length(512)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def tensor(name: str, shape: tuple[int, ...], qtype: gguf.GGMLQuantizationType) -> None:
        data = (rng.standard_normal(shape) * 0.05).astype(np.float32)
        if qtype == gguf.GGMLQuantizationType.F32:
            data = np.ones(shape, dtype=np.float32)
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, quantize(data, qtype), raw_dtype=qtype)

    Q4, Q8, F32 = gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.F32
    tensor("token_embd.weight", (n_vocab, n_embd), Q8)
    for il in range(n_layer):
        tensor(f"blk.{il}.attn_norm.weight", (n_embd,), F32)
        for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(f"blk.{il}.{t}.weight", (n_embd, n_embd), Q4)
        tensor(f"blk.{il}.ffn_norm.weight", (n_embd,), F32)
        tensor(f"blk.{il}.ffn_gate.weight", (n_ff, n_embd), Q4)
        tensor(f"blk.{il}.ffn_up.weight", (n_ff, n_embd), Q4)
        tensor(f"blk.{il}.ffn_down.weight", (n_embd, n_ff), Q4)
    tensor("output_norm.weight", (n_embd,), F32)
    tensor("output.weight", (n_vocab, n_embd), Q4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run(argv: list[str], out: Path, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(argv), ">", out.name, file=sys.stderr)
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600,
                          env={**os.environ, **(env or {})})
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(proc.stdout)
    tmp.replace(out)
    print(f"  exit {proc.returncode}, {len(proc.stdout)} bytes", file=sys.stderr)


def main(bin_dir: str) -> None:
    b = Path(bin_dir).expanduser()
    WORK.mkdir(parents=True, exist_ok=True)
    model = WORK / "hexbuild-tiny-q4_0.gguf"
    write_tiny_model(model)
    common = ["-t", "2"]
    run([str(b / "llama-completion"), "-m", str(model), "-p", "hello world", "-n", "16", "-c", "256",
         "--seed", "1", "-no-cnv", *common], HERE / "llama-completion-cpu.log")
    # no generated token: llama.cpp prints inf tokens per second
    run([str(b / "llama-completion"), "-m", str(model), "-p", "hello world", "-n", "0", "-c", "256",
         "--seed", "1", "-no-cnv", *common], HERE / "llama-completion-n0-cpu.log")
    # timestamps, level prefixes and ANSI colours on every line
    run([str(b / "llama-completion"), "-m", str(model), "-p", "hello world", "-n", "4", "-c", "256",
         "--seed", "1", "-no-cnv", "--log-prefix", "--log-timestamps", "--log-colors", "on", *common],
        HERE / "llama-completion-prefixed-cpu.log")
    for fmt in ("md", "json", "jsonl"):
        run([str(b / "llama-bench"), "-m", str(model), "-p", "32", "-n", "8", "-r", "2", "-o", fmt, *common],
            HERE / f"llama-bench-cpu.{fmt}.log")
    # the cases the BLAS backend supports (n >= 32) and a few it does not
    ops = [str(b / "test-backend-ops"), "-b", "BLAS", "-o", "MUL_MAT", "-p",
           r"n=(45|77|512),|type_b=f32,m=16,n=1,k=256,bs=\[1,1\],nr=\[1,1\]"]
    run(ops, HERE / "test-backend-ops-blas-ok.log")
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = Path(tmp) / "fault.c", Path(tmp) / "libfault.so"
        src.write_text(FAULT_C)
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(src), "-ldl"], check=True)
        run(ops, HERE / "test-backend-ops-blas-fail.log", env={"LD_PRELOAD": str(lib)})


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "~/.cache/hexbuild-tests/llama-build-0.3.20/bin")
