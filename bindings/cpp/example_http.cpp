// A C++ MCP client and server over Streamable HTTP, in memory: mcpw::http_client says which
// HTTP requests to make, mcpw::http_server answers them, and the "network" in between is a
// function call, and time is a simulated clock that jumps to the next deadline when nothing
// else moves. A real host puts an HTTP client library (libcurl) on one side and an HTTP server
// library (libmicrohttpd) on the other, waits in poll(2) for a socket or that deadline, and
// tells the client of an exchange that failed (handle_error); the loop stays the same, timers
// included. Timers fire every round once due, whatever else moved: the server here lets go
// of a long-running call's stream, and its answer only arrives because the client's timer
// resumes that stream; and a tool that reports progress every round but never finishes ends
// only because the client's timeout for it fires while the progress keeps coming.
#include "mcpwire.hpp"

#include <unistd.h> // getentropy

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

// An SSE response being read: the client's exchange and the server's stream.
struct open_stream {
    std::uint64_t exchange;
    std::uint64_t stream;
};

// The result of an `echo` call: its text argument, or a tool error when it has none that is a
// string (json_get throws for text that is not an object, `"arguments":5`: a client's
// mistake, answered).
std::string echo(std::optional<std::string_view> params) {
    try {
        auto args = mcpw::json_get(params.value_or("{}"), "arguments");
        auto text = mcpw::json_get(args.value_or("{}"), "text");
        if (text && !text->empty() && text->front() == '"')
            return R"({"content":[{"type":"text","text":)" + std::string(*text) + "}]}";
    } catch (const mcpw::error &) {
    }
    return R"({"content":[{"type":"text","text":"echo needs a string text"}],)"
           R"("isError":true})";
}

// What the server answers to one request: a result (JSON), or a JSON-RPC error when `code`
// is not 0 (`text` is then its message).
struct reply {
    std::int64_t code;
    std::string text;
};

// The server application. A client's mistake gets the error the spec names for it: an
// unknown method -32601, an unknown tool or a cursor this server never gave -32602.
reply reply_to(std::string_view method, std::optional<std::string_view> params) {
    try {
        if (method == "tools/list") {
            // The whole list fits on one page, so any cursor is unknown.
            if (mcpw::json_get(params.value_or("{}"), "cursor"))
                return {MCPW_JSONRPC_INVALID_PARAMS, "Invalid params: unknown cursor"};
            return {0, R"({"tools":[{"name":"echo","inputSchema":{"type":"object"}},)"
                       R"({"name":"slow","inputSchema":{"type":"object"}}]})"};
        }
        if (method == "tools/call") {
            // The name as text (escapes decoded); json_string throws when it is no string.
            const auto name = mcpw::json_get(params.value_or("{}"), "name");
            const std::string tool = name ? mcpw::json_string(*name) : "";
            if (tool == "echo") return {0, echo(params)};
            if (tool == "slow") return {0, ""}; // never answered: see tick
            return {MCPW_JSONRPC_INVALID_PARAMS, "Unknown tool: " + tool};
        }
    } catch (const mcpw::error &) {
        return {MCPW_JSONRPC_INVALID_PARAMS, "Invalid params"}; // params or name of a wrong type
    }
    return {MCPW_JSONRPC_METHOD_NOT_FOUND, "Method not found"};
}

// An answer the engine refused for now (MCPW_ERR_OUTPUT_FULL: its client is behind in
// reading), given again once the streams have moved: backpressure, not a lost answer.
struct held_answer {
    std::uint64_t key;
    mcpw::owned_id id;
    reply answer;
};

// Gives an answer, or holds it in `held` while the output is full.
void answer(mcpw::connection_view conn, held_answer a, std::vector<held_answer> &held) {
    try {
        if (a.answer.code == 0) {
            conn.respond(a.id.get(), a.answer.text);
        } else {
            conn.respond_error(a.id.get(), a.answer.code, a.answer.text);
        }
    } catch (const mcpw::error &err) {
        if (err.code() != MCPW_ERR_OUTPUT_FULL) throw;
        held.push_back(std::move(a));
    }
}

