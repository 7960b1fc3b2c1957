"""A random-weight Llama GGUF, written with the ``gguf`` package (no download).

Character-level SentencePiece vocabulary: the 3 specials, the 256 byte tokens
(``<0x00>``…``<0xFF>``, so any text tokenizes) and one token per printable
ASCII character (space as ``▁``).  The output rows of the special and byte
tokens are zero, so EOS is never the argmax and every stream runs exactly to
``max_tokens``, one ASCII character per SSE chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from planner import ModelSpec


@dataclass(frozen=True)
class TinyLlama:
    layers: int = 8
    hidden: int = 1024
    ff: int = 2816
    heads: int = 16
    kv_heads: int = 4
    context: int = 8192

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def vocab(self) -> tuple[list[str], list[int]]:
        tokens = ["<unk>", "<s>", "</s>"]
        types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
        tokens += [f"<0x{b:02X}>" for b in range(256)]
        types += [gguf.TokenType.BYTE] * 256
        tokens += ["▁"] + [chr(c) for c in range(33, 127)]
        types += [gguf.TokenType.NORMAL] * 95
        return tokens, [int(t) for t in types]

    def model_spec(self) -> ModelSpec:
        """The planner's ModelSpec of this shape (parameters counted from it)."""
        return ModelSpec(id="tiny-llama-gguf", layers=self.layers, heads=self.heads, kv_heads=self.kv_heads,
                         head_dim=self.head_dim, hidden=self.hidden, intermediate=self.ff,
                         vocab=len(self.vocab()[0]), tie_embeddings=False, max_context_tokens=self.context)

    def write(self, path: Path, *, seed: int = 0) -> Path:
        rng = np.random.default_rng(seed)
        tokens, types = self.vocab()
        v, h, kv = len(tokens), self.hidden, self.kv_heads * self.head_dim
        w = gguf.GGUFWriter(str(path), "llama")
        w.add_context_length(self.context)
        w.add_embedding_length(h)
        w.add_block_count(self.layers)
        w.add_feed_forward_length(self.ff)
        w.add_head_count(self.heads)
        w.add_head_count_kv(self.kv_heads)
        w.add_rope_dimension_count(self.head_dim)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores([0.0] * v)
        w.add_token_types(types)
        w.add_unk_token_id(0)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)

        def rand(*shape: int) -> np.ndarray:
            return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

        out = rand(v, h)
        out[: 3 + 256] = 0.0  # never sample specials or bytes
        w.add_tensor("token_embd.weight", rand(v, h))
        w.add_tensor("output_norm.weight", np.ones(h, dtype=np.float32))
        w.add_tensor("output.weight", out)
        for i in range(self.layers):
            p = f"blk.{i}."
            w.add_tensor(p + "attn_norm.weight", np.ones(h, dtype=np.float32))
            w.add_tensor(p + "ffn_norm.weight", np.ones(h, dtype=np.float32))
            w.add_tensor(p + "attn_q.weight", rand(h, h))
            w.add_tensor(p + "attn_k.weight", rand(kv, h))
            w.add_tensor(p + "attn_v.weight", rand(kv, h))
            w.add_tensor(p + "attn_output.weight", rand(h, h))
            w.add_tensor(p + "ffn_gate.weight", rand(self.ff, h))
            w.add_tensor(p + "ffn_up.weight", rand(self.ff, h))
            w.add_tensor(p + "ffn_down.weight", rand(h, self.ff))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path
