// Tests of the C++ wrapper: RAII and move semantics, exceptions with their codes, a client
// and a server talking in memory, and an http_client and an http_server doing the same over
// Streamable HTTP (a small pump plays the HTTP libraries' part); and of example.cpp's server
// half. Prints one line per test and ends with "test result: ok. N passed; 0 failed". Built
// with -Werror and run under ASan+UBSan by bindings/c/tests/c_abi.rs (and make -C bindings/c
// test).
#include "mcpwire.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

// The stdio example's server half (its reply_to, serve, answer and give_held), driven below
// past what the example's own client does. Its main is renamed, and never called here.
#define main example_cpp_main
#include "example.cpp"
#undef main

namespace {

int failed_checks = 0;
int passed = 0;
int failed = 0;

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            std::fprintf(stderr, "    %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failed_checks++;                                                             \
        }                                                                                \
    } while (0)

template <typename F>
mcpw_result code_of(F &&f) {
    try {
        f();
    } catch (const mcpw::error &e) {
        return e.code();
    }
    return MCPW_OK;
}

void run(const char *name, const std::function<void()> &test) {
    failed_checks = 0;
    try {
        test();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "    unexpected exception: %s\n", e.what());
        failed_checks++;
    }
    if (failed_checks == 0) {
        passed++;
        std::printf("test %s ... ok\n", name);
    } else {
        failed++;
        std::printf("test %s ... FAILED\n", name);
    }
}

constexpr std::uint64_t ms = 1000000;

// Moves every byte from one connection to the other, in two writes each time.
bool pump(mcpw::connection &from, mcpw::connection &to, std::uint64_t now) {
    bool moved = false;
    for (auto t = from.transmit(); !t.empty(); t = from.transmit()) {
        std::size_t half = t.size / 2 + 1;
        to.handle_input(now, t.data, half);
        from.consume(half);
        moved = true;
    }
    return moved;
}

void exchange(mcpw::connection &a, mcpw::connection &b, std::uint64_t now) {
    while (pump(a, b, now) || pump(b, a, now)) {
    }
}

struct pair {
    mcpw::connection client;
    mcpw::connection server;
};

pair make_pair() {
    mcpw::config client_config(mcpw::role::client, "cpp-client", "1.0");
    client_config.era(mcpw::client_era::legacy);
    mcpw::config server_config(mcpw::role::server, "cpp-server", "2.0");
    server_config.capabilities(R"({"tools":{}})").instructions("hi");
    pair p{mcpw::connection(client_config, 0), mcpw::connection(server_config, 0)};
    exchange(p.client, p.server, 0);
    return p;
}

// The helpers that return views into their input refuse a temporary string at compile time
// (the views would dangle at the end of the statement); literals, views and lvalues pass.
template <class T, class = void>
struct can_json_get : std::false_type {};
template <class T>
struct can_json_get<T, std::void_t<decltype(mcpw::json_get(std::declval<T>(), "k"))>>
    : std::true_type {};
template <class T, class = void>
struct can_decode : std::false_type {};
template <class T>
struct can_decode<T, std::void_t<decltype(mcpw::decode(std::declval<T>()))>> : std::true_type {};
static_assert(!can_json_get<std::string>::value, "json_get of a temporary string");
static_assert(can_json_get<const std::string &>::value && can_json_get<const char *>::value &&
                  can_json_get<std::string_view>::value,
              "json_get of text that outlives the call");
static_assert(!can_decode<std::string>::value && can_decode<std::string &>::value,
              "decode of a temporary string");

void test_version() { CHECK(mcpw::library_version() == MCPWIRE_VERSION); }

void test_handles_are_move_only_and_free_once() {
    mcpw::config a(mcpw::role::server, "a", "1");
    mcpw_config *raw = a.get();
    mcpw::config b(std::move(a));
    CHECK(a.get() == nullptr); // NOLINT(bugprone-use-after-move): moved-from is empty
    CHECK(b.get() == raw);
    mcpw::config c(mcpw::role::client, "c", "1");
    c = std::move(b); // frees c's old handle, takes b's
    CHECK(c.get() == raw && b.get() == nullptr);
    mcpw::connection conn(c, 0);
    mcpw::connection moved(std::move(conn));
    CHECK(conn.get() == nullptr && moved.get() != nullptr);
    CHECK(moved.get_role() == mcpw::role::server); // a's config, by way of b and c
    CHECK(moved.input_piece() == 4096);             // the default limits
}

void test_errors_carry_their_code() {
    CHECK(code_of([] { mcpw::config c(static_cast<mcpw::role>(9), "x", "1"); }) ==
          MCPW_ERR_INVALID_ARGUMENT);
    mcpw::config c(mcpw::role::server, "x", "1");
    CHECK(code_of([&] { c.capabilities("{nope"); }) == MCPW_ERR_INVALID_JSON);
    CHECK(code_of([&] { c.versions({"1999-01-01"}); }) == MCPW_ERR_UNKNOWN_VERSION);
    CHECK(code_of([&] { c.versions({}); }) == MCPW_OK);
    // Any range of strings: read from a configuration, say.
    mcpw::config ranged(mcpw::role::server, "x", "1");
    const std::vector<std::string> from_file{"2025-11-25", "2025-06-18"};
    CHECK(code_of([&] { ranged.versions(from_file); }) == MCPW_OK);
    const std::vector<std::string> wrong{"2025-11-25", "1999-01-01"};
    CHECK(code_of([&] { ranged.versions(wrong); }) == MCPW_ERR_UNKNOWN_VERSION);
    const std::vector<std::string_view> views{"2025-06-18"};
    CHECK(code_of([&] { ranged.versions(views); }) == MCPW_OK);
    CHECK(code_of([&] { mcpw::connection conn(c, 0); }) == MCPW_ERR_CONFIG_REFUSED);
    try {
        c.policy(0xFFFF);
        CHECK(false);
    } catch (const mcpw::error &e) {
        CHECK(std::string(e.what()) == mcpw_result_message(MCPW_ERR_INVALID_ARGUMENT));
    }
    // A negative duration is refused: cast to the C ABI's unsigned milliseconds it read as
    // about 2^64 ms, "no limit" (a timeout computed as deadline - now goes negative).
    using std::chrono::milliseconds;
    mcpw::config client(mcpw::role::client, "x", "1");
    CHECK(code_of([&] { client.timeouts(milliseconds(-1), milliseconds(1000)); }) ==
          MCPW_ERR_INVALID_ARGUMENT);
    CHECK(code_of([&] { client.timeouts(milliseconds(1000), milliseconds(-1)); }) ==
          MCPW_ERR_INVALID_ARGUMENT);
    CHECK(code_of([&] { client.discover_timeout(milliseconds(-5)); }) ==
          MCPW_ERR_INVALID_ARGUMENT);
    CHECK(code_of([&] { client.discover_cache(milliseconds(-5), MCPW_CACHE_PUBLIC); }) ==
          MCPW_ERR_INVALID_ARGUMENT);
    mcpw::connection conn(client, 0);
    CHECK(code_of([&] { conn.close(0, milliseconds(-1)); }) == MCPW_ERR_INVALID_ARGUMENT);
    CHECK(conn.state() != MCPW_STATE_CLOSING && conn.state() != MCPW_STATE_CLOSED);
    mcpw::config server(mcpw::role::server, "s", "1");
    mcpw::http_server_options options;
    options.random = [](std::uint8_t *buf, std::size_t len) { std::memset(buf, 7, len); };
    options.session_idle_timeout = milliseconds(-60000);
    CHECK(code_of([&] { mcpw::http_server s(server, options); }) == MCPW_ERR_INVALID_ARGUMENT);
    mcpw::http_client_options retry;
    retry.max_delay = milliseconds(-1);
    CHECK(code_of([&] { mcpw::http_client h(client, 0, retry); }) == MCPW_ERR_INVALID_ARGUMENT);
}

void test_config_round_trips() {
    mcpw::config c(mcpw::role::client, "x", "1");
    c.versions({"2025-06-18", "2025-03-26"})
        .info(R"({"name":"x","version":"1","title":"X"})")
        .timeouts(std::chrono::milliseconds(1500), std::chrono::milliseconds(9000))
        .instructions(std::nullopt);
    mcpw_limits l = c.limits();
    l.max_frame = 1 << 20;
    c.limits(l);
    CHECK(c.limits().max_frame == (1u << 20));
    c.policy(MCPW_POLICY_DEFAULT | MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS);
    CHECK(c.policy() == (MCPW_POLICY_DEFAULT | MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS));
}

void test_a_session_in_memory() {
    pair p = make_pair();
    CHECK(p.client.state() == MCPW_STATE_OPERATING);
    CHECK(p.client.protocol_version() == std::optional<std::string_view>("2025-11-25"));
    CHECK(p.client.peer_instructions() == std::optional<std::string_view>("hi"));
    CHECK(p.client.peer_info().value_or("") == R"({"name":"cpp-server","version":"2.0"})");
    CHECK(p.server.peer_capabilities().value_or("") == "{}");
    auto ready = p.client.poll_event();
    CHECK(ready && ready->kind() == MCPW_EVENT_READY && ready->version() == "2025-11-25");
    CHECK(!p.client.poll_event());
    CHECK(p.server.poll_event()->kind() == MCPW_EVENT_READY);

    mcpw_request_options options{};
    options.progress = 1;
    std::int64_t id = p.client.request(10 * ms, "tools/call",
                                       R"({"name":"count","arguments":{}})", options);
    exchange(p.client, p.server, 10 * ms);
    auto request = p.server.poll_event();
    CHECK(request && request->kind() == MCPW_EVENT_REQUEST && request->method() == "tools/call");
    mcpw::owned_id kept(request->id());
    CHECK(!kept.is_string() && kept.integer() == id);
    CHECK(!p.server.poll_event()); // the request's views are dead now; `kept` is not
    p.server.progress(kept.get(), 1, 2.0, "half");
    p.server.progress(kept.get(), 2);
    CHECK(code_of([&] { p.server.progress(kept.get(), 2); }) ==
          MCPW_ERR_NON_INCREASING_PROGRESS);
    p.server.respond(kept.get(), R"({"content":[{"type":"text","text":"done"}]})");
    exchange(p.client, p.server, 11 * ms);
    auto first = p.client.poll_event();
    CHECK(first && first->kind() == MCPW_EVENT_PROGRESS && first->progress() == 1);
    CHECK(first->total() == std::optional<double>(2.0) && first->message() == "half");
    auto second = p.client.poll_event();
    CHECK(second && !second->total() && !second->message());
    auto response = p.client.poll_event();
    CHECK(response && response->kind() == MCPW_EVENT_RESPONSE && response->request() == id);
    auto text = mcpw::json_get(*mcpw::json_at(*mcpw::json_get(response->result(), "content"), 0),
                               "text");
    CHECK(text == std::optional<std::string_view>("\"done\""));

    // An error answer, then cancel, notify, close.
    id = p.client.request(12 * ms, "tools/list");
    exchange(p.client, p.server, 12 * ms);
    request = p.server.poll_event();
    p.server.respond_error(request->id(), MCPW_JSONRPC_INVALID_PARAMS, "nope", R"({"x":1})");
    exchange(p.client, p.server, 12 * ms);
    auto err = p.client.poll_event();
    CHECK(err && err->kind() == MCPW_EVENT_ERROR && err->code() == -32602);
    CHECK(err->message() == "nope" && err->data() == R"({"x":1})");
    id = p.client.request(13 * ms, "tools/list");
    p.client.cancel(13 * ms, id, "changed my mind");
    CHECK(code_of([&] { p.client.cancel(13 * ms, id); }) == MCPW_ERR_UNKNOWN_REQUEST);
    p.client.notify("x/custom", R"({"k":true})");
    exchange(p.client, p.server, 13 * ms);
    auto stats = p.client.stats();
    CHECK(stats.late_responses == 0);
    CHECK(p.client.in_flight() == std::make_pair(std::size_t(0), std::size_t(0)));
    p.client.close(14 * ms, std::chrono::milliseconds(100));
    auto closed = p.client.poll_event();
    CHECK(closed && closed->kind() == MCPW_EVENT_CLOSED &&
          closed->close_reason() == MCPW_CLOSE_LOCAL);
    CHECK(!p.client.poll_timeout());
    CHECK(code_of([&] { p.client.notify("x/y"); }) == MCPW_ERR_CLOSED);
    p.server.handle_eof(15 * ms);
    p.server.handle_timeout(16 * ms);
}

// An owned_id reads only the field its kind names: a C caller may leave `integer` unset in a
// string id, and the string in an integer id (mcpw_id's docs).
void test_owned_ids_read_only_the_field_of_their_kind() {
    mcpw_id a{};
    a.kind = MCPW_ID_STRING;
    a.string = mcpw_str{"\"x\"", 3};
    a.integer = 7; // what happened to be in memory
    mcpw_id b = a;
    b.integer = -1;
    CHECK(mcpw::owned_id(a) == mcpw::owned_id(b));
    CHECK(mcpw::owned_id(a).get().integer == 0);
    b.string = mcpw_str{"\"y\"", 3};
    CHECK(mcpw::owned_id(a) != mcpw::owned_id(b));
    mcpw_id c{};
    c.kind = MCPW_ID_INT;
    c.integer = 7;
    c.string = mcpw_str{"junk", 4};
    mcpw_id d = c;
    d.string = mcpw_str{"other", 5};
    CHECK(mcpw::owned_id(c) == mcpw::owned_id(d) && mcpw::owned_id(c).text().empty());
    CHECK(mcpw::owned_id(a) != mcpw::owned_id(c)); // a string is never an integer
}

// example.cpp's server: the errors the spec names for a client's mistakes; answers held while
// the output is full go out once it has room (one whose request the client cancelled
// meanwhile does not), and one the engine then refuses for good (the client left) is reported
// and dropped (the retry threw, and ended the example's server).
void test_the_example_server_answers_mistakes_and_drops_what_it_cannot_give() {
    CHECK(reply_to("foo/bar", std::nullopt).code == MCPW_JSONRPC_METHOD_NOT_FOUND);
    const reply unknown = reply_to("tools/call", R"({"name":"n\u006fpe"})");
    CHECK(unknown.code == MCPW_JSONRPC_INVALID_PARAMS && unknown.text == "Unknown tool: nope");
    CHECK(reply_to("tools/call", R"({"name":5})").code == MCPW_JSONRPC_INVALID_PARAMS);
    CHECK(reply_to("tools/list", R"({"cursor":"x"})").code == MCPW_JSONRPC_INVALID_PARAMS);
    const reply tools = reply_to("tools/list", std::nullopt);
    CHECK(tools.code == 0 && tools.text.find(R"("tools":[{"name":"echo")") == 1);
    CHECK(reply_to("tools/call", R"({"name":"echo","arguments":{"text":"hi"}})").text ==
          R"({"content":[{"type":"text","text":"hi"}]})");

    mcpw::config client_config(mcpw::role::client, "cpp-client", "1.0");
    client_config.era(mcpw::client_era::legacy);
    mcpw::config server_config(mcpw::role::server, "cpp-server", "2.0");
    server_config.capabilities(R"({"tools":{}})");
    mcpw_limits limits = server_config.limits();
    limits.max_buffered_output = 1; // full after one answer
    server_config.limits(limits);
    mcpw::connection client(client_config, 0), server(server_config, 0);
    exchange(client, server, 0);
    while (client.poll_event() || server.poll_event()) {
    }
    const std::int64_t first = client.request(ms, "tools/list");
    const std::int64_t second = client.request(ms, "tools/list");
    const std::int64_t third = client.request(ms, "tools/list");
    exchange(client, server, ms);
    std::vector<held_answer> held;
    serve(server, held); // the first answered, the others held
    CHECK(held.size() == 2);
    client.cancel(2 * ms, second);
    pump(client, server, 2 * ms); // the cancellation; the first answer still waits
    serve(server, held);
    CHECK(code_of([&] { give_held(server, held); }) == MCPW_OK);
    CHECK(held.size() == 1); // the third, still refused: the output is full
    exchange(client, server, 3 * ms);
    give_held(server, held);
    CHECK(held.empty());
    exchange(client, server, 3 * ms);
    std::vector<std::int64_t> answered;
    while (auto ev = client.poll_event()) {
        if (ev->kind() == MCPW_EVENT_RESPONSE) answered.push_back(ev->request());
    }
    CHECK(answered == (std::vector<std::int64_t>{first, third}));
    // The client left: an answer held then cannot be given either.
    client.request(4 * ms, "tools/list");
    client.request(4 * ms, "tools/list");
    exchange(client, server, 4 * ms);
    serve(server, held);
    CHECK(held.size() == 1);
    server.handle_eof(5 * ms);
    CHECK(code_of([&] { give_held(server, held); }) == MCPW_OK);
    CHECK(held.empty());
}

void test_timeouts_and_deadlines() {
    pair p = make_pair();
    while (p.client.poll_event()) {
    }
    mcpw_request_options options{};
    options.timeout_ms = 250;
    std::int64_t id = p.client.request(100 * ms, "tools/list", std::nullopt, options);
    CHECK(p.client.poll_timeout() == std::optional<std::uint64_t>(350 * ms));
    p.client.handle_timeout(349 * ms);
    CHECK(!p.client.poll_event());
    p.client.handle_timeout(350 * ms);
    auto ev = p.client.poll_event();
    CHECK(ev && ev->kind() == MCPW_EVENT_TIMED_OUT && ev->request() == id);
}

void test_the_stateless_era() {
    mcpw::config client_config(mcpw::role::client, "cpp-client", "1.0");
    client_config.era(mcpw::client_era::modern)
        .discover_timeout(std::chrono::milliseconds(500))
        .capabilities(R"({"elicitation":{}})");
    mcpw::config server_config(mcpw::role::server, "cpp-server", "2.0");
    server_config.capabilities(R"({"tools":{},"logging":{}})")
        .discover_cache(std::chrono::milliseconds(1000), MCPW_CACHE_PUBLIC);
    mcpw::connection client(client_config, 0), server(server_config, 0);
    exchange(client, server, 0);
    CHECK(client.era() == MCPW_ERA_MODERN && server.era() == MCPW_ERA_MODERN);
    while (client.poll_event() || server.poll_event()) {
    }
    std::int64_t id = client.request(1, "tools/call", R"({"name":"deploy"})");
    exchange(client, server, 1);
    auto request = server.poll_event();
    CHECK(request && request->kind() == MCPW_EVENT_REQUEST);
    auto context = server.request_context(request->id());
    CHECK(context.known && (context.client_capabilities & MCPW_CAP_ELICITATION) != 0);
    CHECK(!server.log(request->id(), mcpw::log_level::error, "1"));
    server.respond_input_required(
        request->id(),
        R"({"ok":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{}}}}})",
        "s1");
    exchange(client, server, 2);
    auto input = client.poll_event();
    CHECK(input && input->kind() == MCPW_EVENT_INPUT_REQUIRED && input->request() == id);
    CHECK(input->request_state() == std::optional<std::string_view>("s1"));
    std::int64_t again = client.retry(3, id, R"({"ok":{"action":"accept","content":{}}})");
    exchange(client, server, 3);
    request = server.poll_event();
    CHECK(request && request->params().value_or("").find("inputResponses") != std::string_view::npos);
    server.respond(request->id(), R"({"content":[]})");
    exchange(client, server, 4);
    auto done = client.poll_event();
    CHECK(done && done->kind() == MCPW_EVENT_RESPONSE && done->request() == again);
}

// A server connection fed 2026-07-28 requests directly (no handshake in that era), and the
// tasks table answering them: a task handle for a tools/call, tasks/get, input through
// tasks/update, completion, and expiry.
std::optional<mcpw::event> modern_request(mcpw::connection &server, std::uint64_t now, int id,
                                          const std::string &method, const std::string &members) {
    std::string line = "{\"jsonrpc\":\"2.0\",\"id\":" + std::to_string(id) + ",\"method\":\"" +
                       method +
                       "\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":"
                       "\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{"
                       "\"roots\":{},\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}}}," +
                       members + "}}\n";
    server.handle_input(now, line);
    auto ev = server.poll_event();
    if (ev && ev->kind() == MCPW_EVENT_READY) ev = server.poll_event();
    return ev;
}

std::string output(mcpw::connection &conn) {
    std::string out;
    for (auto t = conn.transmit(); !t.empty(); t = conn.transmit()) {
        out.append(reinterpret_cast<const char *>(t.data), t.size);
        conn.consume(t.size);
    }
    return out;
}

// MCPW_POLICY_REVIEW_LISTENS: the listen comes as a request, and the stream hears only what
// the server grants. A keep that changes the connection under the grant (the client cancels
// and listens again under the same id) gets nothing granted; a cancelled listen is no error.
void test_review_listens() {
    mcpw::config config(mcpw::role::server, "cpp-server", "2.0");
    config.capabilities(R"({"tools":{"listChanged":true},"resources":{"subscribe":true}})")
        .policy(MCPW_POLICY_DEFAULT | MCPW_POLICY_REVIEW_LISTENS);
    mcpw::connection server(config, 0);
    const std::string two = R"("notifications":{"toolsListChanged":true,"resourceSubscriptions":["a:1","b:2"]})";
    auto listen = modern_request(server, 1, 7, "subscriptions/listen", two);
    CHECK(listen && listen->kind() == MCPW_EVENT_REQUEST);
    CHECK(output(server).empty());
    const mcpw_id seven{MCPW_ID_INT, 7, {nullptr, 0}};
    auto items = server.listen_items(seven);
    CHECK(items.size() == 3 && items[0].kind == MCPW_LISTEN_TOOLS_LIST_CHANGED);
    CHECK(items[2].kind == MCPW_LISTEN_RESOURCE && items[2].text == "b:2");
    server.grant_listen(seven, [](const mcpw::listen_item &item) {
        return item.kind == MCPW_LISTEN_RESOURCE && item.text == "a:1";
    });
    std::string ack = output(server);
    CHECK(ack.find(R"("notifications":{"resourceSubscriptions":["a:1"]})") != std::string::npos);
    auto refused = [&](auto &&call) {
        try {
            call();
        } catch (const mcpw::error &e) {
            return e.code() == MCPW_ERR_UNKNOWN_REQUEST;
        }
        return false;
    };
    CHECK(refused([&] { server.grant_listen(seven, [](auto &) { return true; }); }));

    const auto cancel = [](int id) {
        return R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":)" +
               std::to_string(id) +
               R"(,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}})"
               "\n";
    };
    const auto drain = [](mcpw::connection &c) {
        while (c.poll_event()) {
        }
    };
    // Cancelled while its keep ran, or before the grant: granted nothing, without an error.
    const mcpw_id eight{MCPW_ID_INT, 8, {nullptr, 0}};
    listen = modern_request(server, 2, 8, "subscriptions/listen", two);
    CHECK(listen && listen->kind() == MCPW_EVENT_REQUEST);
    server.grant_listen(eight, [&](const mcpw::listen_item &) {
        server.handle_input(3, cancel(8));
        return true;
    });
    CHECK(output(server).empty());
    const mcpw_id nine{MCPW_ID_INT, 9, {nullptr, 0}};
    modern_request(server, 4, 9, "subscriptions/listen", two);
    server.handle_input(4, cancel(9));
    drain(server);
    server.grant_listen(nine, [](auto &) { return true; });
    CHECK(output(server).empty());
    // A cancelled request's id is not taken again (the application may still answer the old
    // request): a listen under it is refused.
    modern_request(server, 5, 9, "subscriptions/listen", two);
    drain(server);
    CHECK(output(server).find(R"("id":9,"error":{"code":-32600)") != std::string::npos);
    CHECK(refused([&] {
        server.grant_listen(mcpw_id{MCPW_ID_INT, 99, {nullptr, 0}}, [](auto &) { return true; });
    }));

    // The engine remembers the last max_remembered_ids cancelled ids. With one, a second
    // cancellation lets a listen take the first one's id again, while keep runs for the
    // cancelled listen: keep judged other items, so nothing is granted, with an error.
    mcpw::config small(mcpw::role::server, "cpp-server", "2.0");
    mcpw_limits limits = small.limits();
    limits.max_remembered_ids = 1;
    small.capabilities(R"({"tools":{"listChanged":true},"resources":{"subscribe":true}})")
        .policy(MCPW_POLICY_DEFAULT | MCPW_POLICY_REVIEW_LISTENS)
        .limits(limits);
    mcpw::connection forgetful(small, 0);
    listen = modern_request(forgetful, 1, 8, "subscriptions/listen", two);
    CHECK(listen && listen->kind() == MCPW_EVENT_REQUEST);
    bool swapped = false;
    CHECK(refused([&] {
        forgetful.grant_listen(eight, [&](const mcpw::listen_item &item) {
            if (!swapped) {
                swapped = true;
                forgetful.handle_input(2, cancel(8));
                modern_request(forgetful, 2, 20, "subscriptions/listen", two);
                forgetful.handle_input(2, cancel(20));
                drain(forgetful);
                modern_request(forgetful, 3, 8, "subscriptions/listen",
                               R"("notifications":{"resourceSubscriptions":["x:1","y:2","z:3"]})");
            }
            return item.text == "a:1";
        });
    }));
    CHECK(output(forgetful).empty());
    CHECK(forgetful.listen_items(eight).size() == 3);

    // Granted by the event's own string id while keep feeds the connection more input and
    // takes its events: by the C ABI's rule that ends the id's view, so the wrapper copies the
    // id first.
    mcpw::connection fed(config, 0);
    std::string line = R"({"jsonrpc":"2.0","id":"listen-one","method":"subscriptions/listen",)"
                       R"("params":{"_meta":{"io.modelcontextprotocol/protocolVersion":)"
                       R"("2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},)" +
                       two + "}}\n";
    fed.handle_input(1, line);
    auto ev = fed.poll_event();
    if (ev && ev->kind() == MCPW_EVENT_READY) ev = fed.poll_event();
    CHECK(ev && ev->kind() == MCPW_EVENT_REQUEST);
    const std::string big_ping = R"({"jsonrpc":"2.0","id":")" + std::string(200000, 'p') +
                                 R"(","method":"ping","params":{"_meta":{)"
                                 R"("io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
                                 R"("io.modelcontextprotocol/clientCapabilities":{}}}})"
                                 "\n";
    bool fed_once = false;
    fed.grant_listen(ev->id(), [&](const mcpw::listen_item &item) {
        if (!fed_once) {
            fed_once = true;
            fed.handle_input(2, big_ping);
            drain(fed);
            output(fed);
        }
        return item.kind == MCPW_LISTEN_RESOURCE;
    });
    const std::string granted = output(fed);
    CHECK(granted.find(R"("io.modelcontextprotocol/subscriptionId":"listen-one"})") !=
          std::string::npos);
    CHECK(granted.find("ppp") == std::string::npos); // (the ping's answer was taken in keep)
    CHECK(granted.find(R"("resourceSubscriptions":["a:1","b:2"])") != std::string::npos);
}

