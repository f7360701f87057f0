#!/usr/bin/env node
// End-to-end bench peer: tools `echo` and `add` on the TypeScript SDK 2.x
// (@modelcontextprotocol/server + its Node adapter @modelcontextprotocol/node, pinned in
// tests/peers/node/package-lock.json; run .ci/setup-peers first).
//
//   node benches/e2e/servers/ts2/server.mjs stdio
//   node benches/e2e/servers/ts2/server.mjs http PORT [--stateless]
//
// stdio: `serveStdio` (both eras: the first message picks the 2025 handshake or 2026-07-28).
// http (default): one endpoint serving both eras. 2025-era traffic (no per-request `_meta` envelope,
//        as decided by the SDK's `isLegacyRequest`) gets Mcp-Session-Id sessions on the SDK's
//        WebStandardStreamableHTTPServerTransport with plain JSON bodies (enableJsonResponse);
//        2026-07-28 requests go to `createMcpHandler` (stateless, JSON bodies).
// http --stateless: `createMcpHandler` alone, the SDK's 2.x serving entry: 2026-07-28 requests, and
//        2025-era requests through its stateless legacy fallback (no sessions).
// On http, prints `listening on http://127.0.0.1:PORT/mcp` once it accepts connections.
// One process, no logging; SIGTERM/SIGINT exit with status 0.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';

// The SDK lives in tests/peers/node/node_modules, which a plain `import` would not search from here.
// Everything is loaded through `require` so the SDK and its Node adapter share one (CommonJS) copy.
const require = createRequire(new URL('../../../../tests/peers/node/package.json', import.meta.url));
const { McpServer, WebStandardStreamableHTTPServerTransport, createMcpHandler, isLegacyRequest } =
    require('@modelcontextprotocol/server');
const { serveStdio } = require('@modelcontextprotocol/server/stdio');
const { toNodeHandler } = require('@modelcontextprotocol/node');
const { z } = require('zod');

const USAGE = 'usage: server.mjs stdio | http PORT [--stateless]';

// Built once; every server instance (one per connection, session or stateless request) reuses them.
const echoInput = z.object({ text: z.string() });
const addInput = z.object({ a: z.number(), b: z.number() });

/** The SDK's server factory: a fresh McpServer with the two tools. */
function buildServer() {
    const server = new McpServer({ name: 'bench-ts2', version: '0.0.0' });
    server.registerTool('echo', { description: 'Return the text unchanged.', inputSchema: echoInput }, ({ text }) => ({
        content: [{ type: 'text', text }],
    }));
    server.registerTool('add', { description: 'Add two numbers.', inputSchema: addInput }, ({ a, b }) => ({
        content: [{ type: 'text', text: String(a + b) }],
    }));
    return server;
}

function onSignals(handler) {
    for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, handler);
}

function runStdio() {
    serveStdio(buildServer);
    // The transport closes itself at stdin EOF; with nothing else holding the event loop the
    // process then exits by itself.
    onSignals(() => process.exit(0));
}

function jsonError(status, code, message) {
    return Response.json({ jsonrpc: '2.0', error: { code, message }, id: null }, { status });
}

/** A fetch-shaped handler for 2025-era traffic with Mcp-Session-Id sessions. */
function sessionHandler() {
    /** Mcp-Session-Id -> transport of that session (one McpServer per session). */
    const sessions = new Map();
    return async (request) => {
        const sessionId = request.headers.get('mcp-session-id');
        if (sessionId !== null) {
            const transport = sessions.get(sessionId);
            if (transport === undefined) return jsonError(404, -32001, 'Session not found');
            return transport.handleRequest(request);
        }
        if (request.method !== 'POST') return jsonError(400, -32000, 'Bad Request: no session');
        // No session header: this must open a session (the transport answers 400 to anything but
        // `initialize`; a pair that never initializes is simply dropped).
        const transport = new WebStandardStreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            enableJsonResponse: true,
            onsessioninitialized: (id) => {
                sessions.set(id, transport);
            },
        });
        transport.onclose = () => {
            if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
        };
        await buildServer().connect(transport);
        return transport.handleRequest(request);
    };
}

async function runHttp(port, stateless) {
    let fetchHandler;
    if (stateless) {
        fetchHandler = createMcpHandler(buildServer);
    } else {
        // The composition the SDK documents for keeping sessionful 2025 serving next to the modern
        // entry (see `isLegacyRequest` in @modelcontextprotocol/server's createMcpHandler .d.mts).
        const modern = createMcpHandler(buildServer, { legacy: 'reject' });
        const legacy = sessionHandler();
        fetchHandler = {
            fetch: async (request, options) =>
                (await isLegacyRequest(request)) ? legacy(request) : modern.fetch(request, options),
        };
    }
    const nodeHandler = toNodeHandler(fetchHandler);

    const httpServer = createServer((req, res) => {
        const path = req.url.split('?', 1)[0];
        if (path !== '/mcp') {
            res.writeHead(404, { 'Content-Type': 'application/json' });
            res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Not found' }, id: null }));
            return;
        }
        nodeHandler(req, res);
    });

    onSignals(() => {
        httpServer.close();
        httpServer.closeAllConnections();
        process.exit(0);
    });

    await new Promise((resolve, reject) => {
        httpServer.once('error', reject);
        httpServer.listen(port, '127.0.0.1', resolve);
    });
    process.stdout.write(`listening on http://127.0.0.1:${port}/mcp\n`);
}

const [mode, portArg, ...rest] = process.argv.slice(2);
if (mode === 'stdio' && portArg === undefined) {
    runStdio();
} else if (
    mode === 'http' &&
    /^\d+$/.test(portArg ?? '') &&
    (rest.length === 0 || (rest.length === 1 && rest[0] === '--stateless'))
) {
    await runHttp(Number(portArg), rest.length === 1);
} else {
    console.error(USAGE);
    process.exit(2);
}
