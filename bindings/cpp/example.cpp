// A C++ client and server, each an mcpw::connection, talking through two in-memory pipes:
// the run loop of any mcpwire host (drain events, then bytes, then the deadline), with the
// transport reduced to a std::string per direction.
#include "mcpwire.hpp"

#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

// Moves what `from` lends into `to`, reporting each write as consumed.
bool deliver(mcpw::connection &from, mcpw::connection &to, std::uint64_t now_ns) {
    bool moved = false;
    for (auto t = from.transmit(); !t.empty(); t = from.transmit()) {
        to.handle_input(now_ns, t.data, t.size);
        from.consume(t.size);
        moved = true;
    }
    return moved;
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

} // namespace

int main() {
    try {
        mcpw::config server_config(mcpw::role::server, "cpp-example-server", MCPWIRE_VERSION);
        server_config.capabilities(R"({"tools":{}})");
        mcpw::config client_config(mcpw::role::client, "cpp-example-client", MCPWIRE_VERSION);

        std::uint64_t now = 0; // simulated time, in ns: time is data
        mcpw::connection server(server_config, now);
        mcpw::connection client(client_config, now);

        bool asked = false, done = false;
        // Answers refused for now because the output is full (the client is behind in
        // reading): given again once bytes have moved, never dropped.
        std::vector<std::pair<mcpw::owned_id, std::string>> held;
        auto answer = [&](const mcpw::owned_id &id, std::string result) {
            try {
                server.respond(id.get(), result);
            } catch (const mcpw::error &err) {
                if (err.code() != MCPW_ERR_OUTPUT_FULL) throw;
                held.emplace_back(id, std::move(result));
            }
        };
        while (!done) {
            // 1. events: the server answers requests (and what it held), the client reacts
            // to answers.
            auto waiting = std::exchange(held, {});
            for (auto &[id, result] : waiting) answer(id, std::move(result));
            while (auto ev = server.poll_event()) {
                if (ev->kind() != MCPW_EVENT_REQUEST) continue;
                // What a client sends never ends the server: a refused answer is reported.
                try {
                    const mcpw::owned_id id(ev->id());
                    if (ev->method() == "tools/call") {
                        answer(id, echo(ev->params()));
                    } else {
                        answer(id, R"({"tools":[{"name":"echo",)"
                                   R"("inputSchema":{"type":"object"}}]})");
                    }
                } catch (const mcpw::error &err) {
                    std::cerr << "answer not given: " << err.what() << "\n";
                }
            }
            while (auto ev = client.poll_event()) {
                switch (ev->kind()) {
                case MCPW_EVENT_READY:
                    std::cout << "ready: " << ev->version() << "\n";
                    client.request(now, "tools/call",
                                   R"({"name":"echo","arguments":{"text":"hello from C++"}})");
                    asked = true;
                    break;
                case MCPW_EVENT_RESPONSE:
                    std::cout << "echo answered: " << ev->result() << "\n";
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
        std::cout << (done ? "closed cleanly" : "stalled") << "\n";
        return done ? 0 : 1;
    } catch (const mcpw::error &e) {
        std::cerr << "mcpwire: " << e.what() << " (" << e.code() << ")\n";
        return 1;
    }
}