void test_tasks() {
    mcpw::config config(mcpw::role::server, "cpp-tasks", "1.0");
    config.capabilities(R"({"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}})");
    mcpw::connection server(config, 0);
    mcpw_task_config settings = mcpw_task_config_default();
    settings.ttl_ms = 1000;
    mcpw::tasks table(0, 1795521600000ull, settings);
    std::uint8_t counter = 0;
    auto random = [&counter](std::uint8_t *buf, std::size_t len) {
        for (std::size_t i = 0; i < len; i++) buf[i] = ++counter;
    };

    // An empty random source is refused (it used to end in std::terminate).
    const std::function<void(std::uint8_t *, std::size_t)> none;
    CHECK(code_of([&] { table.create(ms, none); }) == MCPW_ERR_NULL_ARGUMENT);
    CHECK(code_of([&] { table.create_legacy(ms, none, 1); }) == MCPW_ERR_NULL_ARGUMENT);

    auto call = modern_request(server, ms, 1, "tools/call", R"("name":"deploy")");
    CHECK(call && call->kind() == MCPW_EVENT_REQUEST);
    static_assert(std::is_same<decltype(table.create(ms, random)), std::string>::value,
                  "a task id is a copy: the table's view of it ends at the next create");
    const std::string task(table.create(ms, random));
    CHECK(task.size() == 32 && task.substr(0, 4) == "0102");
    table.respond(server, call->id(), task);
    std::string out = output(server);
    CHECK(out.find(R"("resultType":"task")") != std::string::npos);
    CHECK(out.find(task) != std::string::npos);
    CHECK(table.status(task) == MCPW_TASK_STATUS_WORKING);

    table.ask(2 * ms, task, "confirm", R"({"method":"roots/list"})");
    CHECK(code_of([&] { table.ask(2 * ms, task, "confirm", R"({"method":"roots/list"})"); }) == MCPW_ERR_TASK_KEY_REUSED);
    auto get = modern_request(server, 2 * ms, 2, "tasks/get", "\"taskId\":\"" + task + "\"");
    CHECK(get && table.serve(2 * ms, server, *get));
    out = output(server);
    CHECK(out.find(R"("status":"input_required")") != std::string::npos);

    auto update = modern_request(server, 3 * ms, 3, "tasks/update",
                                 "\"taskId\":\"" + task +
                                     R"(","inputResponses":{"confirm":{"roots":[]}})");
    CHECK(update && table.serve(3 * ms, server, *update));
    output(server);
    auto input = table.poll_event();
    CHECK(input && input->kind() == MCPW_TASK_EVENT_INPUT && input->task() == task);
    CHECK(input && input->key() == "confirm" && input->response() == R"({"roots":[]})");
    CHECK(!table.poll_event());
    CHECK(table.status(task) == MCPW_TASK_STATUS_WORKING);

    auto list = modern_request(server, 3 * ms, 4, "tools/list", R"("x":1)");
    CHECK(list && !table.serve(3 * ms, server, *list));
    server.respond(list->id(), R"({"tools":[]})");
    output(server);

    table.set_message(4 * ms, task, "almost");
    table.complete(4 * ms, task, R"({"content":[{"type":"text","text":"deployed"}]})");
    CHECK(table.status(task) == MCPW_TASK_STATUS_COMPLETED);
    CHECK(code_of([&] { table.cancel(5 * ms, task); }) == MCPW_ERR_TASK_TERMINAL);
    get = modern_request(server, 5 * ms, 5, "tasks/get", "\"taskId\":\"" + task + "\"");
    CHECK(get && table.serve(5 * ms, server, get->id(), get->method(), get->params()));
    out = output(server);
    CHECK(out.find(R"("status":"completed")") != std::string::npos);
    CHECK(out.find("deployed") != std::string::npos);
    // Its status notification, for listens granted its id.
    auto [method, params] = table.status_notification(task);
    CHECK(method == "notifications/tasks");
    const std::string quoted = "\"" + task + "\"";
    CHECK(mcpw::json_get(params, "taskId") == std::optional<std::string_view>(quoted));
    CHECK(params.find(R"("status":"completed")") != std::string_view::npos);
    CHECK(code_of([&] { table.status_notification("nobody"); }) == MCPW_ERR_UNKNOWN_TASK);

    // Another task expires at its TTL; the first, terminal, quietly.
    const std::string other(table.create(10 * ms, random));
    CHECK(!table.cancel_requested(other));
    CHECK(table.poll_timeout() == std::optional<std::uint64_t>(1001 * ms));
    table.handle_timeout(1010 * ms);
    auto expired = table.poll_event();
    CHECK(expired && expired->kind() == MCPW_TASK_EVENT_EXPIRED && expired->task() == other);
    CHECK(code_of([&] { table.status(other); }) == MCPW_ERR_UNKNOWN_TASK);
    CHECK(code_of([&] { table.status(task); }) == MCPW_ERR_UNKNOWN_TASK);
    CHECK(!table.poll_timeout());

    // Refusals carry their codes; a request without the extension gets no task.
    CHECK(code_of([&] { table.fail(0, "nope", -32603, "x"); }) == MCPW_ERR_UNKNOWN_TASK);
    mcpw_task_config bad = mcpw_task_config_default();
    bad.max_tasks = 0;
    CHECK(code_of([&] { mcpw::tasks t(0, 0, bad); }) == MCPW_ERR_INVALID_ARGUMENT);
    server.handle_input(
        2000 * ms,
        std::string("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"_meta\":{"
                    "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                    "\"io.modelcontextprotocol/clientCapabilities\":{}},\"name\":\"x\"}}\n"));
    auto plain = server.poll_event();
    CHECK(plain && plain->kind() == MCPW_EVENT_REQUEST);
    const std::string third(table.create(2000 * ms, random));
    CHECK(code_of([&] { table.respond(server, plain->id(), third); }) == MCPW_ERR_NOT_NEGOTIATED);
    mcpw::tasks moved(std::move(table));
    CHECK(table.get() == nullptr && moved.get() != nullptr); // NOLINT(bugprone-use-after-move)
    CHECK(moved.status(third) == MCPW_TASK_STATUS_WORKING);
}

