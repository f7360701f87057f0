"""The Python SDK server of py_server.py over Streamable HTTP, plus a tool that reports progress.

Run: PYTHONPATH=tests/peers/python/site python3 tests/peers/py_http_server.py PORT
Serves http://127.0.0.1:PORT/mcp in both eras (sessions for 2025-11-25 and older, stateless
requests for 2026-07-28). Besides py_server.py's tools, resource and prompt it offers tool
`count(steps=3)`: progress i/steps (message "step i") about 50 ms apart, then "counted to N";
and `locate(region)`, answered "located in REGION", whose `region` is mirrored in the
`Mcp-Param-Region` header (`x-mcp-header`), which the SDK checks on 2026-07-28 calls.
"""

import os
import sys
from typing import Annotated

import anyio
from pydantic import Field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mcp.server.mcpserver import Context  # noqa: E402
from py_server import server  # noqa: E402


@server.tool()
async def count(ctx: Context, steps: int = 3) -> str:
    """Report progress `steps` times, then answer."""
    for i in range(1, steps + 1):
        await anyio.sleep(0.05)
        await ctx.report_progress(i, steps, f"step {i}")
    return f"counted to {steps}"


@server.tool()
async def locate(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    """Say where: the region comes in a header too."""
    return f"located in {region}"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: py_http_server.py PORT")
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
