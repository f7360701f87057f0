// A C++ client and server, each an mcpw::connection, talking through two in-memory pipes:
// the run loop of any mcpwire host (drain events, then bytes, then the deadline), with the
// transport reduced to the bytes each side lends.
#include "mcpwire.hpp"

#include <algorithm>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

// Moves one piece of what `from` lends into `to`, reporting it as consumed (the rest is lent
// again next time). A piece is at most to.input_piece() bytes, and the loop drains events
// between pieces: a peer that sends many requests at once gets each one answered, where fed
// whole they would pass the bound on requests in flight and get "too many requests" errors.
bool deliver(mcpw::connection &from, mcpw::connection &to, std::uint64_t now_ns) {
    const auto t = from.transmit();
    if (t.empty()) return false;
    const std::size_t piece = std::min(t.size, to.input_piece());
    to.handle_input(now_ns, t.data, piece);
    from.consume(piece);
    return true;
}

// The result of an `echo` call: its text argument, or a tool error when it has none that is a
// string (json_get throws for text that is not an object, `"arguments":5`: a client's
// mistake, answered).
std::string echo(std::optional<std::string_view> params) {
    try {
        auto args = mcpw::json_get(params.value_or("{}"), "arguments");
        auto said = mcpw::json_get(args.value_or("{}"), "text");
        if (said && !said->empty() && said->front() == '"')
            return R"({"content":[{"type":"text","text":)" + std::string(*said) + "}]}";
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
            return {0, R"({"tools":[{"name":"echo","inputSchema":{"type":"object"}}]})"};
        }
        if (method == "tools/call") {
            // The name as text (escapes decoded); json_string throws when it is no string.
            const auto name = mcpw::json_get(params.value_or("{}"), "name");
            const std::string tool = name ? mcpw::json_string(*name) : "";
            if (tool == "echo") return {0, echo(params)};
            return {MCPW_JSONRPC_INVALID_PARAMS, "Unknown tool: " + tool};
        }
    } catch (const mcpw::error &) {
        return {MCPW_JSONRPC_INVALID_PARAMS, "Invalid params"}; // params or name of a wrong type
    }
    return {MCPW_JSONRPC_METHOD_NOT_FOUND, "Method not found"};
}

// An answer the engine refused for now (MCPW_ERR_OUTPUT_FULL: the client is behind in
// reading), given again once bytes have moved: backpressure, not a lost answer.
struct held_answer {
    mcpw::owned_id id;
    reply answer;
};

// Gives an answer, or holds it in `held` while the output is full.
void answer(mcpw::connection &server, held_answer a, std::vector<held_answer> &held) {
    try {
        if (a.answer.code == 0) {
            server.respond(a.id.get(), a.answer.text);
        } else {
            server.respond_error(a.id.get(), a.answer.code, a.answer.text);
        }
    } catch (const mcpw::error &err) {
        if (err.code() != MCPW_ERR_OUTPUT_FULL) throw;
        held.push_back(std::move(a));
    }
}

// Gives the held answers again: those still refused for a full output stay held, and one
// refused for good (its client left) is reported and dropped. (One whose request the client
// cancelled meanwhile is taken, and not sent.)
void give_held(mcpw::connection &server, std::vector<held_answer> &held) {
    std::vector<held_answer> still;
    for (auto &h : held) {
        try {
            answer(server, std::move(h), still);
        } catch (const mcpw::error &err) {
            std::cerr << "answer not given: " << err.what() << "\n";
        }
    }
    held = std::move(still);
}

// Answers every request waiting. What a client sends never ends the server: an answer the
// engine refuses for another reason than a full output is reported, and the loop goes on.
void serve(mcpw::connection &server, std::vector<held_answer> &held) {
    while (auto ev = server.poll_event()) {
        if (ev->kind() != MCPW_EVENT_REQUEST) continue;
        try {
            answer(server, {mcpw::owned_id(ev->id()), reply_to(ev->method(), ev->params())},
                   held);
        } catch (const mcpw::error &err) {
            std::cerr << "answer not given: " << err.what() << "\n";
        }
    }
}