// 2025-11-25: URL elicitation required and its completion, then a task-augmented tools/call
// answered with a task handle, whose tasks/result waits for the task's end.
void test_url_elicitation_and_legacy_tasks() {
    mcpw::config client_config(mcpw::role::client, "cpp-client", "1.0");
    client_config.era(mcpw::client_era::legacy).capabilities(R"({"elicitation":{"url":{}}})");
    mcpw::config server_config(mcpw::role::server, "cpp-server", "2.0");
    server_config.capabilities(
        R"({"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}})");
    pair p{mcpw::connection(client_config, 0), mcpw::connection(server_config, 0)};
    exchange(p.client, p.server, 0);
    while (p.client.poll_event()) {
    }
    while (p.server.poll_event()) {
    }

    const std::string required =
        R"([{"mode":"url","elicitationId":"e-1","url":"https://example.com/a","message":"Go"}])";
    std::int64_t call = p.client.request(ms, "tools/call", R"({"name":"files"})");
    exchange(p.client, p.server, ms);
    auto request = p.server.poll_event();
    CHECK(request && request->kind() == MCPW_EVENT_REQUEST);
    p.server.respond_url_elicitation_required(request->id(), required);
    p.server.notify("notifications/elicitation/complete", R"({"elicitationId":"e-1"})");
    exchange(p.client, p.server, ms);
    auto needed = p.client.poll_event();
    CHECK(needed && needed->kind() == MCPW_EVENT_URL_ELICITATION_REQUIRED);
    CHECK(needed->request() == call && needed->elicitations() == required);
    auto complete = p.client.poll_event();
    CHECK(complete && complete->kind() == MCPW_EVENT_ELICITATION_COMPLETE);
    CHECK(complete->elicitation_id() == "e-1");
    // A second completion of the same elicitation is dropped, and counted.
    CHECK(p.client.ignored_elicitation_completions() == 0);
    p.server.notify("notifications/elicitation/complete", R"({"elicitationId":"e-1"})");
    exchange(p.client, p.server, ms);
    CHECK(!p.client.poll_event());
    CHECK(p.client.ignored_elicitation_completions() == 1);

    mcpw::tasks table(0, 1795521600000ull);
    std::uint8_t counter = 0;
    auto random = [&counter](std::uint8_t *buf, std::size_t len) {
        for (std::size_t i = 0; i < len; i++) buf[i] = ++counter;
    };
    call = p.client.request(ms, "tools/call", R"({"name":"slow","task":{}})");
    exchange(p.client, p.server, ms);
    request = p.server.poll_event();
    CHECK(request && request->kind() == MCPW_EVENT_REQUEST);
    const std::string task(table.create_legacy(ms, random, 7));
    table.respond(p.server, request->id(), task);
    exchange(p.client, p.server, ms);
    auto created = p.client.poll_event();
    CHECK(created && created->kind() == MCPW_EVENT_TASK_CREATED && created->request() == call);
    CHECK(created->task().find("{\"task\":{\"taskId\":\"" + task + "\"") == 0);

    std::int64_t waiting =
        p.client.request(2 * ms, "tasks/result", "{\"taskId\":\"" + task + "\"}");
    exchange(p.client, p.server, 2 * ms);
    auto result_request = p.server.poll_event();
    CHECK(result_request && table.serve_legacy(2 * ms, 7, p.server, *result_request));
    CHECK(!table.poll_result());
    table.ask(2 * ms, task, "k", R"({"method":"roots/list"})");
    table.resume(2 * ms, task);
    CHECK(table.status(task) == MCPW_TASK_STATUS_WORKING);
    table.complete(3 * ms, task, R"({"content":[]})");
    auto ready = table.poll_result();
    CHECK(ready && ready->owner() == 7 && !ready->is_error());
    CHECK(ready->result().find("io.modelcontextprotocol/related-task") != std::string_view::npos);
    table.write_result(p.server);
    CHECK(code_of([&] { table.write_result(p.server); }) == MCPW_ERR_UNKNOWN_REQUEST);
    exchange(p.client, p.server, 3 * ms);
    auto answer = p.client.poll_event();
    CHECK(answer && answer->kind() == MCPW_EVENT_RESPONSE && answer->request() == waiting);
    CHECK(answer->result().find(task) != std::string_view::npos);
}

