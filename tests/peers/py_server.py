"""A small MCP server on the Python SDK (2.3), for interop tests: stdio, both eras.

Run: PYTHONPATH=tests/peers/python/site python3 tests/peers/py_server.py [--http PORT]
Offers tool `echo(text)`, tool `add(a, b)`, resource `mem://note`, prompt `greet(name)`.
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer("py-peer-server")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.resource("mem://note")
def note() -> str:
    """A fixed note."""
    return "a note from the Python SDK server"


@server.prompt()
def greet(name: str = "world") -> str:
    """Greet someone."""
    return f"Say hello to {name}."


if __name__ == "__main__":
    import sys

    # `--http PORT`: Streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio.
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