// A call of the `slow` tool: it works for good, reporting progress every round (see tick),
// until its client cancels it.
struct slow_call {
    std::uint64_t key;
    mcpw::owned_id id;
    double done = 0;
};

// What the server application keeps between calls: the answers held for a full output,
// whether it has let go of a call's stream yet (see serve), and the slow call at work.
struct server_state {
    std::vector<held_answer> held;
    bool polled = false;
    std::optional<slow_call> slow;
};

// Gives the held answers again; those still refused for a full output stay held, and one
// whose request is gone (its client cancelled it, or left) is reported and dropped.
void give_held(mcpw::http_server &server, std::vector<held_answer> &held) {
    std::vector<held_answer> still;
    for (auto &h : held) {
        try {
            answer(server.conn(h.key), std::move(h), still);
        } catch (const mcpw::error &err) {
            std::cerr << "answer not given: " << err.what() << "\n";
        }
    }
    held = std::move(still);
}

// Answers every request waiting; a tool call that asked for progress gets one report first.
// Nothing a client sends ends the server: an answer refused while the output is full is held
// for later (`held`), and another command the engine refuses (no progress token, a request
// the client cancelled meanwhile) is reported and the loop goes on. Call it after every call
// into the server that may make events: a request, a stream's end, its timers.
void serve(mcpw::http_server &server, server_state &state) {
    while (auto e = server.poll_event()) {
        if (e->ev.kind() == MCPW_EVENT_PEER_CANCELLED) {
            // The client gave up on a request: stop working on it (an answer would not be
            // sent anyway).
            if (state.slow && state.slow->key == e->key &&
                state.slow->id == mcpw::owned_id(e->ev.id())) {
                std::cout << "server: the client cancelled the slow call\n";
                state.slow.reset();
            }
            continue;
        }
        if (e->ev.kind() != MCPW_EVENT_REQUEST) continue;
        // Copies of the id and the text: a command (progress, here) may end the event's views
        // on an mcpw::connection, and the server's next call ends them (and e->conn) here.
        held_answer a{e->key, mcpw::owned_id(e->ev.id()),
                      reply_to(e->ev.method(), e->ev.params())};
        const bool tool_call = e->ev.method() == "tools/call" && a.answer.code == 0;
        if (tool_call && a.answer.text.empty()) {
            state.slow = slow_call{a.key, std::move(a.id)}; // the slow tool: tick works on it
            continue;
        }
        try {
            if (tool_call) {
                try {
                    e->conn.progress(a.id.get(), 1, 2.0, "echoing");
                } catch (const mcpw::error &) {
                    // Progress is a courtesy: a call without a progress token (or whose client
                    // is behind in reading) gets none.
                }
            }
            if (tool_call && !state.polled) {
                // A long-running tool holds no HTTP connection while it works (2025-11-25,
                // SEP-1699): the call's stream ends now with the server's `retry` delay, what
                // the call sends afterwards (its answer) waits in the session's event store,
                // and the client comes back for it with Last-Event-ID once that delay is over.
                // The first call does so here (its answer is ready at once, for brevity), so
                // the example ends only if the client's timer (run_timers) brings it back.
                state.polled = server.close_stream_for_polling(a.key, a.id.get());
                if (state.polled) std::cout << "server: let go of a call's stream\n";
            }
            // (A view lent again: close_stream_for_polling, a call on the server, ended e's.)
            answer(server.conn(a.key), std::move(a), state.held);
        } catch (const mcpw::error &err) {
            std::cerr << "answer not given: " << err.what() << "\n";
        }
    }
}