void test_related_requests_and_frames() {
    pair p = make_pair();
    while (p.client.poll_event() || p.server.poll_event()) {
    }
    p.client.request(1, "tools/list");
    exchange(p.client, p.server, 1);
    auto parent = p.server.poll_event();
    CHECK(parent && parent->kind() == MCPW_EVENT_REQUEST);
    mcpw::owned_id kept(parent->id());
    std::int64_t related = p.server.request_related(1, kept.get(), "ping");
    p.server.respond(kept.get(), R"({"tools":[]})");
    exchange(p.client, p.server, 2);
    auto pinged = p.server.poll_event();
    CHECK(pinged && pinged->kind() == MCPW_EVENT_RESPONSE && pinged->request() == related);
    p.server.handle_frame(3, 5, R"({"jsonrpc":"2.0","id":"f","method":"tools/list"})");
    auto framed = p.server.poll_event();
    CHECK(framed && framed->kind() == MCPW_EVENT_REQUEST);
    p.server.respond(framed->id(), R"({"tools":[]})");
    CHECK(p.server.transmit().stream == 5);
}

void test_decode() {
    std::string frame = R"({"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"x":1}})";
    auto d = mcpw::decode(frame);
    CHECK(!d.batch && d.messages.size() == 1);
    const auto &m = d.messages[0];
    CHECK(m.kind() == MCPW_MESSAGE_REQUEST && m.method() == "tools/call" && !m.method_escaped());
    CHECK(m.params() == std::optional<std::string_view>(R"({"x":1})"));
    CHECK(m.params()->data() > frame.data() && m.params()->data() < frame.data() + frame.size());
    CHECK(m.id().kind == MCPW_ID_STRING && std::string_view(m.id().string.ptr, m.id().string.len) == "a");

    auto b = mcpw::decode(R"([{"jsonrpc":"2.0","id":1,"result":{}},1,{"jsonrpc":"2.0","method":"n"}])");
    CHECK(b.batch && b.messages.size() == 3);
    CHECK(b.messages[0].kind() == MCPW_MESSAGE_RESPONSE && b.messages[0].result() == "{}");
    CHECK(b.messages[1].kind() == MCPW_MESSAGE_INVALID && b.messages[1].code() == -32600);
    CHECK(b.messages[2].kind() == MCPW_MESSAGE_NOTIFICATION && !b.messages[2].params());

    auto p = mcpw::decode("{");
    CHECK(p.messages.size() == 1 && p.messages[0].kind() == MCPW_MESSAGE_PARSE_ERROR);
    CHECK(p.messages[0].reason() == MCPW_DECODE_UNEXPECTED_END && p.messages[0].offset() == 1);
}