// What the client asks, all at once: a call, the list of tools, and three mistakes.
const char *const requests[][2] = {
    {"tools/call", R"({"name":"echo","arguments":{"text":"hello from C++"}})"},
    {"tools/list", "{}"},
    {"tools/call", R"({"name":"nope"})"},     // an unknown tool
    {"foo/bar", "{}"},                        // an unknown method
    {"tools/list", R"({"cursor":"page-2"})"}, // a cursor the server never gave
};

} // namespace

int main() {
    try {
        mcpw::config server_config(mcpw::role::server, "cpp-example-server", MCPWIRE_VERSION);
        server_config.capabilities(R"({"tools":{}})");
        // Two of the client's requests at most in flight at once (the default is 256), so
        // that its five sent together show why input goes in a piece at a time (`deliver`).
        // Real servers keep the default.
        mcpw_limits limits = server_config.limits();
        limits.max_inbound_in_flight = 2;
        server_config.limits(limits);
        mcpw::config client_config(mcpw::role::client, "cpp-example-client", MCPWIRE_VERSION);

        std::uint64_t now = 0; // simulated time, in ns: time is data
        mcpw::connection server(server_config, now);
        mcpw::connection client(client_config, now);

        bool asked = false, done = false;
        std::size_t answered = 0;
        std::vector<held_answer> held; // answers waiting for room in the server's output
        while (!done) {
            // 1. events: the server answers what it held, then the new requests; the client
            // reacts to answers.
            give_held(server, held);
            serve(server, held);
            while (auto ev = client.poll_event()) {
                switch (ev->kind()) {
                case MCPW_EVENT_READY:
                    std::cout << "ready: " << ev->version() << "\n";
                    for (const auto &r : requests) client.request(now, r[0], r[1]);
                    asked = true;
                    break;
                case MCPW_EVENT_RESPONSE:
                case MCPW_EVENT_ERROR:
                    if (ev->kind() == MCPW_EVENT_RESPONSE) {
                        std::cout << "answered: " << ev->result() << "\n";
                    } else {
                        std::cout << "error " << ev->code() << ": " << ev->message().value_or("")
                                  << "\n";
                    }
                    if (++answered == std::size(requests))
                        client.close(now, std::chrono::milliseconds(100));
                    break;
                case MCPW_EVENT_CLOSED:
                    done = true;
                    break;
                default:
                    break;
                }
            }
            // 2. bytes, both ways; 3. time moves on to the next deadline if nothing moved.
            bool moved = deliver(client, server, now) | deliver(server, client, now);
            if (!moved && !done) {
                // The earliest deadline of either side; each fires its own timers (a call to
                // one that has none due does nothing).
                auto deadline = client.poll_timeout();
                if (auto other = server.poll_timeout(); other && (!deadline || *other < *deadline))
                    deadline = other;
                if (!deadline || !asked) break;
                now = *deadline;
                client.handle_timeout(now);
                server.handle_timeout(now);
            }
            now += 1000;
        }
        // 4. After CLOSED the client takes no commands, but it may still hold bytes, and they
        // must be written before it is dropped: the cancellations its close sends for requests
        // still unanswered at the grace's end (none here, as every request had its answer,
        // but a host copied from this one may close with some in flight). The server reads
        // them and writes what it still holds (a closed client ignores it), until both sides
        // have nothing left. Then the client's end of the pipe closes: the server reads end
        // of input, and closes too.
        bool server_closed = false;
        if (done) {
            for (;;) {
                give_held(server, held);
                serve(server, held);
                while (client.poll_event()) {
                }
                if (!(deliver(client, server, now) | deliver(server, client, now))) break;
            }
            server.handle_eof(now);
            serve(server, held); // its CLOSED
            server_closed = server.state() == MCPW_STATE_CLOSED;
        }
        // (An answer still held now never went out: not a clean end.)
        const bool clean = done && server_closed && held.empty();
        std::cout << (clean ? "closed cleanly" : done ? "the server did not close" : "stalled")
                  << "\n";
        return clean ? 0 : 1;
    } catch (const mcpw::error &e) {
        std::cerr << "mcpwire: " << e.what() << " (" << e.code() << ")\n";
        return 1;
    }
}