// Carries every request the client wants made to the server, and what comes back to the
// client: a JSON body at once, an SSE stream as its bytes arrive. Returns whether anything
// moved.
bool carry(mcpw::http_client &client, mcpw::http_server &server,
           std::vector<open_stream> &streams, server_state &state, std::uint64_t now) {
    bool moved = false;
    while (auto action = client.poll_action()) {
        moved = true;
        const std::uint64_t exchange = action->exchange();
        if (action->is_abort()) {
            // The client gave up on this exchange: report nothing more for it, and close its
            // response (a real host closes the HTTP request; the server hears of it, and in
            // 2026-07-28 that cancels the request: an event, drained like any other).
            for (auto it = streams.begin(); it != streams.end(); ++it) {
                if (it->exchange == exchange) {
                    server.stream_closed(now, it->stream);
                    streams.erase(it);
                    serve(server, state);
                    break;
                }
            }
            continue;
        }
        std::vector<mcpw_http_header> headers(action->headers().begin(), action->headers().end());
        headers.push_back(mcpw::header("Host", "localhost:8080")); // what libcurl would add
        auto response =
            server.handle_request(now, action->method(), "/mcp", headers, action->body());
        if (auto stream = response.stream()) {
            serve(server, state); // answer what can be answered now...
            response = server.settle(*stream); // ...then a JSON body, or still a stream
        }
        client.handle_response(now, exchange, response.status(), response.headers());
        if (auto stream = response.stream()) {
            streams.push_back({exchange, *stream});
        } else {
            client.handle_body(now, exchange, response.body());
            client.handle_end(now, exchange);
            serve(server, state);
        }
    }
    for (auto it = streams.begin(); it != streams.end();) {
        auto chunk = server.poll_stream(it->stream);
        if (chunk.size > 0) {
            client.handle_body(now, it->exchange, chunk.bytes());
            server.consume_stream(it->stream, chunk.size);
            moved = true;
        }
        if (!chunk.open || chunk.finished) {
            client.handle_end(now, it->exchange);
            it = streams.erase(it);
            moved = true;
        } else {
            ++it;
        }
    }
    // The streams moved: room for what was held.
    const std::size_t held_before = state.held.size();
    give_held(server, state.held);
    return moved || state.held.size() != held_before;
}

// The slow tool's work for one round: a progress report on its call. One the output has no
// room for now is skipped (its client is behind in reading); once the call is gone (its
// client cancelled it, or left), the work stops.
void tick(mcpw::http_server &server, server_state &state) {
    if (!state.slow) return;
    try {
        state.slow->done += 1;
        server.conn(state.slow->key).progress(state.slow->id.get(), state.slow->done,
                                              std::nullopt, "still working");
    } catch (const mcpw::error &err) {
        if (err.code() != MCPW_ERR_OUTPUT_FULL) state.slow.reset();
    }
}

// Each side whose deadline has come fires its timers (the client's: a stream's resumption
// after the server's retry delay, request timeouts, a close's grace; the server's:
// keep-alives, session expiry), every round, whatever else moved. When nothing moved, time
// first jumps to the earlier of the two deadlines: a real host's poll(2) wakes at that
// deadline; this simulated clock jumps to it. Without this step those never happen: here,
// the call whose stream the server let go would never be answered, and the slow call, whose
// progress moves something every round, would never time out. False when neither side has
// a deadline.
bool run_timers(mcpw::http_client &client, mcpw::http_server &server, server_state &state,
                std::uint64_t &now, bool jump) {
    const auto client_due = client.poll_timeout();
    const auto server_due = server.poll_timeout();
    if (!client_due && !server_due) return false;
    const std::uint64_t due =
        std::min(client_due.value_or(UINT64_MAX), server_due.value_or(UINT64_MAX));
    if (jump) now = std::max(now, due);
    if (client_due && *client_due <= now) client.handle_timeout(now);
    if (server_due && *server_due <= now) {
        server.handle_timeout(now);
        serve(server, state); // what its timers made (a session expired, say)
    }
    return true;
}

// Whether an event ends one of our requests: its answer, or another way it ended (timed
// out, failed, abandoned, an answer that is not one, ...), each of which the application
// must hear of, or it waits for good.
bool ends_request(mcpw_event_kind kind) {
    switch (kind) {
    case MCPW_EVENT_RESPONSE:
    case MCPW_EVENT_ERROR:
    case MCPW_EVENT_TIMED_OUT:
    case MCPW_EVENT_ABANDONED:
    case MCPW_EVENT_INPUT_REQUIRED:
    case MCPW_EVENT_INVALID_RESPONSE:
    case MCPW_EVENT_FAILED:
    case MCPW_EVENT_TASK_CREATED:
    case MCPW_EVENT_URL_ELICITATION_REQUIRED:
        return true;
    default:
        return false;
    }
}