void test_json_helpers() {
    CHECK(mcpw::json_get(R"({"a":[1,2]})", "a") == std::optional<std::string_view>("[1,2]"));
    CHECK(!mcpw::json_get(R"({"a":1})", "b"));
    CHECK(mcpw::json_at("[1,2]", 1) == std::optional<std::string_view>("2"));
    CHECK(mcpw::json_items("[1, {\"a\":[2]} ,\"x\"]") ==
          (std::vector<std::string_view>{"1", "{\"a\":[2]}", "\"x\""}));
    CHECK(mcpw::json_items("[]").empty());
    {
        std::string many = "[";
        for (int i = 0; i < 40; ++i) many += (i ? "," : "") + std::to_string(i);
        many += "]";
        auto items = mcpw::json_items(many); // more than the first call's room
        CHECK(items.size() == 40 && items[0] == "0" && items[39] == "39");
    }
    CHECK(code_of([] { mcpw::json_items("{}"); }) == MCPW_ERR_JSON_WRONG_TYPE);
    CHECK(!mcpw::json_at("[1,2]", 2));
    CHECK(code_of([] { mcpw::json_at("{}", 0); }) == MCPW_ERR_JSON_WRONG_TYPE);
    CHECK(code_of([] { mcpw::json_get("[", "a"); }) == MCPW_ERR_INVALID_JSON);
    {
        auto [a, missing, b] = mcpw::json_get_each(R"({"b":true,"a":[1,2]})", "a", "missing", "b");
        CHECK(a == std::optional<std::string_view>("[1,2]"));
        CHECK(!missing);
        CHECK(b == std::optional<std::string_view>("true"));
    }
    CHECK(code_of([] { mcpw::json_get_each(R"({"a":1,"a":2})", "a"); }) == MCPW_ERR_DUPLICATE_KEY);
    CHECK(code_of([] { mcpw::json_get_each("[]", "a"); }) == MCPW_ERR_JSON_WRONG_TYPE);
    CHECK(mcpw::json_string(R"( "a\"b\u00e9\ud83d\ude00" )") == "a\"b\xc3\xa9\xf0\x9f\x98\x80");
    CHECK(mcpw::json_string(R"("x\u0000y")") == std::string("x\0y", 3));
    CHECK(mcpw::json_string(R"("")").empty());
    CHECK(mcpw::json_string(*mcpw::json_get(R"({"name":"ech\u006f"})", "name")) == "echo");
    CHECK(code_of([] { mcpw::json_string("12"); }) == MCPW_ERR_JSON_WRONG_TYPE);
    CHECK(code_of([] { mcpw::json_string(R"("\x")"); }) == MCPW_ERR_INVALID_JSON);
    CHECK(mcpw::json_number(" -2.5e1 ") == -25.0);
    CHECK(mcpw::json_number("0.1") == 0.1);
    CHECK(code_of([] { mcpw::json_number("1e400"); }) == MCPW_ERR_JSON_WRONG_TYPE);
    CHECK(code_of([] { mcpw::json_number(R"("2")"); }) == MCPW_ERR_JSON_WRONG_TYPE);
}


