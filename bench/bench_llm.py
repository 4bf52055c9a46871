"""Benchmark of the OpenAI-compatible LLM client: time to first token and to the whole reply.

The client on the ``openai`` SDK (``agentfsm.impl.llm.openai``) against the client it replaced,
on ``aiohttp`` (``llm_aiohttp_baseline.py``), alternating request by request against one local server in a
separate process that streams a reply of 40 text events the moment a request arrives. The
figures are ratios to the aiohttp client measured in the same run.

    .venv/bin/python bench/bench_llm.py [--requests N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from agentfsm.impl.llm.client import LlmChunk, LlmRequest
from agentfsm.impl.llm.openai import OpenAIClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figures import record
from llm_aiohttp_baseline import AiohttpClient

EVENTS = 40
REQUEST = LlmRequest(({"role": "user", "content": "Say something."},))
Stream = Callable[[LlmRequest], AsyncIterator[LlmChunk]]


def reply() -> bytes:
    events = [{"choices": [{"index": 0, "delta": {"content": f"word{i} "}}]} for i in range(EVENTS)]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """HTTP/1.1 with keep-alive unless the client asks to close; each reply chunked, one event a chunk."""
    events = [block + b"\n\n" for block in reply().split(b"\n\n") if block]
    try:
        while True:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
            length = next(int(line.split(":")[1]) for line in head.split("\r\n") if line.startswith("content-length"))
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for event in events:
                writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            if "connection: close" in head:
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def serve(port_out: multiprocessing.SimpleQueue[int]) -> None:
    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port_out.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()
    asyncio.run(main())


async def measure(stream: Stream) -> tuple[float, float]:
    """Seconds to the first text chunk and to the end of the reply."""
    start = time.perf_counter()
    first = 0.0
    count = 0
    async for _ in stream(REQUEST):
        count += 1
        if count == 1:
            first = time.perf_counter() - start
    if count != EVENTS:
        raise RuntimeError(f"expected {EVENTS} chunks, got {count}")
    return first, time.perf_counter() - start


async def compare(url: str, n: int) -> dict[str, list[tuple[float, float]]]:
    new = OpenAIClient(url, "bench")
    today = AiohttpClient(url, "bench")
    clients: dict[str, Stream] = {"sdk": new.stream, "aiohttp": today.stream}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
    for stream in clients.values():  # warm up: imports, the first connection
        for _ in range(5):
            await measure(stream)
    for _ in range(n):
        for name, stream in clients.items():
            times[name].append(await measure(stream))
    await new.aclose()
    await today.aclose()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    ports: multiprocessing.SimpleQueue[int] = multiprocessing.SimpleQueue()
    server = multiprocessing.Process(target=serve, args=(ports,), daemon=True)
    server.start()
    try:
        url = f"http://127.0.0.1:{ports.get()}/v1"
        times = asyncio.run(compare(url, args.requests))
    finally:
        server.terminate()
        server.join()
    base_first = statistics.median(t[0] for t in times["aiohttp"])
    base_whole = statistics.median(t[1] for t in times["aiohttp"])
    print(f"LLM client, {args.requests} streamed replies of {EVENTS} events each, medians "
          "(ratio to the aiohttp client the SDK client replaced):")
    rows = []
    for name, samples in times.items():
        first = statistics.median(t[0] for t in samples)
        whole = statistics.median(t[1] for t in samples)
        print(f"  {name:8s} first token {first * 1e3:7.3f} ms ({first / base_first:4.2f}x)   "
              f"whole reply {whole * 1e3:7.3f} ms ({whole / base_whole:4.2f}x)")
        rows.append({"client": name, "first token (ms)": first * 1e3, "first token × aiohttp": first / base_first,
                     "whole reply (ms)": whole * 1e3, "whole reply × aiohttp": whole / base_whole})
    record("llm-client", rows, table=f"a local server, {args.requests} streamed replies of {EVENTS} text events",
           note="Medians, wall time.")
    ratio = statistics.median(t[0] for t in times["sdk"]) / base_first
    print(f"  the SDK client's time to first token is {ratio:.2f}x the aiohttp client's"
          + (" (not slower)" if ratio <= 1.0 else " (slower)"))


if __name__ == "__main__":
    main()
