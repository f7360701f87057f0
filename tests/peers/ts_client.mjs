#!/usr/bin/env node
// Drive one MCP session against a stdio server using the real TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in tests/peers/node/package-lock.json).
//
// Usage (after .ci/setup-peers):
//
//   node tests/peers/ts_client.mjs [--expect-version V] [--echo-tool NAME] [--echo-arg ARG]
//        [--echo-expect TEXT] [--timeout SECS] ( -- <server command...> | --url URL )
//
// --url runs the session over Streamable HTTP (the SDK's StreamableHTTPClientTransport) against
// URL instead of starting a stdio server.
//
// Steps (one output line each): initialize, tools/list + tools/call echo, resources/list +
// resources/read, prompts/list + prompts/get, ping. The last line is `TS_CLIENT_OK <protocolVersion>`
// on success; on any failure it prints `TS_CLIENT_FAIL <step>: <reason>` and exits 1 (2 for usage
// errors). The TS SDK only speaks the initialize handshake (it offers 2025-11-25).

import { createRequire } from 'node:module';

const PREFIX = 'TS_CLIENT';
const USAGE =
    'usage: node tests/peers/ts_client.mjs [--expect-version V] [--echo-tool NAME] [--echo-arg ARG] ' +
    '[--echo-expect TEXT] [--timeout SECS] ( -- <server command...> | --url URL )';