// ---- Streamable HTTP: an http_client and an http_server wired together in memory ------------

// What a host reads from getrandom(2); a fixed sequence here, so runs are reproducible.
void test_random(std::uint8_t *buf, std::size_t len) {
    static std::uint64_t state = 12345;
    for (std::size_t i = 0; i < len; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = static_cast<std::uint8_t>(state >> 56);
    }
}

mcpw::http_server make_http_server(mcpw::http_server_options options = {}) {
    mcpw::config c(mcpw::role::server, "cpp-http-server", "2.0");
    c.capabilities(R"({"tools":{"listChanged":true}})");
    options.random = test_random;
    options.endpoint = "/mcp";
    return mcpw::http_server(c, std::move(options));
}

mcpw::http_client make_http_client(mcpw::client_era era, std::uint64_t now) {
    mcpw::config c(mcpw::role::client, "cpp-http-client", "1.0");
    c.era(era);
    return mcpw::http_client(c, now);
}

// Both ends, the responses between them, a server application that answers tools/call with
// its `text` argument (or holds `slow` calls for the test), and the client's events.
struct http_world {
    mcpw::http_server server;
    mcpw::http_client client;
    std::uint64_t now = 1000 * ms;
    bool hold_slow = false;
    bool poll_slow = false;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> streams; // (exchange, stream)
    std::vector<std::string> seen;                               // "POST 200", ...
    std::optional<mcpw::owned_id> held;
    std::uint64_t held_key = 0;
    std::uint64_t last_key = 0;
    std::vector<std::pair<mcpw_event_kind, std::int64_t>> events;
    std::vector<std::string> results; // of the RESPONSE events, in order

    http_world(mcpw::http_server s, mcpw::client_era era)
        : server(std::move(s)), client(make_http_client(era, now)) {
        run();
    }

    void serve() {
        while (auto e = server.poll_event()) {
            last_key = e->key;
            if (e->ev.kind() != MCPW_EVENT_REQUEST) continue;
            auto name = mcpw::json_get(e->ev.params().value_or("{}"), "name").value_or("");
            if (name == "\"slow\"" && hold_slow) {
                held.emplace(e->ev.id());
                held_key = e->key;
                if (poll_slow) CHECK(server.close_stream_for_polling(e->key, held->get()));
                continue;
            }
            auto args = mcpw::json_get(e->ev.params().value_or("{}"), "arguments");
            auto text = mcpw::json_get(args.value_or("{}"), "text").value_or("\"\"");
            e->conn.respond(e->ev.id(), R"({"content":[{"type":"text","text":)" +
                                            std::string(text) + "}]}");
        }
    }

    bool step() {
        bool moved = false;
        while (auto action = client.poll_action()) {
            moved = true;
            if (action->is_abort()) {
                for (auto it = streams.begin(); it != streams.end(); ++it) {
                    if (it->first == action->exchange()) {
                        server.stream_closed(now, it->second);
                        streams.erase(it);
                        break;
                    }
                }
                continue;
            }
            const std::uint64_t exchange = action->exchange();
            // The headers as a temporary vector, which lives for the call.
            auto with_host = [&] {
                std::vector<mcpw_http_header> headers(action->headers().begin(),
                                                      action->headers().end());
                headers.push_back(mcpw::header("Host", "localhost:8080"));
                return headers;
            };
            std::string method(action->method());
            auto response =
                server.handle_request(now, method, "/mcp", with_host(), action->body());
            if (auto stream = response.stream()) {
                serve();
                response = server.settle(*stream);
            }
            seen.push_back(method + " " + std::to_string(response.status()));
            client.handle_response(now, exchange, response.status(), response.headers());
            if (auto stream = response.stream()) {
                streams.emplace_back(exchange, *stream);
            } else {
                client.handle_body(now, exchange, response.body());
                client.handle_end(now, exchange);
                serve();
            }
        }
        for (auto it = streams.begin(); it != streams.end();) {
            auto chunk = server.poll_stream(it->second);
            if (chunk.size > 0) {
                client.handle_body(now, it->first, chunk.bytes());
                server.consume_stream(it->second, chunk.size);
                moved = true;
            }
            if (!chunk.open || chunk.finished) {
                client.handle_end(now, it->first);
                it = streams.erase(it);
                moved = true;
            } else {
                ++it;
            }
        }
        while (auto ev = client.poll_event()) {
            events.emplace_back(ev->kind(), ev->request());
            if (ev->kind() == MCPW_EVENT_RESPONSE) results.emplace_back(ev->result());
        }
        return moved;
    }

    void run() {
        int rounds = 0;
        while (step() && ++rounds < 100) {
        }
        CHECK(rounds < 100);
    }

    bool got(mcpw_event_kind kind, std::int64_t request = 0) const {
        for (const auto &e : events) {
            if (e.first == kind && (request == 0 || e.second == request)) return true;
        }
        return false;
    }
};

// Code written against connection_view serves an owned connection and a lent one alike.
std::string describe(mcpw::connection_view conn) {
    return std::string(conn.protocol_version().value_or("none")) + "/" +
           std::to_string(static_cast<int>(conn.get_role()));
}

