#!/usr/bin/env bash
# Check the end-to-end bench peer servers (README.md here) against their contract: start each server
# in each mode, talk to it through a pipe (stdio) or curl (HTTP) and compare the answers.
#
#   bash benches/e2e/servers/check-peers.sh [--load] [ts1|ts2|python]...
#
# Default: all three servers. Per server: stdio (handshake + echo + add, then 64 pipelined calls, both
# with stdin closed right after the last request), HTTP sessions (initialize, initialized -> 202, echo,
# add; 1000 more sessions on the same server), HTTP stateless 2026-07-28 where the server supports it,
# and exit status 0 on SIGTERM. --load adds a 3 s `wrk -t1 -c8` run of tools/call echo per HTTP mode.
# Needs .ci/setup-peers to have run, curl and python3 (wrk for --load). Prints one line per check and
# exits 0 when all passed.
set -uo pipefail
cd "$(dirname "$0")/../../.."

LOAD=0
SERVERS=()
for arg in "$@"; do
    case $arg in
        --load) LOAD=1 ;;
        ts1 | ts2 | python) SERVERS+=("$arg") ;;
        *) echo "usage: $0 [--load] [ts1|ts2|python]..." >&2; exit 2 ;;
    esac
done
((${#SERVERS[@]})) || SERVERS=(ts1 ts2 python)
export PYTHONPATH=tests/peers/python/site${PYTHONPATH:+:$PYTHONPATH}

TMP=$(mktemp -d)
SPID=
cleanup() {
    [[ -n $SPID ]] && kill -KILL "$SPID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

PASSED=0
FAILED=0
report() { # report NAME VERDICT ("ok" or "ok (note)" passes)
    if [[ $2 == ok* ]]; then
        PASSED=$((PASSED + 1)); echo "PASS $1${2#ok}"
    else
        FAILED=$((FAILED + 1)); echo "FAIL $1: $2"
    fi
}

# Reads JSON-RPC messages (one per line, or SSE `data:` lines) on stdin and checks the answers:
# arguments are pairs ID TEXT; TEXT `*` accepts any result, otherwise the result must be exactly
# content [{type: text, text: TEXT}] and not an error. Prints "ok" or what is wrong.
cat >"$TMP/check.py" <<'EOF'
import json
import sys

want = dict(zip(sys.argv[1::2], sys.argv[2::2]))
got = {}
for line in sys.stdin:
    line = line.strip()
    if line.startswith("data:"):
        line = line[5:].strip()
    if not line.startswith("{"):
        continue
    try:
        msg = json.loads(line)
    except ValueError:
        print(f"not JSON: {line[:200]}")
        sys.exit(1)
    if "id" in msg:
        got[str(msg["id"])] = msg
bad = []
for rid, text in want.items():
    msg = got.get(rid)
    if msg is None:
        bad.append(f"no answer to id {rid}")
        continue
    result = msg.get("result")
    if result is None:
        err = msg.get("error")
        bad.append(f"id {rid}: error {err}")
    elif text != "*" and (result.get("isError") or result.get("content") != [{"type": "text", "text": text}]):
        bad.append(f"id {rid}: {json.dumps(result)[:300]}")
print("; ".join(bad) if bad else "ok")
EOF
check() { python3 "$TMP/check.py" "$@"; }

INIT='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}'
INITIALIZED='{"jsonrpc":"2.0","method":"notifications/initialized"}'
ECHO='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}'
ADD='{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}'
MODERN='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"}}}}'
MODERN_HEADERS=(-H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo')

set_cmd() {
    case $1 in
        ts1 | ts2) CMD=(node "benches/e2e/servers/$1/server.mjs") ;;
        python) CMD=(python3 benches/e2e/servers/python/server.py) ;;
    esac
}

# ------------------------------------------------------------------------------------------ stdio
check_stdio() {
    local name=$1 out rc verdict
    out=$(printf '%s\n' "$INIT" "$INITIALIZED" "$ECHO" "$ADD" | timeout 10 "${CMD[@]}" stdio 2>"$TMP/stderr")
    rc=$?
    verdict=$(printf '%s\n' "$out" | check 0 '*' 1 'hello, world' 2 5)
    ((rc == 0)) || verdict="$verdict; exit status $rc (124 = still running 10 s after EOF)"
    [[ -s $TMP/stderr ]] && verdict="$verdict; stderr: $(head -c 300 "$TMP/stderr")"
    report "$name stdio: initialize, echo, add, exit at EOF" "$verdict"

    # 64 calls written at once, stdin closed right after them.
    local lines=("$INIT" "$INITIALIZED") want=(0 '*') i
    for ((i = 100; i < 164; i++)); do
        if ((i % 2)); then
            lines+=("{\"jsonrpc\":\"2.0\",\"id\":$i,\"method\":\"tools/call\",\"params\":{\"name\":\"add\",\"arguments\":{\"a\":$i,\"b\":0.5}}}")
            want+=("$i" "$i.5")
        else
            lines+=("{\"jsonrpc\":\"2.0\",\"id\":$i,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"m$i\"}}}")
            want+=("$i" "m$i")
        fi
    done
    out=$(printf '%s\n' "${lines[@]}" | timeout 20 "${CMD[@]}" stdio 2>"$TMP/stderr")
    rc=$?
    verdict=$(printf '%s\n' "$out" | check "${want[@]}")
    ((rc == 0)) || verdict="$verdict; exit status $rc"
    report "$name stdio: 64 pipelined calls" "$verdict"

    # SIGTERM while stdin is still open (once the server has answered initialize).
    local pid
    rm -f "$TMP/stdin"
    mkfifo "$TMP/stdin"
    : >"$TMP/stdout"
    "${CMD[@]}" stdio <"$TMP/stdin" >"$TMP/stdout" 2>"$TMP/stderr" &
    pid=$!
    exec 3>"$TMP/stdin"
    printf '%s\n' "$INIT" >&3
    for ((i = 0; i < 100; i++)); do
        [[ -s $TMP/stdout ]] && break
        sleep 0.1
    done
    kill -TERM "$pid"
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid"
        verdict="still running 5 s after SIGTERM"
    else
        wait "$pid"
        rc=$?
        verdict=$( ((rc == 0)) && echo ok || echo "exit status $rc")
    fi
    exec 3>&-
    report "$name stdio: exits on SIGTERM with stdin open" "$verdict"
}

# ------------------------------------------------------------------------------------------ HTTP
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_http NAME [--stateless]: sets SPID, PORT, URL; reports the listening line.
start_http() {
    local name=$1 mode=${2:-} i
    PORT=$(free_port)
    URL="http://127.0.0.1:$PORT/mcp"
    : >"$TMP/stdout"
    "${CMD[@]}" http "$PORT" ${mode:+"$mode"} >"$TMP/stdout" 2>"$TMP/stderr" &
    SPID=$!
    for ((i = 0; i < 150; i++)); do
        [[ -s $TMP/stdout ]] && break
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    local line
    line=$(cat "$TMP/stdout")
    if [[ $line == "listening on $URL" ]]; then
        report "$name http ${mode:-sessions}: prints the listening line" ok
        return 0
    fi
    report "$name http ${mode:-sessions}: prints the listening line" "got '$line'; stderr: $(head -c 300 "$TMP/stderr")"
    kill -KILL "$SPID" 2>/dev/null
    SPID=
    return 1
}

stop_http() {
    local name=$1 i rc
    kill -TERM "$SPID"
    for ((i = 0; i < 50; i++)); do
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$SPID" 2>/dev/null; then
        kill -KILL "$SPID"
        report "$name: exits on SIGTERM" "still running 5 s after SIGTERM"
    else
        wait "$SPID"
        rc=$?
        report "$name: exits on SIGTERM" "$( ((rc == 0)) && echo ok || echo "exit status $rc")"
    fi
    [[ -s $TMP/stderr ]] && echo "     (stderr: $(head -c 300 "$TMP/stderr"))"
    SPID=
}

# post [curl args]... : POST to $URL; body in $TMP/body, headers in $TMP/headers; prints the status.
post() {
    curl -sS -o "$TMP/body" -D "$TMP/headers" -w '%{http_code}' \
        -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' "$@" "$URL"
}
content_type() { grep -i '^content-type:' "$TMP/headers" | head -1 | tr -d '\r' | cut -d' ' -f2-; }

check_sessions() {
    local name=$1 code sid verdict
    start_http "$name" || return
    code=$(post -d "$INIT")
    sid=$(grep -i '^mcp-session-id:' "$TMP/headers" | tr -d '\r' | cut -d' ' -f2)
    verdict=$(check 0 '*' <"$TMP/body")
    [[ $code == 200 && -n $sid ]] || verdict="status $code, Mcp-Session-Id '$sid'; $verdict"
    report "$name http sessions: initialize -> Mcp-Session-Id" "$verdict"
    local session=(-H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25')
    code=$(post "${session[@]}" -d "$INITIALIZED")
    report "$name http sessions: notifications/initialized -> 202" "$([[ $code == 202 ]] && echo ok || echo "status $code")"
    code=$(post "${session[@]}" -d "$ECHO")
    verdict=$(check 1 'hello, world' <"$TMP/body")
    [[ $code == 200 ]] || verdict="status $code; $verdict"
    report "$name http sessions: tools/call echo" "$verdict ($(content_type))"
    echo "     body: $(head -c 300 "$TMP/body")"
    code=$(post "${session[@]}" -d "$ADD")
    verdict=$(check 2 5 <"$TMP/body")
    [[ $code == 200 ]] || verdict="status $code; $verdict"
    report "$name http sessions: tools/call add" "$verdict ($(content_type))"
    echo "     body: $(head -c 300 "$TMP/body")"

    # Informational: does the default server also take a stateless 2026-07-28 request?
    code=$(post "${MODERN_HEADERS[@]}" -d "$MODERN")
    if [[ $(check 1 'hello, world' <"$TMP/body") == ok ]]; then
        echo "     info: this default-mode server also answers the stateless 2026-07-28 request"
    else
        echo "     info: 2026-07-28 request on the default server -> $code $(head -c 200 "$TMP/body")"
    fi

    # 1000 more sessions on the same server, then calls in the first and the last of them.
    local many
    many=$(URL=$URL INIT=$INIT INITIALIZED=$INITIALIZED ECHO=$ECHO python3 - <<'EOF'
import http.client, json, os, time, urllib.parse
url = urllib.parse.urlsplit(os.environ["URL"])
conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
def post(body, headers=None):
    conn.request("POST", url.path, body, {**base, **(headers or {})})
    resp = conn.getresponse()
    return resp.status, resp.getheader("mcp-session-id"), resp.read()
start = time.monotonic()
sids = []
for _ in range(1000):
    status, sid, _ = post(os.environ["INIT"])
    if status != 200 or not sid:
        print(f"initialize #{len(sids)} -> status {status}, session {sid}")
        raise SystemExit
    sids.append(sid)
    post(os.environ["INITIALIZED"], {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
elapsed = time.monotonic() - start
for sid in (sids[0], sids[-1]):
    status, _, body = post(os.environ["ECHO"], {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    if status != 200 or b"hello, world" not in body:
        print(f"echo in session {sid} -> {status} {body[:200]!r}")
        raise SystemExit
print(f"ok ({len(set(sids))} distinct sessions opened in {elapsed:.1f} s)")
EOF
)
    report "$name http sessions: 1000 more sessions open and answer" "$many"

    if ((LOAD)); then
        load "$name http sessions" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25' -- "$ECHO"
    fi
    stop_http "$name http sessions"
}

check_stateless() {
    local name=$1 code verdict
    if [[ $name == ts1 ]]; then
        "${CMD[@]}" http "$(free_port)" --stateless >/dev/null 2>"$TMP/stderr"
        echo "     info: ts1 has no stateless mode: '--stateless' -> exit $?: $(head -c 200 "$TMP/stderr")"
        return
    fi
    start_http "$name" --stateless || return
    code=$(post "${MODERN_HEADERS[@]}" -d "$MODERN")
    verdict=$(check 1 'hello, world' <"$TMP/body")
    [[ $code == 200 ]] || verdict="status $code; $verdict"
    report "$name http --stateless: 2026-07-28 tools/call echo" "$verdict ($(content_type))"
    echo "     body: $(head -c 300 "$TMP/body")"
    if ((LOAD)); then
        load "$name http --stateless" "${MODERN_HEADERS[@]}" -- "$MODERN"
    fi
    stop_http "$name http --stateless"
}

# load NAME [-H header]... -- BODY: 3 s of wrk -t1 -c8 posting BODY to $URL.
load() {
    local name=$1 headers=() body
    shift
    while [[ $1 != -- ]]; do headers+=("$2"); shift 2; done
    body=$2
    {
        echo 'wrk.method = "POST"'
        printf 'wrk.body = [==[%s]==]\n' "$body"
        echo 'wrk.headers["Content-Type"] = "application/json"'
        echo 'wrk.headers["Accept"] = "application/json, text/event-stream"'
        local h
        for h in "${headers[@]}"; do
            printf 'wrk.headers["%s"] = "%s"\n' "${h%%: *}" "${h#*: }"
        done
    } >"$TMP/load.lua"
    local out rps non2xx
    out=$(wrk -t1 -c8 -d3s -s "$TMP/load.lua" "$URL" 2>&1)
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
    if [[ -n $rps && -z $non2xx ]]; then
        report "$name: wrk -t1 -c8 -d3s tools/call echo" "ok ($rps requests/s)"
    else
        report "$name: wrk -t1 -c8 -d3s tools/call echo" "$(tr '\n' ' ' <<<"$out" | head -c 400)"
    fi
}

for name in "${SERVERS[@]}"; do
    echo "== $name"
    set_cmd "$name"
    check_stdio "$name"
    check_sessions "$name"
    check_stateless "$name"
done
echo "== $PASSED passed, $FAILED failed"
((FAILED == 0))
