"""The real load clients the benchmark importers read (GuideLLM, AIPerf), installed by
tests/servers/install_bench_tools.sh in their own virtual environments under
``$RIDGELINE_CACHE_DIR/bench-tools`` (default ~/.cache/ridgeline), and small runs of
them against a local OpenAI-compatible server.

Offline: both count tokens from the server's ``usage``; the tokenizer they size
prompts with is a small word-level one written here (the server's vocabulary need
not match).  GuideLLM runs with ``HF_HUB_OFFLINE=1``; AIPerf rejects a local tokenizer
directory under that variable, so it runs without it (it never needs the network
with a local directory).
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

__all__ = ["AIPERF_VERSION", "GUIDELLM_VERSION", "TOOLS", "engine_counters", "run_aiperf", "run_guidellm",
           "tool_binary", "write_tokenizer"]

GUIDELLM_VERSION = "0.8.1"
AIPERF_VERSION = "0.13.0"
TOOLS = Path(os.environ.get("RIDGELINE_CACHE_DIR", Path.home() / ".cache" / "ridgeline")) / "bench-tools"
RUN_TIMEOUT_S = 240

_WORDS = ("the of and to a in is it you that he was for on are with as his they be at one have this from or had by "
          "word but what some we can out other were all there when up use your how said an each she which do their "
          "time if will way about many then them write would like so these her long make thing see him two has look")


def tool_binary(name: str, version: str) -> Path:
    return TOOLS / f"{name}-{version}" / "bin" / name


def write_tokenizer(directory: Path) -> Path:
    """A word-level ``tokenizer.json`` + ``tokenizer_config.json`` (what transformers loads offline)."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab: dict[str, int] = {"[UNK]": 0}
    for w in [chr(c) for c in range(33, 127)] + _WORDS.split():
        vocab.setdefault(w, len(vocab))
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": 0, "content": "[UNK]", "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True}],
           "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None,
           "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
           "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}}
    (directory / "tokenizer.json").write_text(json.dumps(tok))
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 8192}))
    return directory


def engine_counters(url: str) -> dict[str, float]:
    """llama-server's Prometheus counters (``llamacpp:*``), name → value."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("llamacpp:"):
            name, _, value = line.partition(" ")
            out[name.removeprefix("llamacpp:")] = float(value)
    return out


def _run(cmd: list[str], env: dict[str, str], log: Path) -> None:
    with log.open("w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=RUN_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}; last lines:\n"
                           + "\n".join(log.read_text().splitlines()[-15:]))


def run_guidellm(url: str, model: str, out_dir: Path, *, concurrency: int, requests: int, prompt_tokens: int,
                 output_tokens: int, tokenizer: Path) -> Path:
    """``guidellm run`` (concurrent streams, a request count) → its JSON report."""
    out = out_dir / "guidellm.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(out_dir / "hf")}
    _run([str(tool_binary("guidellm", GUIDELLM_VERSION)), "run",
          "--backend", f"kind=openai_http,target={url},model={model}",
          "--profile", f"kind=concurrent,streams={concurrency}",
          "--constraint", f"kind=max_requests,count={requests}",
          "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
          "--data", f"kind=synthetic_text,prompt_tokens={prompt_tokens},output_tokens={output_tokens}",
          "--output", f"kind=json,path={out}", "--disable-console-interactive"], env, out_dir / "guidellm.log")
    return out


def run_aiperf(url: str, model: str, out_dir: Path, *, concurrency: int, requests: int, prompt_tokens: int,
               output_tokens: int, tokenizer: Path) -> Path:
    """``aiperf profile`` (concurrency, a request count, the server's token counts) → profile_export_aiperf.json."""
    art = out_dir / "aiperf"
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"} | {"HF_HOME": str(out_dir / "hf")}
    _run([str(tool_binary("aiperf", AIPERF_VERSION)), "profile", "--model", model, "--url", url,
          "--endpoint-type", "chat", "--streaming", "--concurrency", str(concurrency),
          "--request-count", str(requests), "--tokenizer", str(tokenizer),
          "--synthetic-input-tokens-mean", str(prompt_tokens), "--output-tokens-mean", str(output_tokens),
          "--extra-inputs", "ignore_eos:true", "--use-server-token-count", "--artifact-dir", str(art),
          "--ui-type", "none"], env, out_dir / "aiperf.log")
    return art / "profile_export_aiperf.json"