void test_http_handles_are_move_only_and_report_errors() {
    static_assert(!std::is_copy_constructible<mcpw::http_server>::value, "move-only");
    static_assert(!std::is_copy_assignable<mcpw::http_client>::value, "move-only");
    static_assert(std::is_nothrow_move_constructible<mcpw::http_server>::value, "cheap moves");
    static_assert(std::is_nothrow_move_constructible<mcpw::http_client>::value, "cheap moves");
    static_assert(std::is_trivially_copyable<mcpw::connection_view>::value, "a view is a pointer");
    // A run of headers is a view: never built from a temporary it would outlive.
    static_assert(!std::is_constructible<mcpw::http_headers, std::vector<mcpw_http_header>>::value,
                  "not from a temporary vector");
    static_assert(
        !std::is_constructible<mcpw::http_headers, std::initializer_list<mcpw_http_header>>::value,
        "not from a braced list");
    static_assert(
        std::is_constructible<mcpw::http_headers, const std::vector<mcpw_http_header> &>::value,
        "from a vector that lives on");

    mcpw::http_server a = make_http_server();
    mcpw_http_server *raw = a.get();
    mcpw::http_server b(std::move(a));
    CHECK(a.get() == nullptr && b.get() == raw); // NOLINT(bugprone-use-after-move)
    CHECK(b.counts().sessions == 0 && b.counts().streams == 0);
    CHECK(!b.poll_event() && !b.poll_timeout());
    CHECK(code_of([&] { b.settle(42); }) == MCPW_ERR_UNKNOWN_STREAM);
    CHECK(code_of([&] { b.conn(42); }) == MCPW_ERR_UNKNOWN_CONNECTION);
    CHECK(code_of([&] { b.session_id(42); }) == MCPW_ERR_UNKNOWN_CONNECTION);
    CHECK(code_of([&] { b.consume_stream(42, 1); }) == MCPW_ERR_CONSUME_TOO_MUCH);
    CHECK(!b.poll_stream(42).open);
    CHECK(b.end_listen_streams() == 0);
    b.declare_tools(R"([{"name":"t","inputSchema":{"type":"object"}}])");
    CHECK(code_of([&] { b.declare_tools("{"); }) == MCPW_ERR_INVALID_JSON);
    const char *bad_tools = R"([{"name":"t","inputSchema":{"type":"object","properties":)"
                            R"({"a":{"type":"string","x-mcp-header":"bad name"}}}}])";
    CHECK(code_of([&] { b.declare_tools(bad_tools); }) == MCPW_ERR_CONFIG_REFUSED);
    // The error names the tool and the reason; tools_refusals gives the same as JSON.
    const std::string refusal =
        R"([{"name":"t","reason":"x-mcp-header is not a non-empty HTTP token"}])";
    CHECK(mcpw::tools_refusals(bad_tools) == refusal);
    CHECK(mcpw::tools_refusals(R"({"tools":[]})") == "[]");
    CHECK(code_of([] { mcpw::tools_refusals("5"); }) == MCPW_ERR_JSON_WRONG_TYPE);
    try {
        b.declare_tools(bad_tools);
        CHECK(false);
    } catch (const mcpw::error &e) {
        CHECK(std::string(e.what()).find(refusal) != std::string::npos);
    }

    // No random source; the wrong role; a bad endpoint.
    mcpw::config server_config(mcpw::role::server, "s", "1");
    mcpw::config client_config(mcpw::role::client, "c", "1");
    CHECK(code_of([&] { mcpw::http_server s(server_config, mcpw::http_server_options()); }) ==
          MCPW_ERR_NULL_ARGUMENT);
    mcpw::http_server_options options;
    options.random = test_random;
    CHECK(code_of([&] { mcpw::http_server s(client_config, options); }) == MCPW_ERR_CONFIG_REFUSED);
    options.tools = bad_tools;
    try {
        mcpw::http_server s(server_config, options);
        CHECK(false);
    } catch (const mcpw::error &e) {
        CHECK(e.code() == MCPW_ERR_CONFIG_REFUSED);
        CHECK(std::string(e.what()).find(refusal) != std::string::npos);
    }
    // The wrong role with the same tools: the refusal names no tool (it is the role's).
    options.tools = R"([{"name":"t","inputSchema":{"type":"object"}}])";
    try {
        mcpw::http_server s(client_config, options);
        CHECK(false);
    } catch (const mcpw::error &e) {
        CHECK(e.code() == MCPW_ERR_CONFIG_REFUSED && std::string(e.what()).find('[') == std::string::npos);
    }
    options.tools = "{";
    CHECK(code_of([&] { mcpw::http_server s(server_config, options); }) == MCPW_ERR_INVALID_JSON);
    CHECK(code_of([&] { mcpw::http_client c(server_config, 0); }) == MCPW_ERR_CONFIG_REFUSED);

    mcpw::http_client c(client_config, 0);
    mcpw::http_client d = std::move(c);
    CHECK(c.get() == nullptr && d.get() != nullptr); // NOLINT(bugprone-use-after-move)
    CHECK(!d.session_id() && !d.end_session());
    auto first = d.poll_action();
    CHECK(first && first->is_send() && first->method() == "POST");
    CHECK(first->headers().find("content-type") ==
          std::optional<std::string_view>("application/json"));
    CHECK(first->body().find("\"method\"") != std::string_view::npos);
    // An error page instead of the answer: its text is kept for the failure's message.
    CHECK(!d.failure_text());
    // The headers as a braced list, alive for the call.
    d.handle_response(1, first->exchange(), 502, {mcpw::header("Content-Type", "text/html")});
    d.handle_body(1, first->exchange(), " <h1>down</h1>\n");
    d.handle_end(1, first->exchange());
    CHECK(d.failure_text() == std::optional<std::string_view>("<h1>down</h1>"));

    // A notification is unheard until its response head; a request never is.
    mcpw::config legacy(mcpw::role::client, "c", "1");
    legacy.era(mcpw::client_era::legacy);
    mcpw::http_client e(legacy, 0);
    auto init = e.poll_action();
    CHECK(init && init->is_send() && !e.has_unheard());
    e.handle_response(1, init->exchange(), 200, {mcpw::header("Content-Type", "application/json")});
    e.handle_body(1, init->exchange(),
                  R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25",)"
                  R"("capabilities":{},"serverInfo":{"name":"s","version":"1"}}})");
    e.handle_end(1, init->exchange());
    auto initialized = e.poll_action();
    CHECK(initialized && initialized->is_send());
    CHECK(initialized->body().find("notifications/initialized") != std::string_view::npos);
    CHECK(e.has_unheard());
    e.handle_response(2, initialized->exchange(), 202, std::vector<mcpw_http_header>{});
    CHECK(!e.has_unheard());
}

void test_http_a_session_in_memory() {
    http_world w(make_http_server(), mcpw::client_era::legacy);
    CHECK(w.got(MCPW_EVENT_READY));
    CHECK(w.seen == (std::vector<std::string>{"POST 200", "POST 202"}));
    auto sid = w.client.session_id();
    CHECK(sid && sid->size() >= 16);
    CHECK(w.server.session_id(w.last_key) == sid);
    CHECK(w.server.counts().sessions == 1);

    std::int64_t id = w.client.conn().request(w.now, "tools/call",
                                              R"({"name":"echo","arguments":{"text":"hi"}})");
    w.run();
    CHECK(w.got(MCPW_EVENT_RESPONSE, id));
    CHECK(!w.results.empty() && w.results.back().find(R"("text":"hi")") != std::string::npos);

    // The views work with the ordinary command wrappers, and follow the C ABI's rules.
    mcpw::connection_view view = w.server.conn(w.last_key);
    CHECK(view.state() == MCPW_STATE_OPERATING && view.era() == MCPW_ERA_LEGACY);
    CHECK(describe(view) == "2025-11-25/2");
    CHECK(describe(w.client.conn()) == "2025-11-25/1");
    CHECK(code_of([&] { view.transmit(); }) == MCPW_ERR_NOT_OWNER);
    CHECK(code_of([&] { view.handle_input(w.now, "{}\n"); }) == MCPW_ERR_NOT_OWNER);
    view = w.server.conn(w.last_key);
    w.server.handle_timeout(w.now); // any other non-const call on the server
    CHECK(code_of([&] { view.state(); }) == MCPW_ERR_STALE_VIEW);
    mcpw::config cc(mcpw::role::client, "x", "1");
    mcpw::connection owned(cc, 0);
    CHECK(describe(owned) == "none/1"); // an owned connection converts to a view too

    // The session ends with a DELETE.
    CHECK(!w.client.is_ending_session());
    CHECK(w.client.end_session() && !w.client.end_session());
    CHECK(w.client.is_ending_session());
    w.run();
    CHECK(w.seen.back() == "DELETE 200");
    CHECK(!w.client.is_ending_session());
    CHECK(w.server.counts().sessions == 0);
}

void test_http_the_stateless_era_and_a_later_answer() {
    http_world w(make_http_server(), mcpw::client_era::modern);
    CHECK(w.got(MCPW_EVENT_READY) && !w.client.session_id());
    CHECK(w.client.conn().protocol_version() == std::optional<std::string_view>("2026-07-28"));
    w.hold_slow = true;
    mcpw_request_options options{};
    options.progress = 1;
    std::int64_t id = w.client.conn().request(w.now, "tools/call", R"({"name":"slow"})", options);
    w.run();
    CHECK(w.held && w.streams.size() == 1 && !w.got(MCPW_EVENT_RESPONSE, id));
    CHECK(!w.server.session_id(w.held_key)); // stateless: no session
    CHECK(w.server.counts().streams == 1);
    while (w.server.poll_woken()) { // what the conversation so far named
    }
    w.server.conn(w.held_key).progress(w.held->get(), 1, 2.0, "half way");
    // The progress is for the held request's stream: that stream is named, once.
    CHECK(w.server.poll_woken() == std::optional<std::uint64_t>(w.streams.at(0).second));
    CHECK(!w.server.poll_woken());
    w.run();
    CHECK(w.got(MCPW_EVENT_PROGRESS, id));
    w.server.conn(w.held_key).respond(w.held->get(), R"({"content":[]})");
    w.run();
    CHECK(w.got(MCPW_EVENT_RESPONSE, id) && w.streams.empty());
    CHECK(code_of([&] { w.server.conn(w.held_key); }) == MCPW_ERR_UNKNOWN_CONNECTION);
    CHECK(w.server.counts().streams == 0);
}

// A replay's sink lives only during the replay call (its C sink and context end with it): a
// store cannot keep it, by copy or by move.
static_assert(!std::is_copy_constructible<mcpw::replay_sink>::value &&
                  !std::is_copy_assignable<mcpw::replay_sink>::value &&
                  !std::is_move_constructible<mcpw::replay_sink>::value &&
                  !std::is_move_assignable<mcpw::replay_sink>::value,
              "a replay_sink cannot outlive the replay call");

// A C++ event store: the resumed answer of a stream closed for polling comes from it.
class vector_store : public mcpw::event_store {
public:
    struct entry {
        std::string session;
        std::uint64_t stream, event;
        std::string bytes;
    };
    std::vector<entry> entries;
    int replays = 0, forgets = 0;
    bool down = false; // replay fails, as a store that cannot be reached does

