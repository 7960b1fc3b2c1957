"""A pacing server: an OpenAI-compatible streaming endpoint that emits tokens at
a known pace, so the probe's clock can be checked against the truth.

    python tests/servers/pacing_server.py --port 0 --ttft-s 0.05 --tpot-s 0.01 [--api-key KEY]
        [--chunk-tokens 1,2,3] [--uvloop]

Prints ``PORT <n>`` once listening.  The first token is written ``ttft_s`` after
the request arrives and token i at ``ttft_s + i × tpot_s`` (an absolute
schedule, so sleep jitter does not accumulate); ``--tpot-s 0`` writes the whole
stream at once (for the client's ingest rate).  ``--chunk-tokens 1,2,3`` sends
the tokens in uneven chunks (1 token, then 2, then 3, then 1 …; a chunk is
written when its last token is due, every token in it logged at that write).
Chat streams start with an empty role-only chunk.  ``GET /log`` returns each
request's server-side clock readings (``time.perf_counter_ns``, CLOCK_MONOTONIC,
shared by every process on the machine): receive time and each token's write
time, the truth the probe's figures are checked against.  ``/metrics`` is
vLLM-style, from the server's own state.  ``--uvloop`` serves on uvloop (where
installed) so one core keeps up with a thousand streams; its timers have 1 ms
resolution, which the clock log records.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from aiohttp import web

STATE = {"running": 0, "prompt_tokens": 0, "generation_tokens": 0, "requests": 0}
LOG: list[dict] = []
KV_SLOTS = [256]  # --kv-slots: the running requests that make vllm:kv_cache_usage_perc 1.0


def _chunk(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _token(chat: bool, i: int, finish: str | None = None, k: int = 1) -> dict:
    text = "".join(f"t{j % 10} " for j in range(i, i + k))
    if chat:
        return {"object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}
    return {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}


def _chunk_sizes(pattern: tuple[int, ...], n: int) -> list[int]:
    """Tokens per chunk for an ``n``-token stream: ``pattern`` repeated, the last chunk cut to fit."""
    out: list[int] = []
    while sum(out) < n:
        out.append(min(pattern[len(out) % len(pattern)], n - sum(out)))
    return out


async def completions(request: web.Request) -> web.StreamResponse:
    cfg = request.app["cfg"]
    t_recv = asyncio.get_running_loop().time()
    recv_ns = time.perf_counter_ns()
    if cfg.api_key and request.headers.get("Authorization") != f"Bearer {cfg.api_key}":
        return web.json_response({"error": "bad key"}, status=401)
    body = await request.json()
    chat = request.path.endswith("/chat/completions")
    n = int(body.get("max_tokens", 16))
    prompt = body["messages"][-1]["content"] if chat else body["prompt"]
    prompt_tokens = len(prompt.split())
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    token_ns: list[int] = []
    STATE["running"] += 1
    STATE["requests"] += 1
    STATE["prompt_tokens"] += prompt_tokens
    try:
        if chat:
            await resp.write(_chunk({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}))
        if cfg.tpot_s == 0:
            await asyncio.sleep(cfg.ttft_s)
            blob = b"".join(_chunk(_token(chat, i, "length" if i == n - 1 else None)) for i in range(n))
            token_ns.append(time.perf_counter_ns())
            await resp.write(blob)
        else:
            loop = asyncio.get_running_loop()
            i = 0
            for k in _chunk_sizes(cfg.chunk_tokens, n):
                last = i + k - 1  # the chunk goes out when its last token is due
                delay = t_recv + cfg.ttft_s + last * cfg.tpot_s - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                tok = _token(chat, i, "length" if last == n - 1 else None, k)
                if last == n - 1 and include_usage and not chat:
                    tok["usage"] = usage
                now = time.perf_counter_ns()
                token_ns.extend([now] * k)
                await resp.write(_chunk(tok))
                STATE["generation_tokens"] += k
                i += k
        if chat and include_usage:
            await resp.write(_chunk({"choices": [], "usage": usage}))
        if cfg.tpot_s == 0:
            STATE["generation_tokens"] += n
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        # kept in memory (GET /log): a file write here would delay the next request
        # on this keep-alive connection and show up as the probe's error
        LOG.append({"prompt_head": prompt.split(" ", 1)[0], "recv_ns": recv_ns, "token_ns": token_ns})
    finally:
        STATE["running"] -= 1
    return resp


async def log(request: web.Request) -> web.Response:
    return web.Response(text="".join(json.dumps(e) + "\n" for e in LOG), content_type="application/x-ndjson")


async def metrics(request: web.Request) -> web.Response:
    lbl = '{model_name="pacer"}'
    text = (
        "# HELP vllm:num_requests_running Running requests.\n# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{lbl} {STATE['running']}\n"
        "# HELP vllm:num_requests_waiting Waiting requests.\n# TYPE vllm:num_requests_waiting gauge\n"
        f"vllm:num_requests_waiting{lbl} 0\n"
        "# HELP vllm:kv_cache_usage_perc KV usage.\n# TYPE vllm:kv_cache_usage_perc gauge\n"
        f"vllm:kv_cache_usage_perc{lbl} {STATE['running'] / KV_SLOTS[0]}\n"
        "# HELP vllm:prompt_tokens Prompt tokens.\n# TYPE vllm:prompt_tokens counter\n"
        f"vllm:prompt_tokens_total{lbl} {STATE['prompt_tokens']}\n"
        "# HELP vllm:generation_tokens Generated tokens.\n# TYPE vllm:generation_tokens counter\n"
        f"vllm:generation_tokens_total{lbl} {STATE['generation_tokens']}\n"
    )
    return web.Response(text=text, content_type="text/plain")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ttft-s", type=float, default=0.05)
    ap.add_argument("--tpot-s", type=float, default=0.01)
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--kv-slots", type=int, default=256)
    ap.add_argument("--chunk-tokens", default="1", help="tokens per chunk, cycled: e.g. 1,2,3")
    ap.add_argument("--uvloop", action="store_true", help="serve on uvloop where it is installed")
    cfg = ap.parse_args()
    cfg.chunk_tokens = tuple(max(int(x), 1) for x in cfg.chunk_tokens.split(",") if x.strip()) or (1,)
    KV_SLOTS[0] = cfg.kv_slots
    app = web.Application()
    app["cfg"] = cfg
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/log", log)
    runner = web.AppRunner(app, access_log=None, handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port, backlog=1024)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"PORT {port}", flush=True)
    sys.stdout.flush()
    await asyncio.Event().wait()


def _loop_factory() -> object:
    if "--uvloop" in sys.argv:
        try:
            import uvloop

            return uvloop.new_event_loop
        except ImportError:
            pass
    return asyncio.new_event_loop


if __name__ == "__main__":
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:  # type: ignore[arg-type]
            runner.run(main())
    except KeyboardInterrupt:
        pass
