"""End-to-end bench peer: tools `echo` and `add` on the MCP Python SDK (mcp==2.3.0, MCPServer).

    PYTHONPATH=tests/peers/python/site python3 benches/e2e/servers/python/server.py stdio
    PYTHONPATH=tests/peers/python/site python3 benches/e2e/servers/python/server.py http PORT [--stateless]

stdio: newline-delimited JSON-RPC on stdin/stdout (both eras; the first request picks one); exits at
    stdin EOF once the requests read so far are answered (the SDK alone would cancel them, see below).
http: Streamable HTTP on http://127.0.0.1:PORT/mcp under uvicorn, plain JSON response bodies
    (json_response=True). 2025-era traffic gets Mcp-Session-Id sessions; with --stateless it is served
    without sessions instead (stateless_http=True). Requests whose MCP-Protocol-Version header names
    2026-07-28 are served statelessly by the SDK in both modes. Prints
    `listening on http://127.0.0.1:PORT/mcp` once uvicorn accepts connections.
One process (no workers), warnings-only logging, no access log; SIGTERM/SIGINT exit with status 0.
"""

from __future__ import annotations

import os
import signal
import sys
from collections import Counter
from typing import Any

import anyio
import uvicorn

from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

USAGE = "usage: server.py stdio | http PORT [--stateless]"

server = MCPServer("bench-python", version="0.0.0", log_level="WARNING")


# structured_output=False: the result is `content` only, like the other peers (a `-> str` tool would
# otherwise also carry `structuredContent` and list an `outputSchema`).
@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(structured_output=False)
def add(a: float, b: float) -> str:
    """Add two numbers."""
    total = a + b
    # Like JavaScript's String(): a whole number prints without a decimal point ("5", not "5.0").
    return str(int(total)) if total.is_integer() else repr(total)


# --------------------------------------------------------------------------- stdio
# At stdin EOF the SDK's dispatcher cancels every request still in flight (mcp/shared/jsonrpc_dispatcher.py,
# JSONRPCDispatcher.run: "Cancel in-flight handlers"), so `printf '...' | server.py stdio` loses the answers
# to the last requests. The two stream wrappers below hold the EOF back until every request read has been
# answered (or DRAIN_TIMEOUT passes); otherwise they pass messages straight through.

DRAIN_TIMEOUT = 10.0


class _Pending:
    """Ids of the requests read from stdin and not answered yet."""

    def __init__(self) -> None:
        self._ids: Counter[Any] = Counter()
        self._idle: anyio.Event | None = None

    def add(self, request_id: Any) -> None:
        self._ids[request_id] += 1

    def done(self, request_id: Any) -> None:
        if self._ids[request_id] > 1:
            self._ids[request_id] -= 1
        else:
            self._ids.pop(request_id, None)
        if not self._ids and self._idle is not None:
            self._idle.set()

    async def wait_idle(self) -> None:
        if self._ids:
            self._idle = anyio.Event()
            with anyio.move_on_after(DRAIN_TIMEOUT):
                await self._idle.wait()


class _DrainingReader:
    """The SDK's stdin message stream, noting each request and holding EOF back until all are answered."""

    def __init__(self, inner: Any, pending: _Pending) -> None:
        self._inner = inner
        self._pending = pending

    def __getattr__(self, name: str) -> Any:  # e.g. `last_context`, `close`, `aclose`
        return getattr(self._inner, name)

    def _note(self, item: Any) -> Any:
        if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
            self._pending.add(item.message.id)
        return item

    async def receive(self) -> Any:
        try:
            return self._note(await self._inner.receive())
        except anyio.EndOfStream:
            await self._pending.wait_idle()
            raise

    def __aiter__(self) -> _DrainingReader:
        return self

    async def __anext__(self) -> Any:
        try:
            return self._note(await self._inner.__anext__())
        except StopAsyncIteration:
            await self._pending.wait_idle()
            raise

    async def __aenter__(self) -> _DrainingReader:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._inner.__aexit__(*exc_info)


class _AnswerTracker:
    """The SDK's stdout message stream, noting each answer sent."""

    def __init__(self, inner: Any, pending: _Pending) -> None:
        self._inner = inner
        self._pending = pending

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, item: SessionMessage) -> None:
        await self._inner.send(item)
        if isinstance(item.message, JSONRPCResponse | JSONRPCError):
            self._pending.done(item.message.id)

    async def __aenter__(self) -> _AnswerTracker:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._inner.__aexit__(*exc_info)


async def run_stdio() -> None:
    # What MCPServer.run_stdio_async does, with the EOF drain around the two streams. MCPServer keeps
    # its low-level Server private; there is no public accessor for it.
    lowlevel = server._lowlevel_server  # noqa: SLF001
    pending = _Pending()
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(
            _DrainingReader(read_stream, pending),
            _AnswerTracker(write_stream, pending),
            lowlevel.create_initialization_options(),
        )


# --------------------------------------------------------------------------- HTTP


async def run_http(port: int, stateless: bool) -> None:
    app = server.streamable_http_app(
        json_response=True,
        stateless_http=stateless,
        # The bench opens many sessions; the SDK's default cap (10 000) would start refusing them.
        max_sessions=None,
        host="127.0.0.1",  # the SDK's default Host/Origin check then allows 127.0.0.1:*/localhost:*
    )
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    http_server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        # uvicorn installs its own SIGINT/SIGTERM handlers and shuts down gracefully on them.
        tg.start_soon(http_server.serve)
        while not http_server.started:
            if http_server.should_exit:
                return
            await anyio.sleep(0.01)
        sys.stdout.write(f"listening on http://127.0.0.1:{port}/mcp\n")
        sys.stdout.flush()


def _exit_on_signal(signum: int, frame: Any) -> None:
    # stdio: nothing to flush or close. http: uvicorn handles SIGINT/SIGTERM while it serves (graceful
    # shutdown), then restores this handler and raises the signal again, so the exit status is 0.
    os._exit(0)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGINT, _exit_on_signal)
    if argv == ["stdio"]:
        anyio.run(run_stdio)
        return 0
    if len(argv) in (2, 3) and argv[0] == "http" and argv[1].isdigit() and argv[2:] in ([], ["--stateless"]):
        anyio.run(run_http, int(argv[1]), argv[2:] == ["--stateless"])
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
