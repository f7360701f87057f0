-- The load of .ci/go-bench for wrk: POSTs of tools/call of the echo tool, each with its own
-- id, and a check of every answer (HTTP 200 and the echoed text in the body).
--
--   BENCH_MODE=stateless  2026-07-28 stateless requests: MCP-Protocol-Version, Mcp-Method and
--                         Mcp-Name headers, the protocol metadata in params._meta (the bytes
--                         of bench.ModernCallBody).
--   BENCH_MODE=session    handshake-era requests in the session BENCH_SESSION (Mcp-Session-Id,
--                         MCP-Protocol-Version: 2025-11-25; the bytes of bench.CallLine).
--
-- done() prints one line: RESULT requests=... duration_us=... p50_us=... p99_us=... bad=...
-- sockerr=... (bad: answers that were not HTTP 200 with the echoed text).

local mode = os.getenv("BENCH_MODE") or "stateless"
local session = os.getenv("BENCH_SESSION") or ""
local text = "hello, world"

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
if mode == "stateless" then
   wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
   wrk.headers["Mcp-Method"] = "tools/call"
   wrk.headers["Mcp-Name"] = "echo"
else
   wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
   wrk.headers["Mcp-Session-Id"] = session
end

local function body(id)
   if mode == "stateless" then
      return '{"jsonrpc":"2.0","id":' .. id ..
         ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"' .. text .. '"},' ..
         '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
         '"io.modelcontextprotocol/clientCapabilities":{},' ..
         '"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"}}}}'
   end
   return '{"jsonrpc":"2.0","id":' .. id ..
      ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"' .. text .. '"}}}'
end

-- Thread bookkeeping: ids are unique across threads (thread k sends k+1, k+1+64, ...).
local threads = {}

function setup(thread)
   thread:set("tid", #threads)
   table.insert(threads, thread)
end

local counter = 0
bad = 0

function request()
   counter = counter + 1
   return wrk.format(nil, nil, nil, body(counter * 64 + tid))
end

local want = '"text":"' .. text .. '"'

function response(status, headers, b)
   if status ~= 200 or not string.find(b, want, 1, true) then
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
