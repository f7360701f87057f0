// A C++ client and server, each an mcpw::connection, talking through two in-memory pipes:
// the run loop of any mcpwire host (drain events, then bytes, then the deadline), with the
// transport reduced to a std::string per direction.
#include "mcpwire.hpp"

#include <iostream>
#include <string>

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

std::string text(std::string_view json) { return std::string(json); }

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
        while (!done) {
            // 1. events: the server answers requests, the client reacts to answers.
            while (auto ev = server.poll_event()) {
                if (ev->kind() == MCPW_EVENT_REQUEST && ev->method() == "tools/call") {
                    auto args = mcpw::json_get(ev->params().value_or("{}"), "arguments");
                    auto said = mcpw::json_get(args.value_or("{}"), "text").value_or("\"\"");
                    server.respond(ev->id(), R"({"content":[{"type":"text","text":)" +
                                                 text(said) + "}]}");
                } else if (ev->kind() == MCPW_EVENT_REQUEST) {
                    server.respond(ev->id(), R"({"tools":[{"name":"echo","inputSchema":{"type":"object"}}]})");
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
