#!/usr/bin/env node
// End-to-end bench peer: tools `echo` and `add` on the TypeScript SDK 1.x
// (@modelcontextprotocol/sdk, pinned in tests/peers/node/package-lock.json; run .ci/setup-peers first).
//
//   node benches/e2e/servers/ts1/server.mjs stdio
//   node benches/e2e/servers/ts1/server.mjs http PORT
//
// stdio: newline-delimited JSON-RPC on stdin/stdout; exits when stdin ends and the answers are out.
// http:  Streamable HTTP on http://127.0.0.1:PORT/mcp with Mcp-Session-Id sessions (2025 handshake era;
//        SDK 1.x has no 2026-07-28 stateless era) and plain JSON response bodies (enableJsonResponse).
//        Prints `listening on http://127.0.0.1:PORT/mcp` once it accepts connections.
// One process, no logging; SIGTERM/SIGINT exit with status 0.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';

// The SDK lives in tests/peers/node/node_modules, which a plain `import` would not search from here.
const require = createRequire(new URL('../../../../tests/peers/node/package.json', import.meta.url));
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { z } = require('zod');

const USAGE = 'usage: server.mjs stdio | http PORT';

// The zod shapes below list as {"type":"object","properties":{...},"required":[...]} in tools/list.
const echoInput = z.object({ text: z.string() });
const addInput = z.object({ a: z.number(), b: z.number() });

function buildServer() {
    const server = new McpServer({ name: 'bench-ts1', version: '0.0.0' });
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

async function runStdio() {
    const server = buildServer();
    await server.connect(new StdioServerTransport());
    // The transport stops reading at EOF; with nothing else holding the event loop the process
    // then exits by itself once every pending answer has been written.
    onSignals(() => process.exit(0));
}

function sendJsonError(res, status, code, message) {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

async function runHttp(port) {
    /** Mcp-Session-Id -> transport of that session (one McpServer per session, as the SDK requires). */
    const sessions = new Map();

    const httpServer = createServer(async (req, res) => {
        const path = req.url.split('?', 1)[0];
        if (path !== '/mcp') return sendJsonError(res, 404, -32000, 'Not found');
        try {
            const sessionId = req.headers['mcp-session-id'];
            if (sessionId !== undefined) {
                const transport = sessions.get(sessionId);
                if (transport === undefined) return sendJsonError(res, 404, -32001, 'Session not found');
                return await transport.handleRequest(req, res);
            }
            if (req.method !== 'POST') return sendJsonError(res, 400, -32000, 'Bad Request: no session');
            // No session header: this must open a session (the transport answers 400 to anything but
            // `initialize`; a pair that never initializes is simply dropped).
            const transport = new StreamableHTTPServerTransport({
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
            await transport.handleRequest(req, res);
        } catch {
            if (!res.headersSent) sendJsonError(res, 500, -32603, 'Internal server error');
            else res.end();
        }
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
    await runStdio();
} else if (mode === 'http' && /^\d+$/.test(portArg ?? '') && rest.length === 0) {
    await runHttp(Number(portArg));
} else if (mode === 'http' && rest.includes('--stateless')) {
    console.error('server.mjs: TypeScript SDK 1.x does not speak the stateless 2026-07-28 era; use sessions');
    process.exit(2);
} else {
    console.error(USAGE);
    process.exit(2);
}
