-- The HTTP load of .ci/bench-e2e for wrk: POSTs of tools/call, alternating `echo {text}` and
-- `add {a: 2, b: 3}`, each with its own id, and a check of every answer (HTTP 200, a result
-- with the expected text: the echoed text, or "5").
--
--   BENCH_MODE=stateless  2026-07-28 stateless requests: MCP-Protocol-Version, Mcp-Method and
--                         Mcp-Name headers, the protocol metadata in params._meta.
--   BENCH_MODE=session    2025-11-25 requests in the session BENCH_SESSION (Mcp-Session-Id).
--
-- done() prints one line: RESULT requests=... duration_us=... p50_us=... p99_us=... bad=...
-- sockerr=... (bad: answers that were not HTTP 200 with the expected text).

local mode = os.getenv("BENCH_MODE") or "stateless"
local session = os.getenv("BENCH_SESSION") or ""

local meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
   '"io.modelcontextprotocol/clientCapabilities":{},' ..
   '"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"1"}}'

local calls = {
   { name = "echo", args = '{"text":"hello, world"}', want = '"text":"hello, world"' },
   { name = "add", args = '{"a":2,"b":3}', want = '"text":"5"' },
}

local function headers(name)
   local h = {
      ["Content-Type"] = "application/json",
      ["Accept"] = "application/json, text/event-stream",
   }
   if mode == "stateless" then
      h["MCP-Protocol-Version"] = "2026-07-28"
      h["Mcp-Method"] = "tools/call"
      h["Mcp-Name"] = name
   else
      h["MCP-Protocol-Version"] = "2025-11-25"
      h["Mcp-Session-Id"] = session
   end
   return h
end

local function body(id, c)
   local params = '{"name":"' .. c.name .. '","arguments":' .. c.args
   if mode == "stateless" then
      params = params .. ',' .. meta
   end
   return '{"jsonrpc":"2.0","id":' .. id .. ',"method":"tools/call","params":' .. params .. '}}'
end

-- Ids are unique across threads: thread k sends k, k + 64, k + 128, ...
local threads = {}

function setup(thread)
   thread:set("tid", #threads)
   table.insert(threads, thread)
end

local counter = 0
-- wrk's response() does not say which request it answers (a thread drives several
-- connections), so an answer must be a result carrying one of the two expected texts.
bad = 0

function request()
   counter = counter + 1
   local c = calls[counter % 2 + 1]
   return wrk.format("POST", nil, headers(c.name), body(counter * 64 + tid, c))
end

function response(status, hdrs, b)
   if status ~= 200 or not string.find(b, '"result"', 1, true) or string.find(b, '"isError":true', 1, true)
      or not (string.find(b, calls[1].want, 1, true) or string.find(b, calls[2].want, 1, true)) then
      bad = bad + 1
   end
end

function done(summary, latency, requests)
   local nbad = 0
   for _, t in ipairs(threads) do
      nbad = nbad + t:get("bad")
   end
   local e = summary.errors
   io.write(string.format("RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d bad=%d sockerr=%d\n",
      summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), nbad,
      e.connect + e.read + e.write + e.timeout))
end
