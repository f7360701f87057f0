// A C++ program outside the tree that uses the installed mcpwire.hpp: a server answers
// initialize. .ci/packaging builds it against the installation with pkg-config, then runs it.
#include <mcpwire.hpp>

#include <cstdio>
#include <string>

int main() {
    try {
        mcpw::config cfg(mcpw::role::server, "consumer", "1.0");
        cfg.capabilities(R"({"tools":{}})");
        mcpw::connection conn(cfg, 0);
        conn.handle_input(1, R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":)"
                             R"({"protocolVersion":"2025-11-25","capabilities":{},)"
                             R"("clientInfo":{"name":"c","version":"1"}}})"
                             "\n");
        while (conn.poll_event()) {
        }
        std::string out;
        for (auto t = conn.transmit(); !t.empty(); t = conn.transmit()) {
            out.append(reinterpret_cast<const char *>(t.data), t.size);
            conn.consume(t.size);
        }
        if (out.find(R"("protocolVersion":"2025-11-25")") == std::string::npos) {
            std::fprintf(stderr, "no initialize answer: %s\n", out.c_str());
            return 1;
        }
        std::puts("ok");
        return 0;
    } catch (const mcpw::error &e) {
        std::fprintf(stderr, "mcpw::error: %s\n", e.what());
        return 1;
    }
}
