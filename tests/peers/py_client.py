#!/usr/bin/env python3
"""Drive one MCP session against a stdio server using the real MCP Python SDK (mcp==2.3.0).

Usage (after .ci/setup-peers):

    PYTHONPATH=tests/peers/python/site python3 tests/peers/py_client.py \
        [--mode legacy|auto] [--expect-version V] \
        [--echo-tool NAME] [--echo-arg ARG] [--echo-expect TEXT] [--timeout SECS] \
        ( -- <server command...> | --url URL )

--url runs the session over Streamable HTTP against URL instead of starting a stdio server.

Steps (one output line each): connect/negotiate, tools/list + tools/call echo, resources/list +
resources/read, prompts/list + prompts/get, ping (skipped on 2026-07-28, which has no ping).
The last line is `PY_CLIENT_OK <protocolVersion>` on success; on any failure the script prints
`PY_CLIENT_FAIL <step>: <reason>` and exits 1 (2 for usage errors).

--mode legacy forces the `initialize` handshake (SDK `Client(..., mode="legacy")`);
--mode auto (the default, as in the SDK) probes `server/discover` first and falls back to
`initialize` when the server answers the probe with an error (it waits up to 10 s for an answer).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

try:
    import anyio
    import mcp
    from mcp import Client, StdioServerParameters
    from mcp_types import Implementation
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
except ImportError as exc:  # pragma: no cover - environment problem
    print(
        f"PY_CLIENT_FAIL import: {exc} (run .ci/setup-peers and set PYTHONPATH=tests/peers/python/site)",
        flush=True,
    )
    sys.exit(1)

PREFIX = "PY_CLIENT"


class StepFailed(Exception):
    def __init__(self, step: str, reason: str) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.reason = reason


def say(step: str, text: str) -> None:
    print(f"{PREFIX} {step}: {text}", flush=True)


def fail(step: str, reason: str) -> NoReturn:
    raise StepFailed(step, reason)


def parse_args(argv: list[str]) -> argparse.Namespace:
    if "--" not in argv and "--url" not in argv:
        print(f"{PREFIX}_FAIL usage: missing '--' before the server command (or --url)", flush=True)
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if "--" in argv:
        split = argv.index("--")
        own, command = argv[:split], argv[split + 1 :]
    else:
        own, command = argv, []
    parser = argparse.ArgumentParser(description="MCP Python SDK client session against a stdio server")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="auto")
    parser.add_argument("--expect-version", default=None, help="fail unless this protocol version is negotiated")
    parser.add_argument("--echo-tool", default="echo", help="name of the echo tool (default: echo)")
    parser.add_argument("--echo-arg", default="text", help="name of the echo tool's string argument (default: text)")
    parser.add_argument(
        "--echo-expect",
        default=None,
        help="exact text the echo call must return (default: the text sent, 'hello from python')",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="whole-session timeout in seconds (default 60)")
    parser.add_argument("--url", default=None, help="a Streamable HTTP server's URL instead of a command")
    args = parser.parse_args(own)
    if not command and args.url is None:
        parser.error("no server command after '--'")
    args.command = command
    return args


async def list_all(fetch: Any, attr: str) -> list[Any]:
    """Follow nextCursor pagination of a list method."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        page = await fetch(cursor=cursor)
        items.extend(getattr(page, attr))
        cursor = page.next_cursor
        if not cursor:
            return items
    raise RuntimeError("more than 100 pages")


def text_of(content: list[Any]) -> str:
    return "".join(block.text for block in content if getattr(block, "type", None) == "text")