// The SDK lives in tests/peers/node/node_modules, which plain `import` would not search from here.
const require = createRequire(new URL('./node/package.json', import.meta.url));
let Client, StdioClientTransport, StreamableHTTPClientTransport;
try {
    ({ Client } = require('@modelcontextprotocol/sdk/client/index.js'));
    ({ StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js'));
    ({ StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js'));
} catch (err) {
    console.log(`${PREFIX}_FAIL import: ${err.message} (run .ci/setup-peers first)`);
    process.exit(1);
}
const { readFileSync } = require('node:fs');
const sdkVersion = JSON.parse(
    readFileSync(new URL('./node/node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url), 'utf8'),
).version;

class StepFailed extends Error {}

function usage(message) {
    console.log(`${PREFIX}_FAIL usage: ${message}`);
    console.error(USAGE);
    process.exit(2);
}

function parseArgs(argv) {
    const split = argv.indexOf('--');
    const own = split < 0 ? argv : argv.slice(0, split);
    const command = split < 0 ? [] : argv.slice(split + 1);
    const opts = {
        expectVersion: undefined,
        echoTool: 'echo',
        echoArg: 'text',
        echoExpect: undefined,
        timeout: 60,
        url: undefined,
        command,
    };
    const flags = {
        '--expect-version': 'expectVersion',
        '--echo-tool': 'echoTool',
        '--echo-arg': 'echoArg',
        '--echo-expect': 'echoExpect',
        '--timeout': 'timeout',
        '--url': 'url',
    };
    for (let i = 0; i < own.length; i++) {
        let [flag, value] = own[i].split(/=(.*)/s, 2);
        if (!(flag in flags)) usage(`unknown option ${own[i]}`);
        if (value === undefined) {
            if (i + 1 >= own.length) usage(`${flag} needs a value`);
            value = own[++i];
        }
        opts[flags[flag]] = value;
    }
    if (opts.url === undefined && command.length === 0) usage("give '--url URL' or '-- <server command...>'");
    if (opts.url !== undefined && command.length > 0) usage("give '--url URL' or a server command, not both");
    opts.timeout = Number(opts.timeout);
    if (!(opts.timeout > 0)) usage('--timeout must be a positive number of seconds');
    return opts;
}

const alive = (pid) => {
    try {
        process.kill(pid, 0);
        return true;
    } catch {
        return false;
    }
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Make sure the server process is gone: SIGTERM, then SIGKILL after 2 s.
async function stopChild(pid) {
    if (!pid || !alive(pid)) return;
    for (const [signal, waitMs] of [['SIGTERM', 2000], ['SIGKILL', 500]]) {
        try {
            process.kill(pid, signal);
        } catch {
            return;
        }
        for (let waited = 0; waited < waitMs; waited += 50) {
            await sleep(50);
            if (!alive(pid)) return;
        }
    }
}

const say = (step, text) => console.log(`${PREFIX} ${step}: ${text}`);

async function listAll(fetch, key) {
    const items = [];
    let cursor;
    for (let page = 0; page < 100; page++) {
        const result = await fetch(cursor === undefined ? {} : { cursor });
        items.push(...result[key]);
        cursor = result.nextCursor;
        if (!cursor) return items;
    }
    throw new Error('more than 100 pages');
}

const textOf = (content) =>
    (content ?? [])
        .filter((block) => block.type === 'text')
        .map((block) => block.text)
        .join('');

async function main() {
    const opts = parseArgs(process.argv.slice(2));
    const state = { step: 'connect' };
    const requestOptions = { timeout: opts.timeout * 1000 };

    const transport =
        opts.url !== undefined
            ? new StreamableHTTPClientTransport(new URL(opts.url))
            : new StdioClientTransport({
                  command: opts.command[0],
                  args: opts.command.slice(1),
                  // The SDK passes only a small allowlist of variables by default; tests want the full environment.
                  env: { ...process.env },
                  stderr: 'inherit',
              });
    // The client reports the negotiated version to transports that want it (HTTP ones use it for the
    // MCP-Protocol-Version header); observe it, keeping the transport's own hook.
    let negotiated;
    const ownHook = transport.setProtocolVersion?.bind(transport);
    transport.setProtocolVersion = (version) => {
        negotiated = version;
        ownHook?.(version);
    };
    // Remember the child's pid: on a failed connect the Client starts its own transport.close(),
    // which forgets the process at once, so a later close() could not stop it any more.
    let childPid = null;
    const start = transport.start.bind(transport);
    transport.start = async () => {
        await start();
        childPid = transport.pid;
    };
    const shutdown = async () => {
        await transport.close().catch(() => {});
        await stopChild(childPid);
    };
    const client = new Client({ name: 'mcpwire-ts-client', version: sdkVersion }, { capabilities: {} });

    const fail = (reason) => {
        throw new StepFailed(reason);
    };
    const timer = setTimeout(() => {
        state.timedOut = true;
        console.log(`${PREFIX}_FAIL ${state.step}: no answer within ${opts.timeout} s (session timeout)`);
        shutdown().finally(() => process.exit(1));
    }, opts.timeout * 1000);

    try {
        await client.connect(transport, requestOptions);
        const info = client.getServerVersion();
        const serverName = info ? `${info.name} ${info.version}` : '(no serverInfo)';
        say(state.step, `protocolVersion=${negotiated} server=${serverName}`);
        if (opts.expectVersion !== undefined && negotiated !== opts.expectVersion) {
            fail(`negotiated protocolVersion ${negotiated}, expected ${opts.expectVersion}`);
        }

        state.step = 'tools';
        const tools = await listAll((p) => client.listTools(p, requestOptions), 'tools');
        const names = tools.map((t) => t.name);
        if (!names.includes(opts.echoTool)) {
            fail(`no tool named '${opts.echoTool}' in tools/list ${JSON.stringify(names)}`);
        }
        const sent = 'hello from typescript';
        const expected = opts.echoExpect ?? sent;
        const result = await client.callTool(
            { name: opts.echoTool, arguments: { [opts.echoArg]: sent } },
            undefined,
            requestOptions,
        );
        const got = textOf(result.content);
        if (result.isError) fail(`tools/call ${opts.echoTool} returned isError: ${JSON.stringify(got)}`);
        if (got !== expected) {
            fail(`tools/call ${opts.echoTool} returned text ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`);
        }
        say(state.step, `${tools.length} tools listed; ${opts.echoTool}(${opts.echoArg}=${JSON.stringify(sent)}) -> ${JSON.stringify(got)}`);

        state.step = 'resources';
        const resources = await listAll((p) => client.listResources(p, requestOptions), 'resources');
        if (resources.length === 0) fail('resources/list returned no resources');
        const uri = resources[0].uri;
        const read = await client.readResource({ uri }, requestOptions);
        const contents = read.contents ?? [];
        if (contents.length === 0 || !contents.some((c) => (c.text ?? c.blob ?? '').length > 0)) {
            fail(`resources/read ${uri} returned empty contents`);
        }
        say(state.step, `${resources.length} resources listed; read ${uri} -> ${contents.length} content item(s)`);

        state.step = 'prompts';
        const prompts = await listAll((p) => client.listPrompts(p, requestOptions), 'prompts');
        if (prompts.length === 0) fail('prompts/list returned no prompts');
        const prompt = prompts[0];
        const promptArgs = Object.fromEntries((prompt.arguments ?? []).filter((a) => a.required).map((a) => [a.name, 'x']));
        const gotPrompt = await client.getPrompt({ name: prompt.name, arguments: promptArgs }, requestOptions);
        if (!gotPrompt.messages?.length) fail(`prompts/get ${prompt.name} returned no messages`);
        say(state.step, `${prompts.length} prompts listed; get ${prompt.name}(${JSON.stringify(promptArgs)}) -> ${gotPrompt.messages.length} message(s)`);

        state.step = 'ping';
        await client.ping(requestOptions);
        say(state.step, 'ok');

        state.step = 'close';
        await client.close();
    } catch (err) {
        clearTimeout(timer);
        if (state.timedOut) return; // the timer already reported and is exiting
        const raw = err instanceof StepFailed ? err.message : `${err?.name ?? 'Error'}: ${err?.message ?? err}`;
        const reason = raw.replace(/\s+/g, ' ');
        console.log(`${PREFIX}_FAIL ${state.step}: ${reason}`);
        await shutdown();
        process.exit(1);
    }
    clearTimeout(timer);
    console.log(`${PREFIX}_OK ${negotiated}`);
    process.exit(0);
}

main();
