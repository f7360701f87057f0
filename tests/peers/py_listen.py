#!/usr/bin/env python3
"""Open a 2026-07-28 `subscriptions/listen` stream with the real MCP Python SDK (mcp==2.3.0)
against mcpwire's demo server, and check that the server grants only its own resources.

Usage (after .ci/setup-peers):

    PYTHONPATH=tests/peers/python/site python3 tests/peers/py_listen.py \
        ( -- <server command...> | --url URL )

Steps: connect in the stateless era; `Client.listen` for two resources, one the server's
(`demo://readme`) and one not (`file:///etc/passwd`); the acknowledgement must honour only the
first. Then the `touch` tool updates both: the first event on the stream must be the granted
one (the SDK admits any resource update once some URI was honoured, so a leak would show).
Prints `PY_LISTEN_OK <honoured URIs>` on success, `PY_LISTEN_FAIL <reason>` and exit 1
otherwise.
"""

from __future__ import annotations

import os
import sys
from typing import Any

try:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.shared.subscriptions import ResourceUpdated
except ImportError as exc:  # pragma: no cover - environment problem
    print(f"PY_LISTEN_FAIL import: {exc} (run .ci/setup-peers, set PYTHONPATH)", flush=True)
    sys.exit(1)

OURS = "demo://readme"
FOREIGN = "file:///etc/passwd"


async def run(target: Any) -> str:
    async with Client(target, mode="auto", read_timeout_seconds=20.0) as client:
        if client.protocol_version != "2026-07-28":
            raise RuntimeError(f"negotiated {client.protocol_version}, expected 2026-07-28")
        async with client.listen(resource_subscriptions=[FOREIGN, OURS]) as sub:
            honoured = list(sub.honored.resource_subscriptions or [])
            if honoured != [OURS]:
                raise RuntimeError(f"the server honoured {honoured}, expected only {OURS}")
            for uri in (FOREIGN, OURS):
                await client.call_tool("touch", {"uri": uri})
            with anyio.fail_after(10):
                event = await sub.__anext__()
            if event != ResourceUpdated(uri=OURS):
                raise RuntimeError(f"the first event was {event}, expected the update of {OURS}")
        return " ".join(honoured)


def describe(exc: BaseException) -> str:
    """One readable line, with the errors that anyio's task groups wrap."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--url"] and len(argv) == 2:
        target: Any = argv[1]
    elif argv[:1] == ["--"] and len(argv) > 1:
        target = StdioServerParameters(command=argv[1], args=argv[2:], env=dict(os.environ))
    else:
        print("usage: py_listen.py ( -- <server command...> | --url URL )", file=sys.stderr)
        return 2
    try:
        honoured = anyio.run(run, target)
    except BaseException as exc:  # noqa: BLE001 - report anything as a failure
        print(f"PY_LISTEN_FAIL {describe(exc)}", flush=True)
        return 1
    print(f"PY_LISTEN_OK {honoured}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