async def session(args: argparse.Namespace) -> str:
    if args.url is not None:
        params: Any = args.url
    else:
        params = StdioServerParameters(
            command=args.command[0],
            args=args.command[1:],
            # The SDK passes only a small allowlist of variables by default; tests want the full environment.
            env=dict(os.environ),
        )
    step = "connect"
    try:
        async with Client(
            params,
            mode=args.mode,
            client_info=Implementation(name="mcpwire-py-client", version=mcp_version()),
            read_timeout_seconds=30.0,
        ) as client:
            version = client.protocol_version
            info = client.server_info
            server_name = f"{info.name} {info.version}" if info is not None else "(no serverInfo)"
            say(step, f"mode={args.mode} protocolVersion={version} server={server_name}")
            if args.expect_version is not None and version != args.expect_version:
                fail(step, f"negotiated protocolVersion {version}, expected {args.expect_version}")

            step = "tools"
            tools = await list_all(lambda cursor: client.list_tools(cursor=cursor), "tools")
            names = [t.name for t in tools]
            if args.echo_tool not in names:
                fail(step, f"no tool named {args.echo_tool!r} in tools/list {names}")
            sent = "hello from python"
            expected = sent if args.echo_expect is None else args.echo_expect
            result = await client.call_tool(args.echo_tool, {args.echo_arg: sent})
            got = text_of(result.content)
            if result.is_error:
                fail(step, f"tools/call {args.echo_tool} returned isError: {got!r}")
            if got != expected:
                fail(step, f"tools/call {args.echo_tool} returned text {got!r}, expected {expected!r}")
            say(step, f"{len(tools)} tools listed; {args.echo_tool}({args.echo_arg}={sent!r}) -> {got!r}")

            step = "resources"
            resources = await list_all(lambda cursor: client.list_resources(cursor=cursor), "resources")
            if not resources:
                fail(step, "resources/list returned no resources")
            uri = str(resources[0].uri)
            read = await client.read_resource(uri)
            sizes = [len(getattr(c, "text", None) or getattr(c, "blob", None) or "") for c in read.contents]
            if not read.contents or not any(sizes):
                fail(step, f"resources/read {uri} returned empty contents")
            say(step, f"{len(resources)} resources listed; read {uri} -> {len(read.contents)} content item(s)")

            step = "prompts"
            prompts = await list_all(lambda cursor: client.list_prompts(cursor=cursor), "prompts")
            if not prompts:
                fail(step, "prompts/list returned no prompts")
            prompt = prompts[0]
            prompt_args = {a.name: "x" for a in (prompt.arguments or []) if a.required}
            got_prompt = await client.get_prompt(prompt.name, prompt_args)
            if not got_prompt.messages:
                fail(step, f"prompts/get {prompt.name} returned no messages")
            say(
                step,
                f"{len(prompts)} prompts listed; get {prompt.name}({prompt_args}) -> "
                f"{len(got_prompt.messages)} message(s)",
            )

            step = "ping"
            if version in MODERN_PROTOCOL_VERSIONS:
                say(step, f"skipped ({version} has no ping)")
            else:
                # Client.send_ping is marked deprecated (it is gone in 2026-07-28); the session method is not.
                await client.session.send_ping()
                say(step, "ok")
            step = "close"
        return version
    except BaseException as exc:  # noqa: BLE001 - report anything as a failure of the current step
        leaves = flatten(exc)
        for leaf in leaves:
            if isinstance(leaf, StepFailed):
                raise leaf from None  # our own check failed (possibly wrapped by the SDK's task group)
        cancelled = anyio.get_cancelled_exc_class()
        if any(isinstance(leaf, (KeyboardInterrupt, SystemExit, cancelled)) for leaf in leaves):
            args.step = step  # a cancellation lets fail_after turn it into TimeoutError
            raise
        raise StepFailed(step, describe(exc)) from exc


def flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in flatten(e)]
    return [exc]


def mcp_version() -> str:
    try:
        from importlib.metadata import version

        return version("mcp")
    except Exception:  # noqa: BLE001
        return "unknown"


def describe(exc: BaseException) -> str:
    """Flatten exception groups (anyio task groups wrap errors) into one readable line."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    text = str(exc) or repr(exc)
    return f"{type(exc).__name__}: {text}"


def main() -> int:
    args = parse_args(sys.argv[1:])
    args.step = "connect"

    async def run() -> str:
        with anyio.fail_after(args.timeout):
            return await session(args)

    try:
        version = anyio.run(run)
    except StepFailed as exc:
        print(f"{PREFIX}_FAIL {exc.step}: {exc.reason}", flush=True)
        return 1
    except TimeoutError:
        print(f"{PREFIX}_FAIL {args.step}: no answer within {args.timeout} s (session timeout)", flush=True)
        return 1
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        print(f"{PREFIX}_FAIL session: {describe(exc)}", flush=True)
        return 1
    print(f"{PREFIX}_OK {version}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
