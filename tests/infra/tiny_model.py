"""A tiny but real llama-architecture GGUF, written with the llama.cpp project's own ``gguf``
package: two layers, Q4_0 matmul weights (the type the HTP backend repacks), a SentencePiece
vocabulary with byte fallback. llama.cpp loads it and generates real (meaningless) tokens in
well under a second, even under qemu, so real programs can be run end to end in tests.

``write_tiny_gguf(path)`` is also used by the benchmarks; the session fixture ``tiny_gguf``
writes it once per test run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

WORDS = ["hello", "world", "the", "a", "NPU", "Hexagon", "llama", "model", "fast", "test",
         "is", "on", "and", "of", "to", "in", "it", "run", "token", "ok"]


def _vocab(n_bytes: int = 256) -> tuple[list[bytes], list[float], list[int]]:
    import gguf

    tokens: list[bytes] = [b"<unk>", b"<s>", b"</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    for b in range(n_bytes):
        tokens.append(f"<0x{b:02X}>".encode())
        types.append(gguf.TokenType.BYTE)
    pieces = ["\u2581" + w for w in WORDS] + list("abcdefghijklmnopqrstuvwxyz") + ["\u2581"]
    for p in pieces:
        tokens.append(p.encode())
        types.append(gguf.TokenType.NORMAL)
    while len(tokens) % 32:  # a row count the quantized output matrix can take
        tokens.append(f"<pad{len(tokens)}>".encode())
        types.append(gguf.TokenType.UNUSED)
    scores = [0.0] * 3 + [-1000.0] * n_bytes + [-float(i) for i in range(len(tokens) - 3 - n_bytes)]
    return tokens, scores, [int(t) for t in types]


def write_tiny_gguf(path: Path, *, n_layer: int = 2, n_embd: int = 128, n_head: int = 4, n_ff: int = 256,
                    seed: int = 1234, quant: str = "Q4_0", ascii_bytes: bool = False) -> Path:
    """Write the model to ``path`` (atomically) and return it. Deterministic for a given seed.
    ``ascii_bytes``: byte-fallback tokens <0x00>..<0x7F> only, so every sampled token decodes to
    valid UTF-8 (llama-server of the 0.3.28-0.3.32 trees answers HTTP 500 on a lone non-ASCII
    byte token)."""
    import gguf
    import numpy as np
    from gguf.quants import quantize

    qtype = getattr(gguf.GGMLQuantizationType, quant)
    rng = np.random.default_rng(seed)
    tokens, scores, types = _vocab(128 if ascii_bytes else 256)
    n_vocab = len(tokens)
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name("hexbuild-tiny")
    w.add_context_length(512)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0 if quant == "Q4_0" else gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)

    def mat(name: str, rows: int, cols: int) -> None:
        data = (rng.standard_normal((rows, cols)) * (1.0 / np.sqrt(cols))).astype(np.float32)
        q = quantize(data, qtype)
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)

    def vec(name: str, n: int) -> None:
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    mat("token_embd.weight", n_vocab, n_embd)
    for i in range(n_layer):
        vec(f"blk.{i}.attn_norm.weight", n_embd)
        mat(f"blk.{i}.attn_q.weight", n_embd, n_embd)
        mat(f"blk.{i}.attn_k.weight", n_embd, n_embd)
        mat(f"blk.{i}.attn_v.weight", n_embd, n_embd)
        mat(f"blk.{i}.attn_output.weight", n_embd, n_embd)
        vec(f"blk.{i}.ffn_norm.weight", n_embd)
        mat(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        mat(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        mat(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    vec("output_norm.weight", n_embd)
    mat("output.weight", n_vocab, n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(path)
    return path


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-q4_0.gguf")


@pytest.fixture(scope="session")
def tiny_gguf_ascii(tmp_path_factory) -> Path:
    """The tiny model with ASCII byte tokens only (for llama-server: every answer is valid UTF-8)."""
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-ascii-q4_0.gguf", ascii_bytes=True)