    void append(std::string_view session, std::uint64_t stream, std::uint64_t event,
                std::string_view bytes) override {
        entries.push_back(entry{std::string(session), stream, event, std::string(bytes)});
    }
    bool replay(std::string_view session, std::uint64_t stream, std::uint64_t after,
                const mcpw::replay_sink &sink) override {
        replays++;
        if (down) return false;
        for (const entry &e : entries) {
            if (e.session == session && e.stream == stream && e.event > after) sink(e.bytes);
        }
        return true;
    }
    void forget(std::string_view session) override {
        forgets++;
        std::vector<entry> kept;
        for (entry &e : entries) {
            if (e.session != session) kept.push_back(std::move(e));
        }
        entries = std::move(kept);
    }
};

void test_http_polling_resumes_from_the_event_store() {
    vector_store store;
    mcpw::http_server_options options;
    options.events = &store;
    options.retry = std::chrono::milliseconds(200);
    http_world w(make_http_server(std::move(options)), mcpw::client_era::legacy);
    w.hold_slow = true;
    w.poll_slow = true;
    std::int64_t id = w.client.conn().request(w.now, "tools/call", R"({"name":"slow"})");
    w.run();
    CHECK(w.held && w.streams.empty() && !w.got(MCPW_EVENT_RESPONSE, id));
    auto deadline = w.client.poll_timeout();
    CHECK(deadline == std::optional<std::uint64_t>(w.now + 200 * ms));
    std::size_t stored = store.entries.size();
    w.server.conn(w.held_key).respond(w.held->get(), R"({"content":[]})");
    w.server.handle_timeout(w.now);
    CHECK(store.entries.size() == stored + 1); // the answer, kept for the client's return
    // A store that cannot be read: 503, and the client comes back.
    store.down = true;
    w.now = deadline.value_or(0);
    w.client.handle_timeout(w.now);
    w.run();
    CHECK(w.seen.back() == "GET 503" && store.replays == 1);
    CHECK(!w.got(MCPW_EVENT_RESPONSE, id));
    store.down = false;
    deadline = w.client.poll_timeout();
    CHECK(deadline.has_value() && *deadline > w.now);
    w.now = deadline.value_or(0);
    w.client.handle_timeout(w.now);
    w.run();
    CHECK(w.seen.back() == "GET 200" && store.replays == 2);
    CHECK(w.got(MCPW_EVENT_RESPONSE, id));
    CHECK(w.client.end_session());
    w.run();
    CHECK(store.forgets == 1 && store.entries.empty());
}

// A store that throws cannot end the program: replay's exception is a failed read (503, and
// the client comes back), append's and forget's are kept for take_store_error.
class throwing_store : public vector_store {
public:
    bool throwing = false;
    void append(std::string_view session, std::uint64_t stream, std::uint64_t event,
                std::string_view bytes) override {
        if (throwing) throw std::runtime_error("append: the store is down");
        vector_store::append(session, stream, event, bytes);
    }
    bool replay(std::string_view session, std::uint64_t stream, std::uint64_t after,
                const mcpw::replay_sink &sink) override {
        if (throwing) {
            replays++;
            throw std::runtime_error("replay: the store is down");
        }
        return vector_store::replay(session, stream, after, sink);
    }
    void forget(std::string_view session) override {
        if (throwing) throw std::runtime_error("forget: the store is down");
        vector_store::forget(session);
    }
};

std::string what(const std::exception_ptr &e) {
    try {
        if (e) std::rethrow_exception(e);
    } catch (const std::exception &x) {
        return x.what();
    }
    return "";
}

void test_http_a_throwing_event_store_is_caught() {
    throwing_store store;
    mcpw::http_server_options options;
    options.events = &store;
    options.retry = std::chrono::milliseconds(200);
    http_world w(make_http_server(std::move(options)), mcpw::client_era::legacy);
    w.hold_slow = true;
    w.poll_slow = true;
    std::int64_t id = w.client.conn().request(w.now, "tools/call", R"({"name":"slow"})");
    w.run();
    CHECK(w.held && !w.got(MCPW_EVENT_RESPONSE, id));
    CHECK(w.server.take_store_error() == nullptr);
    auto deadline = w.client.poll_timeout();
    store.throwing = true;
    // The answer's append throws: kept, and the first one only until taken.
    w.server.conn(w.held_key).respond(w.held->get(), R"({"content":[]})");
    w.server.handle_timeout(w.now);
    CHECK(what(w.server.take_store_error()) == "append: the store is down");
    CHECK(w.server.take_store_error() == nullptr);
    // The client's resumption: replay throws, 503.
    w.now = deadline.value_or(0);
    w.client.handle_timeout(w.now);
    w.run();
    CHECK(w.seen.back() == "GET 503" && store.replays == 1);
    CHECK(!w.got(MCPW_EVENT_RESPONSE, id));
    // The session's end: forget throws, kept too.
    CHECK(w.client.end_session());
    w.run();
    CHECK(what(w.server.take_store_error()) == "forget: the store is down");
}
// Move assignment frees the server assigned over while the hooks it calls into live (its
// event store hears of its live session's end), and takes the other's server and hooks: its
// session goes on, its events stored in its own store.
void test_http_server_move_assignment() {
    vector_store old_store, new_store;
    mcpw::http_server_options old_options, new_options;
    old_options.events = &old_store;
    new_options.events = &new_store;
    http_world kept(make_http_server(std::move(old_options)), mcpw::client_era::legacy);
    http_world moved(make_http_server(std::move(new_options)), mcpw::client_era::legacy);
    CHECK(kept.server.counts().sessions == 1 && moved.server.counts().sessions == 1);
    mcpw_http_server *raw = moved.server.get();
    kept.server = std::move(moved.server);
    CHECK(kept.server.get() == raw && moved.server.get() == nullptr); // NOLINT(bugprone-use-after-move)
    CHECK(old_store.forgets == 1 && new_store.forgets == 0);
    kept.client = std::move(moved.client);
    kept.events.clear();
    kept.hold_slow = kept.poll_slow = true; // an answer that goes by way of the store
    std::int64_t id = kept.client.conn().request(kept.now, "tools/call", R"({"name":"slow"})");
    kept.run();
    CHECK(kept.held && !kept.got(MCPW_EVENT_RESPONSE, id));
    const std::size_t stored = new_store.entries.size();
    kept.server.conn(kept.held_key).respond(kept.held->get(), R"({"content":[]})");
    kept.server.handle_timeout(kept.now);
    CHECK(new_store.entries.size() == stored + 1 && old_store.entries.empty());
    kept.now = kept.client.poll_timeout().value_or(0);
    kept.client.handle_timeout(kept.now);
    kept.run();
    CHECK(kept.got(MCPW_EVENT_RESPONSE, id) && new_store.replays == 1);
    CHECK(kept.client.end_session());
    kept.run();
    CHECK(kept.server.counts().sessions == 0 && new_store.forgets == 1);
    // Assigned over by an empty one (moved from), it frees its server at once.
    kept.server = std::move(moved.server); // NOLINT(bugprone-use-after-move)
    CHECK(kept.server.get() == nullptr && !kept.server.take_store_error());
}
} // namespace

int main() {
    run("version", test_version);
    run("handles_are_move_only_and_free_once", test_handles_are_move_only_and_free_once);
    run("errors_carry_their_code", test_errors_carry_their_code);
    run("config_round_trips", test_config_round_trips);
    run("a_session_in_memory", test_a_session_in_memory);
    run("owned_ids_read_only_the_field_of_their_kind",
        test_owned_ids_read_only_the_field_of_their_kind);
    run("the_example_server_answers_mistakes_and_drops_what_it_cannot_give",
        test_the_example_server_answers_mistakes_and_drops_what_it_cannot_give);
    run("timeouts_and_deadlines", test_timeouts_and_deadlines);
    run("the_stateless_era", test_the_stateless_era);
    run("related_requests_and_frames", test_related_requests_and_frames);
    run("review_listens", test_review_listens);
    run("tasks", test_tasks);
    run("url_elicitation_and_legacy_tasks", test_url_elicitation_and_legacy_tasks);
    run("json_helpers", test_json_helpers);
    run("decode", test_decode);
    run("http_handles_are_move_only_and_report_errors",
        test_http_handles_are_move_only_and_report_errors);
    run("http_a_session_in_memory", test_http_a_session_in_memory);
    run("http_the_stateless_era_and_a_later_answer",
        test_http_the_stateless_era_and_a_later_answer);
    run("http_polling_resumes_from_the_event_store",
        test_http_polling_resumes_from_the_event_store);
    run("http_a_throwing_event_store_is_caught", test_http_a_throwing_event_store_is_caught);
    run("http_server_move_assignment", test_http_server_move_assignment);
    std::printf("\ntest result: %s. %d passed; %d failed\n", failed == 0 ? "ok" : "FAILED", passed,
                failed);
    return failed == 0 ? 0 : 1;
}