// Prints a result: the list of tools, or an echo's text. A result of a shape this client
// does not expect (json_get and json_at throw on a value of another type: `"content":5`) is
// printed as it came, not the end of the program: the session still ends cleanly.
void print_result(std::string_view result) {
    try {
        if (auto tools = mcpw::json_get(result, "tools")) {
            std::cout << "tools: " << *tools << "\n";
            return;
        }
        auto content = mcpw::json_get(result, "content").value_or("[]");
        auto first = mcpw::json_at(content, 0).value_or("{}");
        std::cout << "echo: " << mcpw::json_get(first, "text").value_or("?") << "\n";
    } catch (const mcpw::error &) {
        std::cout << "unexpected result: " << result << "\n";
    }
}

} // namespace

int main() {
    try {
        mcpw::config server_config(mcpw::role::server, "cpp-http-server", MCPWIRE_VERSION);
        server_config.capabilities(R"({"tools":{}})");
        // A small output bound, so that the answer after a progress report waits for its
        // client to read (held, then given: see `answer`). Real servers keep the default.
        mcpw_limits limits = server_config.limits();
        limits.max_buffered_output = 64;
        server_config.limits(limits);
        mcpw::http_server_options options;
        options.endpoint = "/mcp";
        // Session ids come from the system's secure source. getentropy gives at most 256
        // bytes a call; it must not throw (std::random_device may, when it cannot open its
        // device), and without a secure source there is no safe session id to make.
        options.random = [](std::uint8_t *buf, std::size_t len) {
            for (std::size_t done = 0; done < len;) {
                std::size_t n = std::min<std::size_t>(len - done, 256);
                if (getentropy(buf + done, n) != 0) {
                    std::perror("getentropy");
                    std::abort();
                }
                done += n;
            }
        };
        mcpw::http_server server(server_config, std::move(options));

        mcpw::config client_config(mcpw::role::client, "cpp-http-client", MCPWIRE_VERSION);
        client_config.era(mcpw::client_era::legacy); // initialize, then an Mcp-Session-Id
        std::uint64_t now = 0;                       // simulated time, in ns
        mcpw::http_client client(client_config, now);

        std::vector<open_stream> streams;
        server_state state;
        // Seven requests: six answered with a result or an error, and the slow call, which
        // times out. Any other outcome is a failure, but the session is still ended below.
        int ended = 0;
        bool failed = false;
        std::int64_t slow = -1;
        for (int round = 0; round < 100 && ended < 7; round++) {
            tick(server, state);
            bool moved = carry(client, server, streams, state, now);
            while (auto ev = client.poll_event()) {
                moved = true;
                if (ends_request(ev->kind())) ended++;
                if (ev->kind() == MCPW_EVENT_READY) {
                    std::cout << "ready: " << ev->version() << ", session "
                              << client.session_id().value_or("?") << "\n";
                    // Two calls, one asking for progress; the list of tools; three mistakes.
                    mcpw_request_options progress{};
                    progress.progress = 1;
                    mcpw::connection_view conn = client.conn();
                    conn.request(
                        now, "tools/call",
                        R"({"name":"echo","arguments":{"text":"hello from C++ over HTTP"}})",
                        progress);
                    conn.request(now, "tools/call",
                                 R"({"name":"echo","arguments":{"text":"and again"}})");
                    conn.request(now, "tools/list");
                    conn.request(now, "tools/call", R"({"name":"nope"})"); // an unknown tool
                    conn.request(now, "foo/bar");                          // an unknown method
                    conn.request(now, "tools/list", R"({"cursor":"page-2"})"); // never given
                    // A tool that never finishes: its progress keeps coming, and the client
                    // gives up on it after 20 ms (and tells the server, which stops).
                    mcpw_request_options patience{};
                    patience.timeout_ms = 20;
                    patience.progress = 1;
                    slow = conn.request(now, "tools/call", R"({"name":"slow"})", patience);
                } else if (ev->kind() == MCPW_EVENT_PROGRESS) {
                    // (The slow call's reports, one a round, are not printed.)
                    if (ev->request() != slow)
                        std::cout << "progress: " << ev->progress() << "/"
                                  << ev->total().value_or(0) << " "
                                  << ev->message().value_or("") << "\n";
                } else if (ev->kind() == MCPW_EVENT_RESPONSE) {
                    print_result(ev->result());
                } else if (ev->kind() == MCPW_EVENT_ERROR) {
                    std::cout << "error " << ev->code() << ": " << ev->message().value_or("")
                              << "\n";
                } else if (ev->kind() == MCPW_EVENT_TIMED_OUT && ev->request() == slow) {
                    std::cout << "timed out: the slow call\n";
                } else if (ends_request(ev->kind())) {
                    std::cerr << "request " << ev->request() << " ended without an answer"
                              << " (event " << ev->kind() << ")\n";
                    failed = true;
                } else if (ev->kind() == MCPW_EVENT_CLOSED) {
                    std::cerr << "the connection closed\n";
                    return 1;
                }
            }
            // Due timers fire every round; when nothing moved, time jumps to the next
            // deadline first. Nothing moving and no deadline at all is a stall.
            if (!run_timers(client, server, state, now, !moved) && !moved) break;
            now += 1000000; // 1 ms per round
        }
        if (ended < 7) {
            std::cerr << "no answer\n";
            failed = true;
        }
        // Every call answered, that whose stream the server let go included: the client came
        // back for it after the retry delay, through its timer. (Without a stream let go, the
        // example would not show that.)
        if (!state.polled) {
            std::cerr << "the server let go of no call's stream\n";
            failed = true;
        }

        // A clean end: close the connection (its requests in flight, none here, would get
        // 100 ms to be answered, then be cancelled), and once it is closed DELETE the session
        // on the server. The client is driven, timers included, until the close is done, the
        // DELETE has gone and been answered (is_ending_session) and nothing it sent is still
        // unheard (the close's cancellations, which the DELETE waits for), within a bound of
        // our own: a server that never answers cannot hold the exit.
        client.conn().close(now, std::chrono::milliseconds(100));
        bool closed = false;
        const auto session_ended = [&] {
            return closed && !client.is_ending_session() && !client.has_unheard();
        };
        for (int round = 0; round < 50 && !session_ended(); round++) {
            tick(server, state);
            bool moved = carry(client, server, streams, state, now);
            while (auto ev = client.poll_event()) {
                moved = true;
                // A request of the server's now will not be served: refused, so that the
                // close, which waits for our answers too, need not wait out its grace.
                // (Not once closed: the engine answered it as it closed.)
                if (ev->kind() == MCPW_EVENT_REQUEST) {
                    // (The id is copied first: the event borrows from the client.)
                    mcpw::owned_id id(ev->id());
                    auto conn = client.conn();
                    if (conn.state() != MCPW_STATE_CLOSED)
                        conn.respond_error(id.get(), MCPW_JSONRPC_INTERNAL_ERROR,
                                           "the client is closing");
                    continue;
                }
                // (Other events now: what the close ended, say.)
                if (ev->kind() != MCPW_EVENT_CLOSED) continue;
                closed = true;
                // False without a session: there would be nothing to DELETE, and this client
                // had one (session_id above).
                if (!client.end_session()) {
                    std::cerr << "no session to end\n";
                    return 1;
                }
            }
            if (!run_timers(client, server, state, now, !moved) && !moved) break;
            now += 1000000;
        }
        if (!session_ended()) {
            std::cerr << "the session did not end cleanly\n";
            return 1;
        }
        std::cout << "sessions left on the server: " << server.counts().sessions << "\n";
        return server.counts().sessions == 0 && !failed ? 0 : 1;
    } catch (const mcpw::error &e) {
        std::cerr << "mcpwire: " << e.what() << " (" << e.code() << ")\n";
        return 1;
    }
}
