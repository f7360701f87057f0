/*
 * Tests of the mcpwire C ABI from C: every exported function, every result code C can reach,
 * and misuse (NULL everywhere, zero lengths, invalid UTF-8 and JSON, use after the connection
 * closed on a fatal error).
 *
 * A client and a server engine talk to each other in memory, with simulated time; so do an
 * mcpw_http_client and an mcpw_http_server, through a small pump that plays the HTTP
 * libraries' part (no sockets). Each test prints one line; the last line is "test result:
 * ok. N passed; 0 failed" (or FAILED) and the exit status is 0 only when everything passed.
 * tests/c_abi.rs builds and runs this under ASan+UBSan and under valgrind.
 */
#include "mcpwire.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- A tiny test harness ------------------------------------------------------------------ */

static int checks_failed_in_test;
static int tests_passed;
static int tests_failed;

/* Every result code seen, to prove each reachable code is reached. */
static int seen_results[1000];

#define S(lit) (lit), (sizeof(lit) - 1)

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "    %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            checks_failed_in_test++;                                                     \
        }                                                                                \
    } while (0)

/* Calls an mcpwire function and checks its result code. */
#define RC(expected, call)                                                                 \
    do {                                                                                   \
        mcpw_result rc_ = (call);                                                          \
        if ((int)rc_ >= 0 && (int)rc_ < 1000) seen_results[(int)rc_] = 1;                  \
        if (rc_ != (expected)) {                                                           \
            fprintf(stderr, "    %s:%d: %s returned %d (%s), expected %d (%s)\n", __FILE__, \
                    __LINE__, #call, (int)rc_, mcpw_result_message((int)rc_),               \
                    (int)(expected), mcpw_result_message((int)(expected)));                 \
            checks_failed_in_test++;                                                       \
        }                                                                                  \
    } while (0)

#define OK(call) RC(MCPW_OK, call)

static void run(const char *name, void (*test)(void)) {
    checks_failed_in_test = 0;
    test();
    if (checks_failed_in_test == 0) {
        tests_passed++;
        printf("test %s ... ok\n", name);
    } else {
        tests_failed++;
        printf("test %s ... FAILED\n", name);
    }
}

static int str_eq(mcpw_str s, const char *text) {
    size_t n = strlen(text);
    return s.ptr != NULL && s.len == n && (n == 0 || memcmp(s.ptr, text, n) == 0);
}

/* Whether `haystack` (len bytes) contains the NUL-terminated `needle`. */
static int contains(const uint8_t *haystack, size_t len, const char *needle) {
    size_t n = strlen(needle);
    size_t i;
    if (n > len) return 0;
    for (i = 0; i + n <= len; i++) {
        if (memcmp(haystack + i, needle, n) == 0) return 1;
    }
    return 0;
}

/* ---- Fixtures ------------------------------------------------------------------------------ */

#define MS 1000000ull

/* Clients start in the handshake era (the default, auto, would probe with server/discover
   first); servers speak both eras, as by default. */
static mcpw_config *make_config(uint32_t role) {
    mcpw_config *config = NULL;
    OK(mcpw_config_new(role, S("test"), S("1.0"), &config));
    if (role == MCPW_ROLE_CLIENT) OK(mcpw_config_set_client_era(config, MCPW_CLIENT_ERA_LEGACY));
    return config;
}

static mcpw_conn *make_conn(const mcpw_config *config, uint64_t now) {
    mcpw_conn *conn = NULL;
    OK(mcpw_conn_new(config, now, &conn));
    return conn;
}

/* Moves every pending byte from one engine to the other, one byte less than lent first, so
   partial writes are exercised. Returns the number of bytes moved. */
static size_t pump(mcpw_conn *from, mcpw_conn *to, uint64_t now) {
    size_t moved = 0;
    for (;;) {
        const uint8_t *bytes = NULL;
        size_t len = 0;
        uint64_t stream = 99;
        OK(mcpw_conn_transmit(from, &bytes, &len, &stream));
        if (len == 0) {
            CHECK(bytes == NULL);
            break;
        }
        CHECK(stream == 0);
        size_t first = len > 1 ? len - 1 : len;
        OK(mcpw_conn_handle_input(to, now, bytes, first));
        OK(mcpw_conn_consume(from, first));
        moved += first;
    }
    return moved;
}

/* Takes the next event, skipping nothing. */
static mcpw_event next(mcpw_conn *conn) {
    mcpw_event ev;
    memset(&ev, 0xA5, sizeof ev); /* outputs must be fully written */
    OK(mcpw_conn_poll_event(conn, &ev));
    return ev;
}

/* Drains events until NONE, returning how many had `kind`. */
static int drain(mcpw_conn *conn, mcpw_event_kind kind) {
    int n = 0;
    for (;;) {
        mcpw_event ev = next(conn);
        if (ev.kind == MCPW_EVENT_NONE) return n;
        if (ev.kind == kind) n++;
    }
}

/* A client and a server after the handshake, at time *now. */
typedef struct {
    mcpw_conn *client;
    mcpw_conn *server;
    uint64_t now;
} pair;

/* make_pair with the client declaring `client_caps`. */
static pair make_pair_with(const char *client_caps, const char *server_caps, const char *version) {
    pair p = {NULL, NULL, 1000 * MS};
    mcpw_config *cc = make_config(MCPW_ROLE_CLIENT);
    mcpw_config *sc = make_config(MCPW_ROLE_SERVER);
    OK(mcpw_config_set_capabilities(cc, client_caps, strlen(client_caps)));
    OK(mcpw_config_set_capabilities(sc, server_caps, strlen(server_caps)));
    OK(mcpw_config_set_instructions(sc, S("Be \"nice\".")));
    if (version != NULL) {
        mcpw_str v = {version, strlen(version)};
        OK(mcpw_config_set_versions(cc, &v, 1));
    }
    p.client = make_conn(cc, p.now);
    p.server = make_conn(sc, p.now);
    mcpw_config_free(cc);
    mcpw_config_free(sc);
    /* initialize, its result, then notifications/initialized */
    pump(p.client, p.server, p.now);
    pump(p.server, p.client, p.now);
    pump(p.client, p.server, p.now);
    CHECK(drain(p.client, MCPW_EVENT_READY) == 1);
    CHECK(drain(p.server, MCPW_EVENT_READY) == 1);
    return p;
}

static pair make_pair(const char *server_caps, const char *version) {
    return make_pair_with("{\"roots\":{\"listChanged\":true},\"sampling\":{}}", server_caps, version);
}

static void free_pair(pair *p) {
    mcpw_conn_free(p->client);
    mcpw_conn_free(p->server);
}

static void exchange(pair *p) {
    size_t moved;
    do {
        moved = pump(p->client, p->server, p->now) + pump(p->server, p->client, p->now);
    } while (moved > 0);
}

/* ---- Tests --------------------------------------------------------------------------------- */

static void test_version(void) {
    CHECK(strcmp(mcpw_version(), MCPWIRE_VERSION) == 0);
    CHECK(MCPWIRE_VERSION_MAJOR == 0 && MCPWIRE_VERSION_MINOR == 1 && MCPWIRE_VERSION_PATCH == 0);
}

static void test_result_messages(void) {
    static const int codes[] = {
        MCPW_OK, MCPW_ERR_NULL_ARGUMENT, MCPW_ERR_INVALID_UTF8, MCPW_ERR_INVALID_JSON,
        MCPW_ERR_JSON_WRONG_TYPE, MCPW_ERR_DUPLICATE_KEY, MCPW_ERR_INVALID_ID,
        MCPW_ERR_UNKNOWN_VERSION, MCPW_ERR_INVALID_ARGUMENT, MCPW_ERR_CONSUME_TOO_MUCH,
        MCPW_ERR_CONFIG_REFUSED, MCPW_ERR_CLOSED, MCPW_ERR_CLOSING, MCPW_ERR_NOT_INITIALIZED,
        MCPW_ERR_ENGINE_OWNED, MCPW_ERR_NOT_IN_VERSION, MCPW_ERR_WRONG_DIRECTION,
        MCPW_ERR_NOT_NEGOTIATED, MCPW_ERR_INVALID_PARAMS, MCPW_ERR_CODE_NOT_IN_VERSION,
        MCPW_ERR_TOO_MANY_IN_FLIGHT, MCPW_ERR_OUTPUT_FULL, MCPW_ERR_UNKNOWN_REQUEST,
        MCPW_ERR_CANNOT_CANCEL_INITIALIZE, MCPW_ERR_NO_PROGRESS_TOKEN,
        MCPW_ERR_NON_INCREASING_PROGRESS, MCPW_ERR_REQUEST_SCOPED, MCPW_ERR_NOT_ELIGIBLE,
        MCPW_ERR_STALE_VIEW, MCPW_ERR_NOT_OWNER, MCPW_ERR_UNKNOWN_STREAM,
        MCPW_ERR_UNKNOWN_CONNECTION, MCPW_ERR_REENTRANT, MCPW_ERR_TASKS_FULL,
        MCPW_ERR_UNKNOWN_TASK,
        MCPW_ERR_TASK_TERMINAL, MCPW_ERR_TASK_KEY_REUSED, MCPW_ERR_TOO_MANY_INPUT_REQUESTS,
        MCPW_ERR_INVALID_TASK_PAYLOAD, MCPW_ERR_COMMAND_REFUSED, MCPW_ERR_PANIC,
        MCPW_ERR_POISONED,
    };
    size_t i, j;
    for (i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *m = mcpw_result_message(codes[i]);
        CHECK(m != NULL && strlen(m) > 0 && strcmp(m, "unknown result code") != 0);
        for (j = 0; j < i; j++) CHECK(codes[i] != codes[j]);
    }
    CHECK(strcmp(mcpw_result_message(-1), "unknown result code") == 0);
    CHECK(strcmp(mcpw_result_message(150), "unknown result code") == 0);
    CHECK(strcmp(mcpw_result_message(0), "ok") == 0);
}

static void test_config_new_and_free(void) {
    mcpw_config *config = NULL;
    mcpw_config_free(NULL);
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_config_new(0, S("x"), S("1"), &config));
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_config_new(3, S("x"), S("1"), &config));
    CHECK(config == NULL); /* outputs are written only on success */
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_new(MCPW_ROLE_SERVER, S("x"), S("1"), NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_new(MCPW_ROLE_SERVER, NULL, 3, S("1"), &config));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_config_new(MCPW_ROLE_SERVER, S("\xff"), S("1"), &config));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_config_new(MCPW_ROLE_SERVER, S("x"), S("\xc3"), &config));
    CHECK(config == NULL);
    /* Empty name and version: NULL with length 0 is the empty string. */
    OK(mcpw_config_new(MCPW_ROLE_CLIENT, NULL, 0, NULL, 0, &config));
    CHECK(config != NULL);
    mcpw_config_free(config);
}

static void test_config_setters(void) {
    mcpw_config *c = make_config(MCPW_ROLE_SERVER);
    mcpw_conn *conn = NULL;
    mcpw_str versions[2] = {{"2025-06-18", 10}, {"2024-11-05", 10}};
    mcpw_str unknown = {"1999-01-01", 10};
    mcpw_str bad = {"\xff", 1};
    mcpw_str null_text = {NULL, 4};
    mcpw_limits limits;
    uint32_t flags = 0;

    /* versions */
    OK(mcpw_config_set_versions(c, versions, 2));
    RC(MCPW_ERR_UNKNOWN_VERSION, mcpw_config_set_versions(c, &unknown, 1));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_config_set_versions(c, &bad, 1));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_versions(c, &null_text, 1));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_versions(c, NULL, 2));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_versions(NULL, versions, 2));
    OK(mcpw_config_set_versions(c, NULL, 0));
    RC(MCPW_ERR_CONFIG_REFUSED, mcpw_conn_new(c, 0, &conn));
    CHECK(conn == NULL);
    OK(mcpw_config_set_versions(c, versions, 2));

    /* info */
    OK(mcpw_config_set_info(c, S("{\"name\":\"n\",\"version\":\"1\",\"title\":\"T\"}")));
    RC(MCPW_ERR_INVALID_JSON, mcpw_config_set_info(c, S("{\"name\":")));
    RC(MCPW_ERR_INVALID_JSON, mcpw_config_set_info(c, NULL, 0));
    RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_config_set_info(c, S("[1]")));
    /* Every schema's Implementation has string name and version. */
    RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_config_set_info(c, S("{\"title\":\"x\"}")));
    RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_config_set_info(c, S("{\"name\":\"n\",\"version\":1}")));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_config_set_info(c, S("{\"name\":\"\xff\"}")));

    /* capabilities */
    OK(mcpw_config_set_capabilities(c, S("{\"tools\":{}}")));
    RC(MCPW_ERR_INVALID_JSON, mcpw_config_set_capabilities(c, S("{tools}")));
    RC(MCPW_ERR_INVALID_JSON, mcpw_config_set_capabilities(c, NULL, 0));
    RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_config_set_capabilities(c, S("true")));
    /* A capability the spec defines is an object; one of our own may be anything. */
    RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_config_set_capabilities(c, S("{\"tools\":5}")));
    OK(mcpw_config_set_capabilities(c, S("{\"tools\":{},\"x-ours\":5}")));
    RC(MCPW_ERR_DUPLICATE_KEY, mcpw_config_set_capabilities(c, S("{\"tools\":{},\"tools\":{}}")));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_config_set_capabilities(c, S("\"\xfe\"")));

    /* instructions */
    OK(mcpw_config_set_instructions(c, S("hello")));
    OK(mcpw_config_set_instructions(c, NULL, 0));
    OK(mcpw_config_set_instructions(c, "", 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_instructions(c, NULL, 2));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_config_set_instructions(c, S("\x80")));

    /* eras and discovery */
    OK(mcpw_config_set_client_era(c, MCPW_CLIENT_ERA_AUTO));
    OK(mcpw_config_set_client_era(c, MCPW_CLIENT_ERA_MODERN));
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_config_set_client_era(c, 0));
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_config_set_client_era(c, 4));
    OK(mcpw_config_set_discover_timeout(c, 250));
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_config_set_discover_timeout(c, 0));
    OK(mcpw_config_set_discover_cache(c, 0, MCPW_CACHE_PRIVATE));
    OK(mcpw_config_set_discover_cache(c, 60000, MCPW_CACHE_PUBLIC));
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_config_set_discover_cache(c, 1, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_client_era(NULL, MCPW_CLIENT_ERA_AUTO));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_discover_timeout(NULL, 1));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_discover_cache(NULL, 1, MCPW_CACHE_PUBLIC));

    /* timeouts */
    OK(mcpw_config_set_timeouts(c, 5000, 60000));
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_config_set_timeouts(c, 0, 60000));
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_config_set_timeouts(c, 5000, 0));

    /* limits */
    OK(mcpw_config_get_limits(c, &limits));
    CHECK(limits.max_frame == 16u * 1024 * 1024);
    CHECK(limits.max_outbound_in_flight == 1024 && limits.max_inbound_in_flight == 256);
    CHECK(limits.max_buffered_output == 16u * 1024 * 1024);
    CHECK(limits.max_remembered_ids == 1024 && limits.max_queued_events == 4096);
    limits.max_frame = 4096;
    OK(mcpw_config_set_limits(c, &limits));
    limits.max_frame = 1;
    OK(mcpw_config_get_limits(c, &limits));
    CHECK(limits.max_frame == 4096);
    limits.max_queued_events = 0;
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_config_set_limits(c, &limits));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_limits(c, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_get_limits(c, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_get_limits(NULL, &limits));

    /* policy */
    OK(mcpw_config_get_policy(c, &flags));
    CHECK(flags == MCPW_POLICY_DEFAULT);
    OK(mcpw_config_set_policy(c, MCPW_POLICY_DEFAULT | MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS |
                                     MCPW_POLICY_DELIVER_NON_INCREASING_PROGRESS |
                                     MCPW_POLICY_REVIEW_LISTENS));
    OK(mcpw_config_get_policy(c, &flags));
    CHECK(flags == (MCPW_POLICY_DEFAULT | MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS |
                    MCPW_POLICY_DELIVER_NON_INCREASING_PROGRESS | MCPW_POLICY_REVIEW_LISTENS));
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_config_set_policy(c, 1u << 20));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_get_policy(c, NULL));
    OK(mcpw_config_set_policy(c, 0));

    /* Every setter refuses a NULL handle. */
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_info(NULL, S("{}")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_capabilities(NULL, S("{}")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_instructions(NULL, S("x")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_timeouts(NULL, 1, 1));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_policy(NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_get_policy(NULL, &flags));

    /* The config is copied: freeing it leaves the connection intact. */
    conn = make_conn(c, 0);
    mcpw_config_free(c);
    {
        mcpw_role role = MCPW_ROLE_CLIENT;
        OK(mcpw_conn_role(conn, &role));
        CHECK(role == MCPW_ROLE_SERVER);
    }
    mcpw_conn_free(conn);
}

static void test_null_handles_and_outputs(void) {
    mcpw_event ev;
    mcpw_id id = {MCPW_ID_INT, 1, {NULL, 0}};
    const uint8_t *bytes = NULL;
    size_t len = 0, ours = 0, peers = 0;
    uint64_t stream = 0, deadline = 0;
    bool has = false;
    int64_t rid = 0;
    mcpw_state state;
    mcpw_role role;
    mcpw_str view;
    mcpw_stats stats;
    mcpw_era era;
    mcpw_request_context context;
    mcpw_conn *conn = NULL;
    mcpw_config *config = make_config(MCPW_ROLE_SERVER);

    mcpw_conn_free(NULL);
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_new(NULL, 0, &conn));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_new(config, 0, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_handle_input(NULL, 0, NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_handle_eof(NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_handle_timeout(NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_poll_event(NULL, &ev));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_transmit(NULL, &bytes, &len, &stream));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_consume(NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_poll_timeout(NULL, &has, &deadline));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_request(NULL, 0, S("ping"), NULL, 0, NULL, &rid));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_notify(NULL, S("x"), NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond(NULL, &id, S("{}")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond_error(NULL, &id, -1, S("m"), NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_progress(NULL, &id, 1, 0, false, NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_cancel(NULL, 0, 1, NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_close(NULL, 0, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_state(NULL, &state));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_role(NULL, &role));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_protocol_version(NULL, &view));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_peer_info(NULL, &view));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_peer_capabilities(NULL, &view));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_peer_instructions(NULL, &view));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_stats(NULL, &stats));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_in_flight(NULL, &ours, &peers));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_handle_frame(NULL, 0, 0, NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_request_related(NULL, 0, &id, S("ping"), NULL, 0, NULL, &rid));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_log(NULL, &id, MCPW_LOG_INFO, NULL, 0, S("1"), &has));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond_input_required(NULL, &id, NULL, 0, S("s")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_retry(NULL, 0, 1, NULL, 0, &rid));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_era(NULL, &era));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_request_context(NULL, &id, &context));

    conn = make_conn(config, 0);
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_handle_frame(conn, 0, 0, NULL, 3));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_request_related(conn, 0, NULL, S("ping"), NULL, 0, NULL, &rid));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_request_related(conn, 0, &id, S("ping"), NULL, 0, NULL, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_log(conn, &id, MCPW_LOG_INFO, NULL, 0, S("1"), NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_log(conn, NULL, MCPW_LOG_INFO, NULL, 0, S("1"), &has));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond_input_required(conn, NULL, NULL, 0, S("s")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_retry(conn, 0, 1, NULL, 0, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_retry(conn, 0, 1, NULL, 4, &rid));
    /* NULL with a non-zero length is a NULL argument whatever the length (above PTRDIFF_MAX it
       was "invalid argument"); a real pointer with such a length is the invalid argument. */
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_handle_input(conn, 0, NULL, SIZE_MAX));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_json_get(NULL, SIZE_MAX, S("a"), &view));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_config_set_info(config, NULL, SIZE_MAX));
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_conn_handle_input(conn, 0, (const uint8_t *)"x", SIZE_MAX));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_era(conn, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_request_context(conn, &id, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_request_context(conn, NULL, &context));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_poll_event(conn, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_transmit(conn, NULL, &len, &stream));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_transmit(conn, &bytes, NULL, &stream));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_transmit(conn, &bytes, &len, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_poll_timeout(conn, NULL, &deadline));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_poll_timeout(conn, &has, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_request(conn, 0, S("ping"), NULL, 0, NULL, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_request(conn, 0, NULL, 4, NULL, 0, NULL, &rid));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_request(conn, 0, S("ping"), NULL, 2, NULL, &rid));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_notify(conn, NULL, 1, NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond(conn, NULL, S("{}")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond(conn, &id, NULL, 2));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond_error(conn, NULL, -1, S("m"), NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond_error(conn, &id, -1, S("m"), NULL, 1));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_progress(conn, NULL, 1, 0, false, NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_cancel(conn, 0, 1, NULL, 3));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_handle_input(conn, 0, NULL, 10));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_state(conn, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_role(conn, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_protocol_version(conn, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_peer_info(conn, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_peer_capabilities(conn, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_peer_instructions(conn, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_stats(conn, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_in_flight(conn, NULL, &peers));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_in_flight(conn, &ours, NULL));
    CHECK(rid == 0);
    mcpw_conn_free(conn);
    mcpw_config_free(config);
}

static void test_handshake_and_getters(void) {
    pair p = make_pair("{\"tools\":{\"listChanged\":true},\"resources\":{}}", NULL);
    mcpw_state state = MCPW_STATE_CLOSED;
    mcpw_role role = MCPW_ROLE_SERVER;
    mcpw_str view;
    mcpw_stats stats;
    size_t ours = 9, peers = 9;
    bool has = true;
    uint64_t deadline = 7;

    OK(mcpw_conn_state(p.client, &state));
    CHECK(state == MCPW_STATE_OPERATING);
    OK(mcpw_conn_role(p.client, &role));
    CHECK(role == MCPW_ROLE_CLIENT);
    OK(mcpw_conn_protocol_version(p.client, &view));
    CHECK(str_eq(view, "2025-11-25"));
    OK(mcpw_conn_protocol_version(p.server, &view));
    CHECK(str_eq(view, "2025-11-25"));
    OK(mcpw_conn_peer_info(p.client, &view));
    CHECK(str_eq(view, "{\"name\":\"test\",\"version\":\"1.0\"}"));
    OK(mcpw_conn_peer_capabilities(p.client, &view));
    CHECK(str_eq(view, "{\"tools\":{\"listChanged\":true},\"resources\":{}}"));
    OK(mcpw_conn_peer_capabilities(p.server, &view));
    CHECK(str_eq(view, "{\"roots\":{\"listChanged\":true},\"sampling\":{}}"));
    OK(mcpw_conn_peer_instructions(p.client, &view));
    CHECK(str_eq(view, "Be \"nice\"."));
    OK(mcpw_conn_peer_instructions(p.server, &view));
    CHECK(view.ptr == NULL && view.len == 0);
    OK(mcpw_conn_stats(p.client, &stats));
    CHECK(stats.late_responses == 0 && stats.dropped_events == 0);
    OK(mcpw_conn_in_flight(p.client, &ours, &peers));
    CHECK(ours == 0 && peers == 0);
    OK(mcpw_conn_poll_timeout(p.server, &has, &deadline));
    CHECK(!has && deadline == 0);
    free_pair(&p);
}

static void test_getters_before_the_handshake(void) {
    mcpw_config *c = make_config(MCPW_ROLE_CLIENT);
    mcpw_conn *conn = make_conn(c, 5 * MS);
    mcpw_str view = {"x", 1};
    mcpw_state state = MCPW_STATE_CLOSED;
    bool has = false;
    uint64_t deadline = 0;
    OK(mcpw_conn_protocol_version(conn, &view));
    CHECK(view.ptr == NULL && view.len == 0);
    OK(mcpw_conn_peer_info(conn, &view));
    CHECK(view.ptr == NULL);
    OK(mcpw_conn_peer_capabilities(conn, &view));
    CHECK(view.ptr == NULL);
    OK(mcpw_conn_state(conn, &state));
    CHECK(state == MCPW_STATE_INITIALIZING);
    /* The initialize request is timed from creation, with the default 60 s. */
    OK(mcpw_conn_poll_timeout(conn, &has, &deadline));
    CHECK(has && deadline == 5 * MS + 60000 * MS);
    mcpw_conn_free(conn);
    mcpw_config_free(c);
}

static void test_request_and_response(void) {
    pair p = make_pair("{\"tools\":{}}", NULL);
    int64_t rid = 0;
    mcpw_event ev;
    size_t ours = 0, peers = 0;

    OK(mcpw_conn_request(p.client, p.now, S("tools/list"), S("{\"cursor\":\"c\"}"), NULL, &rid));
    CHECK(rid > 0);
    OK(mcpw_conn_in_flight(p.client, &ours, &peers));
    CHECK(ours == 1 && peers == 0);
    exchange(&p);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST);
    CHECK(ev.id.kind == MCPW_ID_INT && ev.id.integer == rid);
    CHECK(str_eq(ev.method, "tools/list"));
    CHECK(str_eq(ev.params, "{\"cursor\":\"c\"}"));
    CHECK(ev.result.ptr == NULL && ev.message.ptr == NULL && ev.version.ptr == NULL);
    OK(mcpw_conn_in_flight(p.server, &ours, &peers));
    CHECK(ours == 0 && peers == 1);
    /* Answer with the event's own views: the call copies them before they die. */
    OK(mcpw_conn_respond(p.server, &ev.id, ev.params.ptr, ev.params.len));
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_respond(p.server, &ev.id, S("{}")));
    exchange(&p);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_RESPONSE);
    CHECK(ev.request == rid);
    CHECK(str_eq(ev.result, "{\"cursor\":\"c\"}"));
    CHECK(next(p.client).kind == MCPW_EVENT_NONE);
    CHECK(next(p.client).kind == MCPW_EVENT_NONE);

    /* No params, and an error answer with data. */
    OK(mcpw_conn_request(p.client, p.now, S("tools/list"), NULL, 0, NULL, &rid));
    exchange(&p);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && ev.params.ptr == NULL && ev.params.len == 0);
    OK(mcpw_conn_respond_error(p.server, &ev.id, MCPW_JSONRPC_INVALID_PARAMS, S("bad \"cursor\""),
                               S("{\"cursor\":null}")));
    exchange(&p);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_ERROR && ev.request == rid);
    CHECK(ev.code == -32602);
    CHECK(str_eq(ev.message, "bad \"cursor\"")); /* decoded, escapes resolved */
    CHECK(str_eq(ev.data, "{\"cursor\":null}"));

    /* An error answer without data, with an empty message. */
    OK(mcpw_conn_request(p.client, p.now, S("tools/list"), NULL, 0, NULL, &rid));
    exchange(&p);
    ev = next(p.server);
    OK(mcpw_conn_respond_error(p.server, &ev.id, -1, NULL, 0, NULL, 0));
    exchange(&p);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_ERROR && ev.code == -1);
    CHECK(ev.message.ptr != NULL && ev.message.len == 0 && ev.data.ptr == NULL);
    free_pair(&p);
}

static void test_string_ids_round_trip_exactly(void) {
    pair p = make_pair("{\"tools\":{}}", NULL);
    const char *frame = "{\"jsonrpc\":\"2.0\",\"id\":\"a\\\"b\\u00e9\",\"method\":\"tools/list\"}\n";
    const uint8_t *bytes = NULL;
    size_t len = 0;
    uint64_t stream = 0;
    mcpw_event ev;
    mcpw_id copy;
    char saved[64];

    OK(mcpw_conn_handle_input(p.server, p.now, (const uint8_t *)frame, strlen(frame)));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST);
    CHECK(ev.id.kind == MCPW_ID_STRING);
    CHECK(str_eq(ev.id.string, "a\\\"b\\u00e9")); /* the wire form, escapes kept */
    /* Keep a copy of the id past the event, then answer with the copy. */
    CHECK(ev.id.string.len < sizeof saved);
    memcpy(saved, ev.id.string.ptr, ev.id.string.len);
    /* Only `kind` and the member it names are set: the other is not read. */
    memset(&copy, 0xAB, sizeof copy);
    copy.kind = MCPW_ID_STRING;
    copy.string.ptr = saved;
    copy.string.len = ev.id.string.len;
    CHECK(next(p.server).kind == MCPW_EVENT_NONE);
    OK(mcpw_conn_respond(p.server, &copy, S("{\"tools\":[]}")));
    OK(mcpw_conn_transmit(p.server, &bytes, &len, &stream));
    CHECK(contains(bytes, len, "\"id\":\"a\\\"b\\u00e9\""));
    OK(mcpw_conn_consume(p.server, len));

    /* 7 and "7" are different ids. */
    frame = "{\"jsonrpc\":\"2.0\",\"id\":\"7\",\"method\":\"tools/list\"}\n";
    OK(mcpw_conn_handle_input(p.server, p.now, (const uint8_t *)frame, strlen(frame)));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && ev.id.kind == MCPW_ID_STRING);
    {
        mcpw_id seven = {MCPW_ID_INT, 7, {NULL, 0}};
        RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_respond(p.server, &seven, S("{}")));
        seven.kind = MCPW_ID_STRING;
        seven.string.ptr = "7";
        seven.string.len = 1;
        OK(mcpw_conn_respond(p.server, &seven, S("{}")));
    }
    free_pair(&p);
}

static void test_invalid_command_arguments(void) {
    pair p = make_pair("{\"tools\":{}}", NULL);
    int64_t rid = -5;
    mcpw_request_options options = {0, 2, 0};
    mcpw_id id = {MCPW_ID_INT, 1, {NULL, 0}};
    mcpw_event ev;

    RC(MCPW_ERR_INVALID_UTF8, mcpw_conn_request(p.client, p.now, S("tools/\xff"), NULL, 0, NULL, &rid));
    RC(MCPW_ERR_INVALID_JSON, mcpw_conn_request(p.client, p.now, S("tools/list"), S("{"), NULL, &rid));
    RC(MCPW_ERR_INVALID_JSON, mcpw_conn_request(p.client, p.now, S("tools/list"), "", 0, NULL, &rid));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_conn_request(p.client, p.now, S("tools/list"), S("{\"a\":\"\xc0\"}"), NULL, &rid));
    RC(MCPW_ERR_INVALID_PARAMS, mcpw_conn_request(p.client, p.now, S("tools/list"), S("[1,2]"), NULL, &rid));
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_conn_request(p.client, p.now, S("tools/list"), NULL, 0, &options, &rid));
    options.progress = 0;
    options.reset_on_progress = 9;
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_conn_request(p.client, p.now, S("tools/list"), NULL, 0, &options, &rid));
    CHECK(rid == -5);
    RC(MCPW_ERR_INVALID_UTF8, mcpw_conn_notify(p.client, S("\xff"), NULL, 0));
    RC(MCPW_ERR_INVALID_JSON, mcpw_conn_notify(p.client, S("notifications/x"), S("nope")));
    RC(MCPW_ERR_INVALID_PARAMS, mcpw_conn_notify(p.client, S("notifications/x"), S("3")));

    OK(mcpw_conn_request(p.client, p.now, S("tools/list"), NULL, 0, NULL, &rid));
    exchange(&p);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST);
    id.integer = ev.id.integer;
    RC(MCPW_ERR_INVALID_JSON, mcpw_conn_respond(p.server, &id, S("{\"a\":}")));
    RC(MCPW_ERR_INVALID_JSON, mcpw_conn_respond(p.server, &id, NULL, 0));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_conn_respond_error(p.server, &id, -1, S("\xff"), NULL, 0));
    RC(MCPW_ERR_INVALID_JSON, mcpw_conn_respond_error(p.server, &id, -1, S("m"), S("{")));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_conn_progress(p.server, &id, 1, 0, false, S("\xff")));
    id.kind = 7;
    RC(MCPW_ERR_INVALID_ID, mcpw_conn_respond(p.server, &id, S("{}")));
    id.kind = MCPW_ID_NONE;
    RC(MCPW_ERR_INVALID_ID, mcpw_conn_respond(p.server, &id, S("{}")));
    id.kind = MCPW_ID_STRING;
    id.string.ptr = "a\"b"; /* a raw quote is not JSON string text */
    id.string.len = 3;
    RC(MCPW_ERR_INVALID_ID, mcpw_conn_respond(p.server, &id, S("{}")));
    id.string.ptr = "\xff";
    id.string.len = 1;
    RC(MCPW_ERR_INVALID_ID, mcpw_conn_respond(p.server, &id, S("{}")));
    id.string.ptr = "bad\\q";
    id.string.len = 5;
    RC(MCPW_ERR_INVALID_ID, mcpw_conn_respond_error(p.server, &id, -1, S("m"), NULL, 0));
    id.string.ptr = NULL;
    id.string.len = 3;
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond(p.server, &id, S("{}")));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_conn_cancel(p.client, p.now, rid, S("\xff")));
    /* Nothing was refused in a way that changed the connection: the request is still open. */
    id.kind = MCPW_ID_INT;
    OK(mcpw_conn_respond(p.server, &id, S("{}")));
    free_pair(&p);
}

static void test_zero_lengths(void) {
    pair p = make_pair("{\"tools\":{}}", NULL);
    int64_t rid = 0;
    mcpw_event ev;
    OK(mcpw_conn_handle_input(p.server, p.now, NULL, 0));
    OK(mcpw_conn_handle_input(p.server, p.now, (const uint8_t *)"", 0));
    OK(mcpw_conn_consume(p.server, 0));
    CHECK(next(p.server).kind == MCPW_EVENT_NONE);
    /* An empty method name is a (strange but legal) custom method. */
    OK(mcpw_conn_request(p.client, p.now, NULL, 0, NULL, 0, NULL, &rid));
    OK(mcpw_conn_notify(p.client, "", 0, NULL, 0));
    exchange(&p);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_VIOLATION || ev.kind == MCPW_EVENT_REQUEST);
    drain(p.server, MCPW_EVENT_NONE);
    free_pair(&p);
}

static void test_notifications(void) {
    pair p = make_pair("{\"tools\":{\"listChanged\":true}}", NULL);
    mcpw_event ev;
    OK(mcpw_conn_notify(p.server, S("notifications/tools/list_changed"), NULL, 0));
    OK(mcpw_conn_notify(p.client, S("notifications/roots/list_changed"), S("{}")));
    OK(mcpw_conn_notify(p.client, S("x/custom"), S("{\"k\":[1,2]}")));
    exchange(&p);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_NOTIFICATION);
    CHECK(str_eq(ev.method, "notifications/tools/list_changed") && ev.params.ptr == NULL);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_NOTIFICATION && str_eq(ev.method, "notifications/roots/list_changed"));
    CHECK(str_eq(ev.params, "{}"));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_NOTIFICATION && str_eq(ev.method, "x/custom"));
    CHECK(str_eq(ev.params, "{\"k\":[1,2]}"));
    free_pair(&p);
}

static void test_progress(void) {
    pair p = make_pair("{\"tools\":{}}", NULL);
    mcpw_request_options options = {0, 1, MCPW_PROGRESS_RESET_DEFAULT};
    int64_t rid = 0;
    mcpw_event ev;
    mcpw_id id;

    OK(mcpw_conn_request(p.client, p.now, S("tools/call"), S("{\"name\":\"count\"}"), &options, &rid));
    exchange(&p);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST);
    CHECK(contains((const uint8_t *)ev.params.ptr, ev.params.len, "\"progressToken\""));
    id = ev.id;
    OK(mcpw_conn_progress(p.server, &id, 1, 3, true, S("one")));
    OK(mcpw_conn_progress(p.server, &id, 2, 0, false, NULL, 0));
    RC(MCPW_ERR_NON_INCREASING_PROGRESS, mcpw_conn_progress(p.server, &id, 2, 3, true, NULL, 0));
    RC(MCPW_ERR_NON_INCREASING_PROGRESS, mcpw_conn_progress(p.server, &id, NAN, 3, true, NULL, 0));
    RC(MCPW_ERR_NON_INCREASING_PROGRESS, mcpw_conn_progress(p.server, &id, INFINITY, 3, true, NULL, 0));
    exchange(&p);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_PROGRESS && ev.request == rid);
    CHECK(ev.progress == 1 && ev.has_total && ev.total == 3 && str_eq(ev.message, "one"));
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_PROGRESS && ev.progress == 2 && !ev.has_total);
    CHECK(ev.message.ptr == NULL);
    OK(mcpw_conn_respond(p.server, &id, S("{\"content\":[]}")));
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_progress(p.server, &id, 3, 3, true, NULL, 0));
    exchange(&p);
    CHECK(next(p.client).kind == MCPW_EVENT_RESPONSE);

    /* Without a progress token, the server cannot report progress. */
    OK(mcpw_conn_request(p.client, p.now, S("tools/call"), S("{\"name\":\"count\"}"), NULL, &rid));
    exchange(&p);
    ev = next(p.server);
    RC(MCPW_ERR_NO_PROGRESS_TOKEN, mcpw_conn_progress(p.server, &ev.id, 1, 0, false, NULL, 0));
    /* Params with a progressToken of their own cannot ask the engine for one. */
    RC(MCPW_ERR_INVALID_PARAMS,
       mcpw_conn_request(p.client, p.now, S("tools/call"),
                         S("{\"_meta\":{\"progressToken\":5}}"), &options, &rid));
    free_pair(&p);
}

static void test_cancellation(void) {
    pair p = make_pair("{\"tools\":{}}", NULL);
    int64_t rid = 0;
    mcpw_event ev;
    mcpw_id id;
    mcpw_stats stats;

    OK(mcpw_conn_request(p.client, p.now, S("tools/call"), S("{\"name\":\"slow\"}"), NULL, &rid));
    exchange(&p);
    ev = next(p.server);
    id = ev.id;
    OK(mcpw_conn_cancel(p.client, p.now, rid, S("user \\ pressed stop")));
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_cancel(p.client, p.now, rid, NULL, 0));
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_cancel(p.client, p.now, 424242, NULL, 0));
    exchange(&p);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_PEER_CANCELLED);
    CHECK(ev.id.kind == MCPW_ID_INT && ev.id.integer == rid);
    CHECK(str_eq(ev.reason, "user \\ pressed stop"));
    /* Answering a cancelled request succeeds and sends nothing. */
    OK(mcpw_conn_respond(p.server, &id, S("{}")));
    OK(mcpw_conn_stats(p.server, &stats));
    CHECK(stats.suppressed_responses == 1);
    exchange(&p);
    CHECK(next(p.client).kind == MCPW_EVENT_NONE);

    /* Cancelling without a reason. */
    OK(mcpw_conn_request(p.client, p.now, S("tools/call"), S("{\"name\":\"slow\"}"), NULL, &rid));
    exchange(&p);
    CHECK(next(p.server).kind == MCPW_EVENT_REQUEST);
    OK(mcpw_conn_cancel(p.client, p.now, rid, NULL, 0));
    exchange(&p);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_PEER_CANCELLED && ev.reason.ptr == NULL);
    free_pair(&p);
}

static void test_timeouts(void) {
    pair p = make_pair("{\"tools\":{}}", NULL);
    mcpw_request_options options = {100, 0, MCPW_PROGRESS_RESET_OFF};
    int64_t rid = 0;
    bool has = false;
    uint64_t deadline = 0;
    mcpw_event ev;
    mcpw_stats stats;

    OK(mcpw_conn_request(p.client, p.now, S("tools/list"), NULL, 0, &options, &rid));
    OK(mcpw_conn_poll_timeout(p.client, &has, &deadline));
    CHECK(has && deadline == p.now + 100 * MS);
    exchange(&p);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST);
    /* Early: nothing happens. */
    OK(mcpw_conn_handle_timeout(p.client, deadline - 1));
    CHECK(next(p.client).kind == MCPW_EVENT_NONE);
    OK(mcpw_conn_handle_timeout(p.client, deadline));
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_TIMED_OUT && ev.request == rid);
    /* The late answer is dropped and counted. */
    p.now = deadline;
    exchange(&p); /* the cancellation reaches the server */
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_PEER_CANCELLED);
    {
        const char *late = "{\"jsonrpc\":\"2.0\",\"id\":";
        char frame[128];
        snprintf(frame, sizeof frame, "%s%lld,\"result\":{}}\n", late, (long long)rid);
        OK(mcpw_conn_handle_input(p.client, p.now, (const uint8_t *)frame, strlen(frame)));
    }
    CHECK(next(p.client).kind == MCPW_EVENT_NONE);
    OK(mcpw_conn_stats(p.client, &stats));
    CHECK(stats.late_responses == 1);

    /* Options with reset on progress are accepted; the default timeout applies with 0. */
    options.timeout_ms = 0;
    options.progress = 1;
    options.reset_on_progress = MCPW_PROGRESS_RESET_ON;
    OK(mcpw_conn_request(p.client, p.now, S("tools/list"), NULL, 0, &options, &rid));
    OK(mcpw_conn_poll_timeout(p.client, &has, &deadline));
    CHECK(has && deadline <= p.now + 60000 * MS);
    free_pair(&p);
}

static void test_partial_transmit_and_consume(void) {
    mcpw_config *c = make_config(MCPW_ROLE_CLIENT);
    mcpw_conn *conn = make_conn(c, 0);
    const uint8_t *bytes = NULL, *again = NULL;
    size_t len = 0, len2 = 0;
    uint64_t stream = 1;

    OK(mcpw_conn_transmit(conn, &bytes, &len, &stream));
    CHECK(len > 10 && bytes != NULL && stream == 0 && bytes[len - 1] == '\n');
    CHECK(contains(bytes, len, "\"method\":\"initialize\""));
    /* transmit does not change the handle: asking twice lends the same bytes. */
    OK(mcpw_conn_transmit(conn, &again, &len2, &stream));
    CHECK(again == bytes && len2 == len);
    RC(MCPW_ERR_CONSUME_TOO_MUCH, mcpw_conn_consume(conn, len + 1));
    OK(mcpw_conn_consume(conn, 1));
    OK(mcpw_conn_transmit(conn, &again, &len2, &stream));
    CHECK(len2 == len - 1 && again[0] == bytes[1]);
    OK(mcpw_conn_consume(conn, len2));
    OK(mcpw_conn_transmit(conn, &again, &len2, &stream));
    CHECK(again == NULL && len2 == 0);
    RC(MCPW_ERR_CONSUME_TOO_MUCH, mcpw_conn_consume(conn, 1));
    OK(mcpw_conn_consume(conn, 0));
    mcpw_conn_free(conn);
    mcpw_config_free(c);
}

static void test_violations(void) {
    pair p = make_pair("{\"tools\":{}}", NULL);
    const char *garbage = "{not json}\n";
    const char *bad_utf8 = "{\"jsonrpc\":\"2.0\",\"method\":\"x\xff\"}\n";
    const char *bad_version = "{\"jsonrpc\":\"1.0\",\"id\":3,\"method\":\"tools/list\"}\n";
    const char *unknown = "{\"jsonrpc\":\"2.0\",\"id\":999,\"result\":{}}\n";
    const char *no_method = "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"prompts/list\"}\n";
    const uint8_t *bytes = NULL;
    size_t len = 0;
    uint64_t stream = 0;
    mcpw_event ev;

    OK(mcpw_conn_handle_input(p.server, p.now, (const uint8_t *)garbage, strlen(garbage)));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_VIOLATION && ev.violation == MCPW_VIOLATION_PARSE);
    CHECK(ev.decode_reason == MCPW_DECODE_UNEXPECTED_BYTE);
    OK(mcpw_conn_transmit(p.server, &bytes, &len, &stream));
    CHECK(contains(bytes, len, "-32700"));
    OK(mcpw_conn_consume(p.server, len));

    OK(mcpw_conn_handle_input(p.server, p.now, (const uint8_t *)bad_utf8, strlen(bad_utf8)));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_VIOLATION && ev.decode_reason == MCPW_DECODE_INVALID_UTF8);

    OK(mcpw_conn_handle_input(p.server, p.now, (const uint8_t *)bad_version, strlen(bad_version)));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_VIOLATION && ev.violation == MCPW_VIOLATION_INVALID_MESSAGE);
    CHECK(ev.decode_reason == MCPW_DECODE_WRONG_VERSION);
    CHECK(ev.id.kind == MCPW_ID_INT && ev.id.integer == 3);

    OK(mcpw_conn_handle_input(p.server, p.now, (const uint8_t *)unknown, strlen(unknown)));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_VIOLATION && ev.violation == MCPW_VIOLATION_UNKNOWN_RESPONSE);
    CHECK(ev.decode_reason == MCPW_DECODE_NONE);

    /* prompts were not declared: answered with -32601 without involving us. */
    OK(mcpw_conn_handle_input(p.server, p.now, (const uint8_t *)no_method, strlen(no_method)));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_VIOLATION && ev.violation == MCPW_VIOLATION_METHOD_NOT_AVAILABLE);
    CHECK(ev.id.kind == MCPW_ID_STRING && str_eq(ev.id.string, "q"));
    CHECK(str_eq(ev.method, "prompts/list"));
    CHECK(next(p.server).kind == MCPW_EVENT_NONE);
    free_pair(&p);
}

static void test_frame_cap(void) {
    mcpw_config *c = make_config(MCPW_ROLE_SERVER);
    mcpw_conn *conn;
    mcpw_limits limits;
    char big[300];
    mcpw_event ev;
    OK(mcpw_config_get_limits(c, &limits));
    limits.max_frame = 128;
    OK(mcpw_config_set_limits(c, &limits));
    conn = make_conn(c, 0);
    memset(big, 'x', sizeof big);
    big[sizeof big - 1] = '\n';
    OK(mcpw_conn_handle_input(conn, 0, (const uint8_t *)big, sizeof big));
    ev = next(conn);
    CHECK(ev.kind == MCPW_EVENT_VIOLATION && ev.violation == MCPW_VIOLATION_FRAME_TOO_LONG);
    mcpw_conn_free(conn);
    mcpw_config_free(c);
}

static void test_engine_refusals(void) {
    mcpw_config *cc = make_config(MCPW_ROLE_CLIENT);
    mcpw_conn *client = make_conn(cc, 0);
    int64_t rid = 0;
    mcpw_id unknown = {MCPW_ID_INT, 77, {NULL, 0}};

    /* Before the handshake. */
    RC(MCPW_ERR_NOT_INITIALIZED, mcpw_conn_request(client, 0, S("tools/list"), NULL, 0, NULL, &rid));
    RC(MCPW_ERR_CANNOT_CANCEL_INITIALIZE, mcpw_conn_cancel(client, 0, 1, NULL, 0));
    RC(MCPW_ERR_ENGINE_OWNED, mcpw_conn_request(client, 0, S("initialize"), S("{}"), NULL, &rid));
    RC(MCPW_ERR_ENGINE_OWNED, mcpw_conn_notify(client, S("notifications/cancelled"), NULL, 0));
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_respond(client, &unknown, S("{}")));
    OK(mcpw_conn_request(client, 0, S("ping"), NULL, 0, NULL, &rid));
    mcpw_conn_free(client);
    mcpw_config_free(cc);

    {
        pair p = make_pair("{\"tools\":{}}", "2025-06-18");
        mcpw_id id;
        mcpw_event ev;
        RC(MCPW_ERR_WRONG_DIRECTION,
           mcpw_conn_request(p.client, p.now, S("sampling/createMessage"), S("{}"), NULL, &rid));
        RC(MCPW_ERR_NOT_NEGOTIATED,
           mcpw_conn_request(p.client, p.now, S("prompts/list"), NULL, 0, NULL, &rid));
        RC(MCPW_ERR_NOT_NEGOTIATED,
           mcpw_conn_notify(p.server, S("notifications/resources/list_changed"), NULL, 0));
        RC(MCPW_ERR_NOT_IN_VERSION,
           mcpw_conn_request(p.client, p.now, S("tasks/list"), NULL, 0, NULL, &rid));
        OK(mcpw_conn_request(p.client, p.now, S("tools/list"), NULL, 0, NULL, &rid));
        exchange(&p);
        ev = next(p.server);
        id = ev.id;
        /* -32042 exists only in 2025-11-25. */
        RC(MCPW_ERR_CODE_NOT_IN_VERSION, mcpw_conn_respond_error(p.server, &id, -32042, S("url"), NULL, 0));
        OK(mcpw_conn_respond_error(p.server, &id, MCPW_MCP_RESOURCE_NOT_FOUND, S("gone"), NULL, 0));
        free_pair(&p);
    }
}

static void test_bounds(void) {
    mcpw_config *cc = make_config(MCPW_ROLE_CLIENT);
    mcpw_config *sc = make_config(MCPW_ROLE_SERVER);
    mcpw_limits limits;
    mcpw_conn *client, *server;
    int64_t rid = 0;
    int i;
    mcpw_event ev;

    OK(mcpw_config_set_capabilities(sc, S("{\"tools\":{}}")));
    OK(mcpw_config_get_limits(cc, &limits));
    limits.max_outbound_in_flight = 1;
    OK(mcpw_config_set_limits(cc, &limits));
    client = make_conn(cc, 0);
    server = make_conn(sc, 0);
    pump(client, server, 0);
    pump(server, client, 0);
    pump(client, server, 0);
    drain(client, MCPW_EVENT_NONE);
    drain(server, MCPW_EVENT_NONE);
    OK(mcpw_conn_request(client, 0, S("tools/list"), NULL, 0, NULL, &rid));
    RC(MCPW_ERR_TOO_MANY_IN_FLIGHT, mcpw_conn_request(client, 0, S("tools/list"), NULL, 0, NULL, &rid));
    mcpw_conn_free(client);
    mcpw_conn_free(server);

    /* A server whose output nobody reads: commands fail with OUTPUT_FULL, and a peer that keeps
       asking for replies is cut off. */
    OK(mcpw_config_get_limits(sc, &limits));
    limits.max_buffered_output = 64;
    OK(mcpw_config_set_limits(sc, &limits));
    client = make_conn(cc, 0);
    server = make_conn(sc, 0);
    pump(client, server, 0);
    pump(server, client, 0);
    pump(client, server, 0);
    drain(server, MCPW_EVENT_NONE);
    OK(mcpw_conn_notify(server, S("x/one"), S("{\"padding\":\"0123456789012345678901234567890123456789\"}")));
    RC(MCPW_ERR_OUTPUT_FULL, mcpw_conn_notify(server, S("x/two"), NULL, 0));
    for (i = 0; i < 8; i++) {
        char ping[64];
        snprintf(ping, sizeof ping, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}\n", 100 + i);
        OK(mcpw_conn_handle_input(server, 0, (const uint8_t *)ping, strlen(ping)));
    }
    ev = next(server);
    CHECK(ev.kind == MCPW_EVENT_CLOSED && ev.close_reason == MCPW_CLOSE_PEER_NOT_READING);
    mcpw_conn_free(client);
    mcpw_conn_free(server);
    mcpw_config_free(cc);
    mcpw_config_free(sc);
}

/* How much input to feed at a time: 4 KiB by default, less under lowered limits (so that
   the requests one piece can hold stay within half of max_inbound_in_flight, and the error
   answers to a piece of junk lines within half of max_buffered_output). */
static void test_input_piece(void) {
    mcpw_config *c = make_config(MCPW_ROLE_SERVER);
    mcpw_limits limits;
    mcpw_conn *conn;
    size_t piece = 0;

    conn = make_conn(c, 0);
    OK(mcpw_conn_input_piece(conn, &piece));
    CHECK(piece == 4096);
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_input_piece(conn, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_input_piece(NULL, &piece));
    mcpw_conn_free(conn);

    OK(mcpw_config_get_limits(c, &limits));
    limits.max_inbound_in_flight = 64;
    OK(mcpw_config_set_limits(c, &limits));
    conn = make_conn(c, 0);
    OK(mcpw_conn_input_piece(conn, &piece));
    CHECK(piece == 32 * 36);
    mcpw_conn_free(conn);

    limits.max_inbound_in_flight = 256;
    limits.max_buffered_output = 128 * 1024;
    OK(mcpw_config_set_limits(c, &limits));
    conn = make_conn(c, 0);
    OK(mcpw_conn_input_piece(conn, &piece));
    CHECK(piece == 1024);
    mcpw_conn_free(conn);

    limits.max_inbound_in_flight = 1;
    OK(mcpw_config_set_limits(c, &limits));
    conn = make_conn(c, 0);
    OK(mcpw_conn_input_piece(conn, &piece));
    CHECK(piece == 64); /* never below 64 bytes */
    mcpw_conn_free(conn);
    mcpw_config_free(c);
}

static void test_graceful_close(void) {
    pair p = make_pair("{\"tools\":{}}", NULL);
    int64_t rid = 0, other = 0;
    mcpw_event ev;
    mcpw_state state;
    bool has = false;
    uint64_t deadline = 0;

    OK(mcpw_conn_request(p.client, p.now, S("tools/list"), NULL, 0, NULL, &rid));
    OK(mcpw_conn_close(p.client, p.now, 500));
    OK(mcpw_conn_state(p.client, &state));
    CHECK(state == MCPW_STATE_CLOSING);
    RC(MCPW_ERR_CLOSING, mcpw_conn_request(p.client, p.now, S("tools/list"), NULL, 0, NULL, &other));
    RC(MCPW_ERR_CLOSING, mcpw_conn_notify(p.client, S("x/y"), NULL, 0));
    OK(mcpw_conn_poll_timeout(p.client, &has, &deadline));
    CHECK(has && deadline <= p.now + 500 * MS);
    OK(mcpw_conn_handle_timeout(p.client, p.now + 500 * MS));
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_ABANDONED && ev.request == rid);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_CLOSED && ev.close_reason == MCPW_CLOSE_LOCAL);
    CHECK(next(p.client).kind == MCPW_EVENT_NONE);
    OK(mcpw_conn_state(p.client, &state));
    CHECK(state == MCPW_STATE_CLOSED);
    OK(mcpw_conn_poll_timeout(p.client, &has, &deadline));
    CHECK(!has);

    /* Use after close: commands are refused, inputs are accepted and ignored. */
    RC(MCPW_ERR_CLOSED, mcpw_conn_request(p.client, p.now, S("ping"), NULL, 0, NULL, &other));
    RC(MCPW_ERR_CLOSED, mcpw_conn_notify(p.client, S("x/y"), NULL, 0));
    RC(MCPW_ERR_CLOSED, mcpw_conn_cancel(p.client, p.now, rid, NULL, 0));
    OK(mcpw_conn_close(p.client, p.now, 0));
    OK(mcpw_conn_handle_input(p.client, p.now, (const uint8_t *)"{}\n", 3));
    OK(mcpw_conn_handle_eof(p.client, p.now));
    OK(mcpw_conn_handle_timeout(p.client, p.now + 1000000 * MS));
    CHECK(next(p.client).kind == MCPW_EVENT_NONE);
    free_pair(&p);

    /* The peer's requests in flight hold a close too, until answered or refused. */
    {
        pair q = make_pair("{\"tools\":{}}", NULL);
        size_t n = 9;
        OK(mcpw_conn_request(q.client, q.now, S("tools/list"), NULL, 0, NULL, &rid));
        exchange(&q);
        CHECK(next(q.server).kind == MCPW_EVENT_REQUEST);
        OK(mcpw_conn_close(q.server, q.now, 500));
        OK(mcpw_conn_state(q.server, &state));
        CHECK(state == MCPW_STATE_CLOSING);
        RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_refuse_peer_requests(NULL, S("x"), &n));
        RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_refuse_peer_requests(q.server, NULL, 3, &n));
        OK(mcpw_conn_refuse_peer_requests(q.server, S("stopping"), &n));
        CHECK(n == 1);
        OK(mcpw_conn_state(q.server, &state));
        CHECK(state == MCPW_STATE_CLOSED);
        RC(MCPW_ERR_CLOSED, mcpw_conn_refuse_peer_requests(q.server, S("stopping"), NULL));
        exchange(&q);
        ev = next(q.client);
        CHECK(ev.kind == MCPW_EVENT_ERROR && ev.request == rid && ev.code == -32603);
        free_pair(&q);
    }
}

static void test_eof(void) {
    pair p = make_pair("{\"tools\":{}}", NULL);
    int64_t rid = 0;
    mcpw_event ev;
    mcpw_id id;
    OK(mcpw_conn_request(p.client, p.now, S("tools/list"), NULL, 0, NULL, &rid));
    exchange(&p);
    ev = next(p.server);
    id = ev.id;
    /* The last line may lack its newline: it is processed at EOF. */
    {
        const char *last = "{\"jsonrpc\":\"2.0\",\"method\":\"x/last\"}";
        OK(mcpw_conn_handle_input(p.server, p.now, (const uint8_t *)last, strlen(last)));
    }
    OK(mcpw_conn_handle_eof(p.server, p.now));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_NOTIFICATION && str_eq(ev.method, "x/last"));
    /* Its events come out first (a request on it could be answered); the end of input is
       then due at once, and closes at the next timer call. */
    {
        bool has = false;
        uint64_t at = 1;
        OK(mcpw_conn_poll_timeout(p.server, &has, &at));
        CHECK(has && at == 0);
    }
    OK(mcpw_conn_handle_timeout(p.server, p.now));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_CLOSED && ev.close_reason == MCPW_CLOSE_EOF);
    RC(MCPW_ERR_CLOSED, mcpw_conn_respond(p.server, &id, S("{}")));
    RC(MCPW_ERR_CLOSED, mcpw_conn_progress(p.server, &id, 1, 0, false, NULL, 0));
    RC(MCPW_ERR_CLOSED, mcpw_conn_respond_error(p.server, &id, -1, S("m"), NULL, 0));
    OK(mcpw_conn_handle_eof(p.client, p.now));
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_ABANDONED && ev.request == rid);
    CHECK(next(p.client).kind == MCPW_EVENT_CLOSED);
    free_pair(&p);
}

/* A client whose server answers `initialize` with `answer` (a JSON-RPC frame for id 1). */
static mcpw_event client_after_initialize(const char *answer, mcpw_conn **out_client) {
    mcpw_config *cc = make_config(MCPW_ROLE_CLIENT);
    mcpw_conn *client = make_conn(cc, 0);
    const uint8_t *bytes = NULL;
    size_t len = 0;
    uint64_t stream = 0;
    mcpw_config_free(cc);
    OK(mcpw_conn_transmit(client, &bytes, &len, &stream));
    CHECK(contains(bytes, len, "\"id\":1,"));
    OK(mcpw_conn_consume(client, len));
    OK(mcpw_conn_handle_input(client, 1, (const uint8_t *)answer, strlen(answer)));
    *out_client = client;
    return next(client);
}

static void test_fatal_handshake_failures(void) {
    mcpw_conn *client = NULL;
    mcpw_event ev;
    int64_t rid = 0;
    mcpw_config *cc;

    ev = client_after_initialize(
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"1999-01-01\","
        "\"capabilities\":{},\"serverInfo\":{\"name\":\"s\",\"version\":\"1\"}}}\n",
        &client);
    CHECK(ev.kind == MCPW_EVENT_CLOSED && ev.close_reason == MCPW_CLOSE_UNSUPPORTED_VERSION);
    CHECK(str_eq(ev.version, "1999-01-01"));
    /* Use after the fatal error: everything is refused or ignored, nothing crashes. */
    RC(MCPW_ERR_CLOSED, mcpw_conn_request(client, 2, S("ping"), NULL, 0, NULL, &rid));
    OK(mcpw_conn_handle_input(client, 2, (const uint8_t *)"garbage\n", 8));
    OK(mcpw_conn_handle_timeout(client, 1000000 * MS));
    CHECK(next(client).kind == MCPW_EVENT_NONE);
    mcpw_conn_free(client);

    ev = client_after_initialize(
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"no \\\"roots\\\"\"}}\n",
        &client);
    CHECK(ev.kind == MCPW_EVENT_CLOSED && ev.close_reason == MCPW_CLOSE_INITIALIZE_REJECTED);
    CHECK(ev.code == -32602);
    CHECK(str_eq(ev.version, "no \"roots\"")); /* the refusal's message */
    mcpw_conn_free(client);

    ev = client_after_initialize("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n", &client);
    CHECK(ev.kind == MCPW_EVENT_CLOSED &&
          ev.close_reason == MCPW_CLOSE_INVALID_INITIALIZE_RESULT);
    mcpw_conn_free(client);

    cc = make_config(MCPW_ROLE_CLIENT);
    OK(mcpw_config_set_timeouts(cc, 1000, 10000));
    client = make_conn(cc, 0);
    OK(mcpw_conn_handle_timeout(client, 1000 * MS));
    ev = next(client);
    CHECK(ev.kind == MCPW_EVENT_CLOSED && ev.close_reason == MCPW_CLOSE_INITIALIZE_TIMED_OUT);
    mcpw_conn_free(client);
    mcpw_config_free(cc);
}

static void test_strict_lifecycle_policy(void) {
    mcpw_config *sc = make_config(MCPW_ROLE_SERVER);
    mcpw_conn *server;
    const char *early = "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\"}\n";
    const char *ping = "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}\n";
    mcpw_event ev;
    OK(mcpw_config_set_capabilities(sc, S("{\"tools\":{}}")));
    server = make_conn(sc, 0);
    OK(mcpw_conn_handle_input(server, 0, (const uint8_t *)early, strlen(early)));
    ev = next(server);
    CHECK(ev.kind == MCPW_EVENT_VIOLATION && ev.violation == MCPW_VIOLATION_BEFORE_INITIALIZATION);
    mcpw_conn_free(server);

    /* Without answer_pings, the application sees pings. */
    OK(mcpw_config_set_policy(sc, MCPW_POLICY_STRICT_LIFECYCLE));
    server = make_conn(sc, 0);
    OK(mcpw_conn_handle_input(server, 0, (const uint8_t *)ping, strlen(ping)));
    ev = next(server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, "ping"));
    OK(mcpw_conn_respond(server, &ev.id, S("{}")));
    mcpw_conn_free(server);
    mcpw_config_free(sc);
}

static void test_escaped_method_is_decoded(void) {
    pair p = make_pair("{\"tools\":{}}", NULL);
    const char *frame = "{\"jsonrpc\":\"2.0\",\"method\":\"x/\\u00e9t\\u00e9\",\"params\":{}}\n";
    mcpw_event ev;
    OK(mcpw_conn_handle_input(p.server, p.now, (const uint8_t *)frame, strlen(frame)));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_NOTIFICATION);
    CHECK(str_eq(ev.method, "x/\xc3\xa9t\xc3\xa9"));
    free_pair(&p);
}

/* A server request made for one of the client's requests, and frames on their own streams. */
static void test_related_requests_and_frames(void) {
    pair p = make_pair("{\"tools\":{}}", NULL);
    const char *frame = "{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"tools/list\"}";
    const uint8_t *bytes = NULL;
    size_t len = 0;
    uint64_t stream = 0;
    int64_t rid = 0, related = 0;
    mcpw_event ev;
    mcpw_id parent, unknown = {MCPW_ID_INT, 999, {NULL, 0}};

    OK(mcpw_conn_request(p.client, p.now, S("tools/call"), S("{\"name\":\"x\"}"), NULL, &rid));
    exchange(&p);
    ev = next(p.server);
    parent = ev.id;
    OK(mcpw_conn_request_related(p.server, p.now, &ev.id, S("roots/list"), NULL, 0, NULL, &related));
    RC(MCPW_ERR_UNKNOWN_REQUEST,
       mcpw_conn_request_related(p.server, p.now, &unknown, S("roots/list"), NULL, 0, NULL, &rid));
    RC(MCPW_ERR_INVALID_JSON,
       mcpw_conn_request_related(p.server, p.now, &parent, S("roots/list"), S("{"), NULL, &rid));
    exchange(&p);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, "roots/list"));
    CHECK(ev.id.kind == MCPW_ID_INT && ev.id.integer == related);
    OK(mcpw_conn_respond(p.client, &ev.id, S("{\"roots\":[]}")));
    exchange(&p);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_RESPONSE && ev.request == related && str_eq(ev.result, "{\"roots\":[]}"));
    OK(mcpw_conn_respond(p.server, &parent, S("{}")));
    exchange(&p);
    CHECK(next(p.client).kind == MCPW_EVENT_RESPONSE);

    /* A whole frame from a message transport, answered on its stream. */
    OK(mcpw_conn_handle_frame(p.server, p.now, 7, (const uint8_t *)frame, strlen(frame)));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && ev.id.integer == 41);
    OK(mcpw_conn_respond(p.server, &ev.id, S("{\"tools\":[]}")));
    OK(mcpw_conn_transmit(p.server, &bytes, &len, &stream));
    CHECK(stream == 7 && contains(bytes, len, "\"id\":41"));
    OK(mcpw_conn_consume(p.server, len));
    OK(mcpw_conn_handle_frame(p.server, p.now, 7, NULL, 0));
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_VIOLATION && ev.violation == MCPW_VIOLATION_PARSE);
    free_pair(&p);
}

/* The handshake era has logging per connection, gated by our capability. */
static void test_logging_in_the_handshake_era(void) {
    pair p = make_pair("{\"tools\":{},\"logging\":{}}", NULL);
    pair q = make_pair("{\"tools\":{}}", NULL);
    int64_t rid = 0;
    bool sent = false;
    mcpw_event ev;
    mcpw_request_context context;

    OK(mcpw_conn_request(p.client, p.now, S("tools/list"), NULL, 0, NULL, &rid));
    exchange(&p);
    ev = next(p.server);
    OK(mcpw_conn_log(p.server, &ev.id, MCPW_LOG_WARNING, S("tests"), S("{\"msg\":\"careful\"}"), &sent));
    CHECK(sent);
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_conn_log(p.server, &ev.id, 8, NULL, 0, S("1"), &sent));
    RC(MCPW_ERR_INVALID_JSON, mcpw_conn_log(p.server, &ev.id, MCPW_LOG_INFO, NULL, 0, S("nope"), &sent));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_conn_log(p.server, &ev.id, MCPW_LOG_INFO, S("\xff"), S("1"), &sent));
    /* Not a stateless request: no context, and no "input required". */
    OK(mcpw_conn_request_context(p.server, &ev.id, &context));
    CHECK(!context.known && context.version.ptr == NULL && context.client_capabilities == 0);
    RC(MCPW_ERR_NOT_IN_VERSION, mcpw_conn_respond_input_required(p.server, &ev.id, NULL, 0, S("s")));
    exchange(&p);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_NOTIFICATION && str_eq(ev.method, "notifications/message"));
    CHECK(contains((const uint8_t *)ev.params.ptr, ev.params.len, "\"level\":\"warning\""));

    OK(mcpw_conn_request(q.client, q.now, S("tools/list"), NULL, 0, NULL, &rid));
    exchange(&q);
    ev = next(q.server);
    RC(MCPW_ERR_NOT_NEGOTIATED, mcpw_conn_log(q.server, &ev.id, MCPW_LOG_ERROR, NULL, 0, S("1"), &sent));
    free_pair(&p);
    free_pair(&q);
}

/* The stateless era: discovery, per-request context, logging on request, "input required"
   and the retry, an invalid answer. */
static void test_the_stateless_era(void) {
    mcpw_config *cc = make_config(MCPW_ROLE_CLIENT);
    mcpw_config *sc = make_config(MCPW_ROLE_SERVER);
    mcpw_conn *client, *server;
    mcpw_era era = MCPW_ERA_LEGACY;
    mcpw_event ev;
    mcpw_id id;
    mcpw_request_context context;
    mcpw_str version;
    int64_t rid = 0, retried = 0, other = 0;
    bool sent = true;
    const char *elicit =
        "{\"confirm\":{\"method\":\"elicitation/create\",\"params\":{\"message\":\"Sure?\","
        "\"requestedSchema\":{\"type\":\"object\",\"properties\":{}}}}}";
    const char *with_log =
        "{\"jsonrpc\":\"2.0\",\"id\":\"m1\",\"method\":\"tools/call\",\"params\":{\"name\":\"x\","
        "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{\"elicitation\":{}},"
        "\"io.modelcontextprotocol/logLevel\":\"warning\"}}}\n";

    OK(mcpw_config_set_client_era(cc, MCPW_CLIENT_ERA_MODERN));
    OK(mcpw_config_set_capabilities(cc, S("{\"elicitation\":{}}")));
    OK(mcpw_config_set_capabilities(sc, S("{\"tools\":{\"listChanged\":true},\"logging\":{}}")));
    client = make_conn(cc, 0);
    server = make_conn(sc, 0);
    OK(mcpw_conn_era(server, &era));
    CHECK(era == MCPW_ERA_UNDECIDED);
    pump(client, server, 0);
    pump(server, client, 0);
    ev = next(client);
    CHECK(ev.kind == MCPW_EVENT_READY && str_eq(ev.version, "2026-07-28"));
    OK(mcpw_conn_era(client, &era));
    CHECK(era == MCPW_ERA_MODERN);
    OK(mcpw_conn_era(server, &era));
    CHECK(era == MCPW_ERA_MODERN);
    OK(mcpw_conn_protocol_version(client, &version));
    CHECK(str_eq(version, "2026-07-28"));
    drain(server, MCPW_EVENT_NONE);
    /* Nothing is broadcast in this era: notifications belong to a request or a listener. */
    RC(MCPW_ERR_REQUEST_SCOPED, mcpw_conn_notify(server, S("x/announcement"), NULL, 0));

    OK(mcpw_conn_request(client, 1, S("tools/call"), S("{\"name\":\"deploy\"}"), NULL, &rid));
    OK(mcpw_conn_request(client, 1, S("tools/list"), NULL, 0, NULL, &other));
    pump(client, server, 1);
    ev = next(server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, "tools/call"));
    id = ev.id;
    OK(mcpw_conn_request_context(server, &id, &context));
    CHECK(context.known && str_eq(context.version, "2026-07-28"));
    CHECK((context.client_capabilities & MCPW_CAP_ELICITATION) != 0);
    CHECK((context.client_capabilities & MCPW_CAP_SAMPLING) == 0);
    CHECK(!context.has_log_level);
    OK(mcpw_conn_log(server, &id, MCPW_LOG_EMERGENCY, NULL, 0, S("\"x\""), &sent));
    CHECK(!sent); /* the request did not ask for logs */
    RC(MCPW_ERR_INVALID_PARAMS, mcpw_conn_respond_input_required(server, &id, NULL, 0, NULL, 0));
    RC(MCPW_ERR_INVALID_JSON, mcpw_conn_respond_input_required(server, &id, S("{"), NULL, 0));
    OK(mcpw_conn_respond_input_required(server, &id, elicit, strlen(elicit), S("step-1")));
    ev = next(server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, "tools/list"));
    RC(MCPW_ERR_NOT_ELIGIBLE, mcpw_conn_respond_input_required(server, &ev.id, NULL, 0, S("s")));
    OK(mcpw_conn_respond(server, &ev.id, S("{\"tools\":[]}")));
    pump(server, client, 2);
    ev = next(client);
    CHECK(ev.kind == MCPW_EVENT_INPUT_REQUIRED && ev.request == rid);
    CHECK(str_eq(ev.input_requests, elicit) && str_eq(ev.request_state, "step-1"));
    ev = next(client);
    CHECK(ev.kind == MCPW_EVENT_RESPONSE && ev.request == other);
    RC(MCPW_ERR_INVALID_JSON, mcpw_conn_retry(client, 3, rid, S("{"), &retried));
    OK(mcpw_conn_retry(client, 3, rid, S("{\"confirm\":{\"action\":\"accept\",\"content\":{}}}"), &retried));
    CHECK(retried != rid);
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_retry(client, 3, 424242, NULL, 0, &other));
    pump(client, server, 3);
    ev = next(server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, "tools/call"));
    CHECK(contains((const uint8_t *)ev.params.ptr, ev.params.len, "\"inputResponses\""));
    CHECK(contains((const uint8_t *)ev.params.ptr, ev.params.len, "\"requestState\":\"step-1\""));
    OK(mcpw_conn_respond(server, &ev.id, S("{\"content\":[]}")));
    pump(server, client, 4);
    ev = next(client);
    CHECK(ev.kind == MCPW_EVENT_RESPONSE && ev.request == retried);

    /* An answer with a resultType nobody defined. */
    OK(mcpw_conn_request(client, 5, S("tools/list"), NULL, 0, NULL, &rid));
    {
        char bogus[128];
        snprintf(bogus, sizeof bogus,
                 "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":{\"resultType\":\"maybe\"}}\n",
                 (long long)rid);
        OK(mcpw_conn_handle_input(client, 5, (const uint8_t *)bogus, strlen(bogus)));
    }
    ev = next(client);
    CHECK(ev.kind == MCPW_EVENT_INVALID_RESPONSE && ev.request == rid);

    /* A request that asks for warnings and worse. */
    OK(mcpw_conn_handle_input(server, 6, (const uint8_t *)with_log, strlen(with_log)));
    ev = next(server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && ev.id.kind == MCPW_ID_STRING);
    OK(mcpw_conn_request_context(server, &ev.id, &context));
    CHECK(context.known && context.has_log_level && context.log_level == MCPW_LOG_WARNING);
    OK(mcpw_conn_log(server, &ev.id, MCPW_LOG_ERROR, S("deploy"), S("{\"step\":1}"), &sent));
    CHECK(sent);
    OK(mcpw_conn_log(server, &ev.id, MCPW_LOG_DEBUG, NULL, 0, S("{\"step\":2}"), &sent));
    CHECK(!sent);

    /* A handshake-era message on a stateless connection. */
    {
        const char *init = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"initialize\",\"params\":{"
                           "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
                           "\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}\n";
        OK(mcpw_conn_handle_input(server, 7, (const uint8_t *)init, strlen(init)));
        ev = next(server);
        CHECK(ev.kind == MCPW_EVENT_VIOLATION && ev.violation == MCPW_VIOLATION_WRONG_ERA);
    }
    mcpw_conn_free(client);
    mcpw_conn_free(server);
    mcpw_config_free(cc);
    mcpw_config_free(sc);
}

/* ---- HTTP: an mcpw_http_client and an mcpw_http_server wired together in memory ----------- */

/* What a host reads from getrandom(2): a generator with a fixed seed here, so that runs are
   reproducible. It never repeats, so session ids never do. */
static uint64_t random_state = 1;
static int random_calls;

/* A broken random source: the same bytes every time. */
static void stuck_random(void *user, uint8_t *buf, size_t len) {
    (void)user;
    memset(buf, 7, len);
}

/* A source that writes nothing (a failed getrandom): refused from its first id. */
static void no_random(void *user, uint8_t *buf, size_t len) {
    (void)user, (void)buf, (void)len;
}

static void test_random(void *user, uint8_t *buf, size_t len) {
    uint64_t *state = (uint64_t *)user;
    size_t i;
    random_calls++;
    for (i = 0; i < len; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = (uint8_t)(*state >> 56);
    }
}

/* A host event store (mcpw_event_store): a small array, as a store shared by several server
   processes would be a table. */
#define STORE_CAP 64

typedef struct {
    char session[96];
    size_t session_len;
    uint64_t stream;
    uint64_t event;
    uint8_t *bytes;
    size_t len;
} stored_event;

typedef struct {
    stored_event events[STORE_CAP];
    size_t count;
    int appends, replays, replayed, forgets;
    int down; /* 1: replay fails as a store that cannot be reached does; 2: it hands the
                 sink an event it cannot read (NULL, with a length) */
    uint64_t last_after;
} host_store;

static int same_session(const stored_event *e, const char *session, size_t len) {
    return e->session_len == len && memcmp(e->session, session, len) == 0;
}

static void store_append(void *user, const char *session, size_t session_len, uint64_t stream,
                         uint64_t event, const uint8_t *bytes, size_t len) {
    host_store *s = (host_store *)user;
    stored_event *e = &s->events[s->count < STORE_CAP ? s->count : 0];
    s->appends++;
    /* Bounded, as every store must be; no test here fills it. */
    if (s->count == STORE_CAP || session_len > sizeof e->session || len == 0) return;
    e->bytes = (uint8_t *)malloc(len);
    if (e->bytes == NULL) return;
    memcpy(e->bytes, bytes, len);
    memcpy(e->session, session, session_len);
    e->session_len = session_len;
    e->stream = stream;
    e->event = event;
    e->len = len;
    s->count++;
}

static int store_replay(void *user, const char *session, size_t session_len, uint64_t stream,
                        uint64_t after, mcpw_replay_sink sink, void *sink_ctx) {
    host_store *s = (host_store *)user;
    size_t i;
    s->replays++;
    s->last_after = after;
    if (s->down == 1) return 1; /* it could not be read: the client is told to come back */
    if (s->down == 2) {
        sink(sink_ctx, NULL, 5); /* a broken store: as one that could not be read */
        return 0;
    }
    /* Appended in increasing number, so replayed in order. */
    for (i = 0; i < s->count; i++) {
        const stored_event *e = &s->events[i];
        if (same_session(e, session, session_len) && e->stream == stream && e->event > after) {
            sink(sink_ctx, e->bytes, e->len);
            s->replayed++;
        }
    }
    return 0;
}

static void store_forget(void *user, const char *session, size_t session_len) {
    host_store *s = (host_store *)user;
    size_t i, kept = 0;
    s->forgets++;
    for (i = 0; i < s->count; i++) {
        if (same_session(&s->events[i], session, session_len)) {
            free(s->events[i].bytes);
        } else {
            s->events[kept++] = s->events[i];
        }
    }
    s->count = kept;
}

static void store_clear(host_store *s) {
    size_t i;
    for (i = 0; i < s->count; i++) free(s->events[i].bytes);
    s->count = 0;
}

/* The server application's tools: `sql` has a parameter that 2026-07-28 clients mirror in an
   Mcp-Param-Region header. */
static const char HTTP_TOOLS[] =
    "{\"tools\":[{\"name\":\"echo\",\"inputSchema\":{\"type\":\"object\"}},"
    "{\"name\":\"sql\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"region\":"
    "{\"type\":\"string\",\"x-mcp-header\":\"Region\"}}}}]}";

static const char MODERN_META[] =
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
    "\"io.modelcontextprotocol/clientCapabilities\":{}}";

static mcpw_http_server_options http_server_options(void) {
    mcpw_http_server_options o;
    memset(&o, 0, sizeof o);
    o.random = test_random;
    o.random_user = &random_state;
    o.endpoint.ptr = "/mcp";
    o.endpoint.len = 4;
    return o;
}

static mcpw_http_server *make_http_server(const mcpw_http_server_options *options) {
    mcpw_config *config = make_config(MCPW_ROLE_SERVER);
    mcpw_http_server *server = NULL;
    OK(mcpw_config_set_capabilities(config, S("{\"tools\":{\"listChanged\":true},\"logging\":{}}")));
    OK(mcpw_http_server_new(config, options, &server));
    CHECK(server != NULL);
    mcpw_config_free(config);
    return server;
}

static mcpw_http_client *make_http_client(uint32_t era, uint64_t now,
                                          const mcpw_http_client_options *options) {
    mcpw_config *config = make_config(MCPW_ROLE_CLIENT);
    mcpw_http_client *client = NULL;
    OK(mcpw_config_set_client_era(config, era));
    OK(mcpw_http_client_new(config, now, options, &client));
    CHECK(client != NULL);
    mcpw_config_free(config);
    return client;
}

/* Whether a header name is `wanted`, ignoring ASCII case. */
static int name_is(mcpw_str name, const char *wanted) {
    size_t n = strlen(wanted), i;
    if (name.ptr == NULL || name.len != n) return 0;
    for (i = 0; i < n; i++) {
        char a = name.ptr[i], b = wanted[i];
        if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
        if (b >= 'A' && b <= 'Z') b = (char)(b - 'A' + 'a');
        if (a != b) return 0;
    }
    return 1;
}

static mcpw_http_header make_header(const char *name, const char *value) {
    mcpw_http_header h;
    h.name.ptr = name;
    h.name.len = strlen(name);
    h.value.ptr = value;
    h.value.len = strlen(value);
    return h;
}

static mcpw_str find_header(const mcpw_http_header *headers, size_t len, const char *name) {
    mcpw_str none = {NULL, 0};
    size_t i;
    for (i = 0; i < len; i++) {
        if (name_is(headers[i].name, name)) return headers[i].value;
    }
    return none;
}

/* One client event, copied out of the client. */
typedef struct {
    mcpw_event_kind kind;
    int64_t request;
    double progress;
    double total;
    bool has_total;
    int64_t code;
    mcpw_close_reason close_reason;
    char text[512]; /* the result, the version, the failure's message, or the method */
} logged_event;

/* One HTTP request the client made, as the server got it. */
typedef struct {
    char method[8];
    int with_session, with_version, with_last_event_id, with_region;
    uint16_t status; /* the server's answer; 0 when the test failed the exchange */
} seen_request;

#define MAX_OPEN 8
#define MAX_LOG 48
#define MAX_SEEN 48

/* Both ends, the responses in flight between them, and a tiny server application. */
typedef struct {
    mcpw_http_server *server;
    mcpw_http_client *client;
    uint64_t now;
    const char *host; /* the Host header the HTTP client library would add */
    int fail_next;    /* the next request fails in transport: mcpw_http_client_handle_error */
    struct {
        uint64_t exchange, stream;
    } open[MAX_OPEN]; /* SSE responses being read */
    size_t open_count;
    seen_request seen[MAX_SEEN];
    size_t seen_count;
    /* The server application. */
    int hold_slow; /* `slow` tool calls wait for the test to answer them */
    int poll_slow; /* ... with their streams closed for polling meanwhile */
    uint64_t key;  /* the connection of the last server event */
    int held;
    uint64_t held_key;
    mcpw_id held_id;
    char held_text[64];
    int requests, cancelled;
    /* The client application: its events. */
    logged_event log[MAX_LOG];
    size_t log_count;
} world;

/* The server application: answers requests at once, except `slow` tool calls when told to
   hold them. `echo` and `count` answer with their `text` (or `region`) argument; `count`
   reports progress first. */
static void serve(world *w) {
    for (;;) {
        mcpw_event ev;
        uint64_t key = 99;
        mcpw_conn *conn = NULL;
        mcpw_str name = {NULL, 0}, args = {NULL, 0}, text = {NULL, 0};
        char result[512];
        OK(mcpw_http_server_poll_event(w->server, &ev, &key, &conn));
        if (ev.kind == MCPW_EVENT_NONE) {
            CHECK(key == 0 && conn == NULL);
            return;
        }
        CHECK(conn != NULL && key != 0);
        w->key = key;
        if (ev.kind == MCPW_EVENT_PEER_CANCELLED) w->cancelled++;
        if (ev.kind != MCPW_EVENT_REQUEST) continue;
        w->requests++;
        if (str_eq(ev.method, "tools/list")) {
            OK(mcpw_conn_respond(conn, &ev.id, HTTP_TOOLS, strlen(HTTP_TOOLS)));
            continue;
        }
        if (!str_eq(ev.method, "tools/call")) {
            OK(mcpw_conn_respond(conn, &ev.id, S("{}")));
            continue;
        }
        OK(mcpw_json_get(ev.params.ptr, ev.params.len, S("name"), &name));
        if (str_eq(name, "\"slow\"") && w->hold_slow) {
            /* Keep the id: the event's views die with the next call on the server. */
            CHECK(ev.id.string.len < sizeof w->held_text);
            w->held_id = ev.id;
            if (ev.id.kind == MCPW_ID_STRING && ev.id.string.len < sizeof w->held_text) {
                memcpy(w->held_text, ev.id.string.ptr, ev.id.string.len);
                w->held_id.string.ptr = w->held_text;
            }
            w->held_key = key;
            w->held = 1;
            if (w->poll_slow) {
                mcpw_id other = {MCPW_ID_INT, 424242, {NULL, 0}};
                bool closed = true;
                OK(mcpw_http_server_close_stream_for_polling(w->server, key, &other, &closed));
                CHECK(!closed); /* no such request: nothing changes */
                OK(mcpw_http_server_close_stream_for_polling(w->server, key, &w->held_id, &closed));
                CHECK(closed);
            }
            continue;
        }
        if (str_eq(name, "\"count\"")) OK(mcpw_conn_progress(conn, &ev.id, 1, 2, true, S("half")));
        OK(mcpw_json_get(ev.params.ptr, ev.params.len, S("arguments"), &args));
        if (args.ptr != NULL) {
            OK(mcpw_json_get(args.ptr, args.len, S("text"), &text));
            if (text.ptr == NULL) OK(mcpw_json_get(args.ptr, args.len, S("region"), &text));
        }
        if (text.ptr == NULL) {
            text.ptr = "\"\"";
            text.len = 2;
        }
        snprintf(result, sizeof result, "{\"content\":[{\"type\":\"text\",\"text\":%.*s}]}",
                 (int)text.len, text.ptr);
        OK(mcpw_conn_respond(conn, &ev.id, result, strlen(result)));
    }
}

/* Copies the client's events into the log. */
static void log_client_events(world *w) {
    for (;;) {
        mcpw_event ev;
        logged_event *l;
        mcpw_str text;
        memset(&ev, 0xA5, sizeof ev);
        OK(mcpw_http_client_poll_event(w->client, &ev));
        if (ev.kind == MCPW_EVENT_NONE) return;
        CHECK(w->log_count < MAX_LOG);
        if (w->log_count == MAX_LOG) return;
        l = &w->log[w->log_count++];
        memset(l, 0, sizeof *l);
        l->kind = ev.kind;
        l->request = ev.request;
        l->progress = ev.progress;
        l->total = ev.total;
        l->has_total = ev.has_total;
        l->code = ev.code;
        l->close_reason = ev.close_reason;
        text = ev.kind == MCPW_EVENT_RESPONSE ? ev.result
               : ev.kind == MCPW_EVENT_READY  ? ev.version
               : ev.kind == MCPW_EVENT_FAILED ? ev.message
                                              : ev.method;
        if (text.ptr != NULL && text.len < sizeof l->text) memcpy(l->text, text.ptr, text.len);
    }
}

/* Where in the log the last event of `kind` (for `request`, unless 0) is, or -1. */
static int logged_at(const world *w, mcpw_event_kind kind, int64_t request) {
    size_t i = w->log_count;
    while (i-- > 0) {
        if (w->log[i].kind == kind && (request == 0 || w->log[i].request == request)) return (int)i;
    }
    return -1;
}

static const logged_event *logged(const world *w, mcpw_event_kind kind, int64_t request) {
    int at = logged_at(w, kind, request);
    return at < 0 ? NULL : &w->log[at];
}

static int count_logged(const world *w, mcpw_event_kind kind) {
    size_t i;
    int n = 0;
    for (i = 0; i < w->log_count; i++) n += w->log[i].kind == kind;
    return n;
}

static const seen_request *last_seen(const world *w) {
    static const seen_request none;
    return w->seen_count > 0 ? &w->seen[w->seen_count - 1] : &none;
}

/* A SEND action: the request goes to the server (with the Host header the HTTP library adds),
   and the response back to the client: a JSON body at once, an SSE stream through
   drain_streams. */
static void send_request(world *w, const mcpw_http_action *a) {
    mcpw_http_header headers[16];
    mcpw_http_response r;
    seen_request *seen = &w->seen[w->seen_count < MAX_SEEN ? w->seen_count : MAX_SEEN - 1];
    const uint64_t exchange = a->exchange;
    const size_t n = a->headers_len;

    CHECK(n > 0 && n < 16 && a->headers != NULL && a->method.ptr != NULL);
    if (n == 0 || n >= 16) return;
    /* The action's views are good until the next call on the client: the server reads them
       first. */
    memcpy(headers, a->headers, n * sizeof *headers);
    headers[n] = make_header("Host", w->host);
    CHECK(w->seen_count < MAX_SEEN);
    if (w->seen_count < MAX_SEEN) w->seen_count++;
    memset(seen, 0, sizeof *seen);
    snprintf(seen->method, sizeof seen->method, "%.*s", (int)a->method.len, a->method.ptr);
    seen->with_session = find_header(headers, n, "Mcp-Session-Id").ptr != NULL;
    seen->with_version = find_header(headers, n, "MCP-Protocol-Version").ptr != NULL;
    seen->with_last_event_id = find_header(headers, n, "Last-Event-ID").ptr != NULL;
    seen->with_region = str_eq(find_header(headers, n, "Mcp-Param-Region"), "eu");
    if (w->fail_next) {
        w->fail_next = 0;
        OK(mcpw_http_client_handle_error(w->client, w->now, exchange, 0));
        return;
    }
    OK(mcpw_http_server_handle_request(w->server, w->now, a->method.ptr, a->method.len, S("/mcp"),
                                       headers, n + 1, a->body, a->body_len, &r));
    if (r.has_stream) {
        /* Answer what can be answered at once, then settle: a plain JSON body when the whole
           answer is there, else the stream. */
        const uint64_t stream = r.stream;
        serve(w);
        OK(mcpw_http_server_settle(w->server, stream, &r));
        CHECK(!r.has_stream || r.stream == stream);
    }
    seen->status = r.status;
    OK(mcpw_http_client_handle_response(w->client, w->now, exchange, r.status, r.headers,
                                        r.headers_len));
    if (r.has_stream) {
        CHECK(str_eq(find_header(r.headers, r.headers_len, "Content-Type"), "text/event-stream"));
        CHECK(w->open_count < MAX_OPEN);
        if (w->open_count < MAX_OPEN) {
            w->open[w->open_count].exchange = exchange;
            w->open[w->open_count].stream = r.stream;
            w->open_count++;
        }
        return;
    }
    if (r.body_len > 0) {
        OK(mcpw_http_client_handle_body(w->client, w->now, exchange, r.body, r.body_len));
    }
    OK(mcpw_http_client_handle_end(w->client, w->now, exchange, 0));
    serve(w);
}

/* Moves what waits on the open SSE responses to the client, in two writes each time (partial
   consumption, SSE decoded across chunks); a finished response ends. */
static int drain_streams(world *w) {
    int moved = 0;
    size_t i = 0;
    while (i < w->open_count) {
        const uint64_t exchange = w->open[i].exchange, stream = w->open[i].stream;
        int ended = 0;
        for (;;) {
            const uint8_t *bytes = NULL;
            size_t len = 0, chunk;
            bool finished = false, open = false;
            OK(mcpw_http_server_poll_stream(w->server, stream, &bytes, &len, &finished, &open));
            if (!open || (finished && len == 0)) {
                if (open) OK(mcpw_http_server_consume_stream(w->server, stream, 0));
                ended = 1;
                break;
            }
            if (len == 0) break; /* nothing yet: the response waits */
            /* The bytes are good until the next call on the server: the client reads them
               first. */
            chunk = len > 1 ? len / 2 : len;
            OK(mcpw_http_client_handle_body(w->client, w->now, exchange, bytes, chunk));
            OK(mcpw_http_server_consume_stream(w->server, stream, chunk));
            moved = 1;
            if (finished && chunk == len) {
                ended = 1;
                break;
            }
        }
        if (ended) {
            OK(mcpw_http_client_handle_end(w->client, w->now, exchange, 0));
            w->open[i] = w->open[--w->open_count];
            moved = 1;
        } else {
            i++;
        }
    }
    return moved;
}

/* One round: the client's actions go to the server, streams flow back, events are logged. */
static int step(world *w) {
    int moved = 0;
    for (;;) {
        mcpw_http_action a;
        size_t i;
        memset(&a, 0xA5, sizeof a);
        OK(mcpw_http_client_poll_action(w->client, &a));
        if (a.kind == MCPW_HTTP_ACTION_NONE) {
            CHECK(a.headers == NULL && a.body == NULL && a.exchange == 0);
            break;
        }
        moved = 1;
        if (a.kind == MCPW_HTTP_ACTION_SEND) {
            send_request(w, &a);
            continue;
        }
        /* ABORT: the client lets go of a response; the server hears its stream closed. */
        CHECK(a.kind == MCPW_HTTP_ACTION_ABORT);
        for (i = 0; i < w->open_count; i++) {
            if (w->open[i].exchange == a.exchange) {
                OK(mcpw_http_server_stream_closed(w->server, w->now, w->open[i].stream));
                w->open[i] = w->open[--w->open_count];
                break;
            }
        }
        serve(w);
    }
    moved |= drain_streams(w);
    log_client_events(w);
    return moved;
}

static void converse(world *w) {
    int rounds = 0;
    while (step(w) && rounds < 100) rounds++;
    CHECK(rounds < 100);
}

/* A client of `era` against `server`, after its handshake (or discovery). */
static void world_start(world *w, mcpw_http_server *server, uint32_t era,
                        const mcpw_http_client_options *options) {
    memset(w, 0, sizeof *w);
    w->now = 1000 * MS;
    w->host = "127.0.0.1:8080";
    w->server = server;
    w->client = make_http_client(era, w->now, options);
    converse(w);
}

static void world_free(world *w) {
    mcpw_http_client_free(w->client);
    mcpw_http_server_free(w->server);
}

/* Sends a request through the client's connection view; returns its id. */
static int64_t client_request(world *w, const char *method, const char *params,
                              const mcpw_request_options *options) {
    mcpw_conn *view = NULL;
    int64_t rid = 0;
    OK(mcpw_http_client_conn(w->client, &view));
    OK(mcpw_conn_request(view, w->now, method, strlen(method), params,
                         params != NULL ? strlen(params) : 0, options, &rid));
    return rid;
}

/* A POST made straight to the server, as an HTTP library parsed it (Host, Origin and
   Mcp-Session-Id when not NULL): returns the status, and the response in *out. */
static uint16_t post_directly(mcpw_http_server *server, uint64_t now, const char *path,
                              const char *host, const char *origin, const char *session,
                              const char *body, mcpw_http_response *out) {
    mcpw_http_header h[5];
    size_t n = 0;
    mcpw_http_response r;
    memset(&r, 0, sizeof r);
    if (host != NULL) h[n++] = make_header("Host", host);
    if (origin != NULL) h[n++] = make_header("Origin", origin);
    if (session != NULL) h[n++] = make_header("Mcp-Session-Id", session);
    h[n++] = make_header("Content-Type", "application/json");
    h[n++] = make_header("Accept", "application/json, text/event-stream");
    OK(mcpw_http_server_handle_request(server, now, S("POST"), path,
                                       path != NULL ? strlen(path) : 0, h, n,
                                       (const uint8_t *)body, strlen(body), &r));
    if (out != NULL) *out = r;
    return r.status;
}

static const char HTTP_INIT[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
    "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}";

/* ---- HTTP tests ----------------------------------------------------------------------------- */

static void test_http_refuses_null_and_invalid_arguments(void) {
    mcpw_config *sc = make_config(MCPW_ROLE_SERVER);
    mcpw_config *cc = make_config(MCPW_ROLE_CLIENT);
    mcpw_http_server_options o = http_server_options();
    mcpw_http_server *server = NULL;
    mcpw_http_client *client = NULL;
    mcpw_http_response r;
    mcpw_http_action a;
    mcpw_event ev;
    mcpw_conn *view = NULL;
    mcpw_str s = {"x", 1};
    mcpw_str no_text = {NULL, 3};
    mcpw_id id = {MCPW_ID_INT, 1, {NULL, 0}};
    mcpw_http_header host = {{"Host", 4}, {"localhost", 9}};
    mcpw_http_header broken = {{"Host", 4}, {NULL, 9}};
    const uint8_t *bytes = NULL;
    size_t len = 0, n1 = 9, n2 = 9;
    bool flag = true, finished = true, open = true;
    uint64_t key = 9, deadline = 9, exchange = 0;

    /* Freeing NULL does nothing. */
    mcpw_http_server_free(NULL);
    mcpw_http_client_free(NULL);

    /* Constructors: NULL, the wrong role, bad options. */
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_new(NULL, &o, &server));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_new(sc, NULL, &server));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_new(sc, &o, NULL));
    o.random = NULL; /* required */
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_new(sc, &o, &server));
    o = http_server_options();
    RC(MCPW_ERR_CONFIG_REFUSED, mcpw_http_server_new(cc, &o, &server));
    /* A config no connection takes (no protocol versions) is refused as mcpw_conn_new
       refuses it: the server was made, and answered every request 400. */
    {
        mcpw_config *none = make_config(MCPW_ROLE_SERVER);
        OK(mcpw_config_set_versions(none, NULL, 0));
        RC(MCPW_ERR_CONFIG_REFUSED, mcpw_http_server_new(none, &o, &server));
        mcpw_config_free(none);
    }
    o.endpoint.ptr = "/\xff";
    o.endpoint.len = 2;
    RC(MCPW_ERR_INVALID_UTF8, mcpw_http_server_new(sc, &o, &server));
    o = http_server_options();
    o.allowed_hosts_len = 2; /* with NULL */
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_new(sc, &o, &server));
    o.allowed_hosts = &no_text;
    o.allowed_hosts_len = 1;
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_new(sc, &o, &server));
    o = http_server_options();
    o.tools.ptr = "{\"tools\":";
    o.tools.len = 9;
    RC(MCPW_ERR_INVALID_JSON, mcpw_http_server_new(sc, &o, &server));
    /* Tools that are not a tools array, or an object holding one. */
    o.tools.ptr = "5";
    o.tools.len = 1;
    RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_http_server_new(sc, &o, &server));
    o.tools.ptr = "{\"tools\":{}}";
    o.tools.len = 12;
    RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_http_server_new(sc, &o, &server));
    /* A tool whose x-mcp-header annotation is invalid (not an HTTP token): clients drop
       such a tool, so its server is refused rather than serve it unchecked. */
    {
        static const char bad[] =
            "[{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\",\"properties\":"
            "{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"bad name\"}}}}]";
        static const char good[] =
            "[{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\",\"properties\":"
            "{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"}}}}]";
        o.tools.ptr = bad;
        o.tools.len = sizeof bad - 1;
        RC(MCPW_ERR_CONFIG_REFUSED, mcpw_http_server_new(sc, &o, &server));
        /* Which tool, and why: asked for the length first, then with room. */
        {
            static const char want[] =
                "[{\"name\":\"t\",\"reason\":\"x-mcp-header is not a non-empty HTTP token\"}]";
            char text[128];
            size_t len = 0;
            RC(MCPW_OK, mcpw_tools_refusals(bad, sizeof bad - 1, NULL, 0, &len));
            CHECK(len == sizeof want - 1);
            memset(text, 'x', sizeof text);
            RC(MCPW_OK, mcpw_tools_refusals(bad, sizeof bad - 1, text, len - 1, &len));
            CHECK(len == sizeof want - 1 && text[0] == 'x'); /* too small: nothing written */
            RC(MCPW_OK, mcpw_tools_refusals(bad, sizeof bad - 1, text, sizeof text, &len));
            CHECK(len == sizeof want - 1 && strcmp(text, want) == 0);
            RC(MCPW_OK, mcpw_tools_refusals(good, sizeof good - 1, text, sizeof text, &len));
            CHECK(len == 2 && strcmp(text, "[]") == 0);
            /* Names are JSON strings in the answer, escaped as such; each refused tool
               has its entry, in the order listed. */
            RC(MCPW_OK, mcpw_tools_refusals(
                            S("{\"tools\":[{\"name\":\"a\\\"b\",\"inputSchema\":{\"type\":"
                              "\"object\",\"properties\":{\"a\":{\"type\":\"array\","
                              "\"x-mcp-header\":\"A\"}}}},{\"name\":\"ok\",\"inputSchema\":"
                              "{\"type\":\"object\"}}]}"),
                            text, sizeof text, &len));
            CHECK(strcmp(text, "[{\"name\":\"a\\\"b\",\"reason\":\"x-mcp-header is only "
                               "allowed on integer, string or boolean properties\"}]") == 0);
            RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_tools_refusals(S("5"), text, sizeof text, &len));
            RC(MCPW_ERR_INVALID_JSON, mcpw_tools_refusals(S("["), text, sizeof text, &len));
            RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tools_refusals(bad, sizeof bad - 1, text, sizeof text, NULL));
            RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tools_refusals(bad, sizeof bad - 1, NULL, 4, &len));
        }
        o.tools.ptr = good;
        o.tools.len = sizeof good - 1;
        RC(MCPW_OK, mcpw_http_server_new(sc, &o, &server));
    }
    mcpw_http_server_free(server);
    server = NULL;
    /* An event store without every callback would store or replay nothing. */
    {
        mcpw_event_store empty;
        memset(&empty, 0, sizeof empty);
        o = http_server_options();
        o.events = &empty;
        RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_new(sc, &o, &server));
    }
    CHECK(server == NULL);
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_new(NULL, 0, NULL, &client));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_new(cc, 0, NULL, NULL));
    RC(MCPW_ERR_CONFIG_REFUSED, mcpw_http_client_new(sc, 0, NULL, &client));
    CHECK(client == NULL);

    /* Every call refuses a NULL handle. */
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_http_server_handle_request(NULL, 0, S("POST"), NULL, 0, NULL, 0, NULL, 0, &r));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_settle(NULL, 1, &r));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_http_server_poll_stream(NULL, 1, &bytes, &len, &finished, &open));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_consume_stream(NULL, 1, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_stream_closed(NULL, 0, 1));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_handle_timeout(NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_poll_timeout(NULL, &flag, &deadline));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_poll_woken(NULL, &flag, &deadline));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_poll_event(NULL, &ev, &key, &view));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_conn(NULL, 1, &view));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_session_id(NULL, 1, &s));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_counts(NULL, &n1, &n2));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_close_stream_for_polling(NULL, 1, &id, &flag));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_end_listen_streams(NULL, &n1));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_poll_action(NULL, &a));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_handle_response(NULL, 0, 1, 200, NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_handle_body(NULL, 0, 1, NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_handle_end(NULL, 0, 1, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_handle_error(NULL, 0, 1, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_poll_event(NULL, &ev));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_conn(NULL, &view));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_poll_timeout(NULL, &flag, &deadline));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_handle_timeout(NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_session_id(NULL, &s));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_end_session(NULL, &flag));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_has_unheard(NULL, &flag));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_is_ending_session(NULL, &flag));

    /* ... and every NULL out pointer. */
    o = http_server_options();
    OK(mcpw_http_server_new(sc, &o, &server));
    OK(mcpw_http_client_new(cc, 0, NULL, &client));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_http_server_handle_request(server, 0, S("POST"), NULL, 0, &host, 1, NULL, 0, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_settle(server, 1, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_http_server_poll_stream(server, 1, NULL, &len, &finished, &open));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_http_server_poll_stream(server, 1, &bytes, NULL, &finished, &open));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_poll_stream(server, 1, &bytes, &len, NULL, &open));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_http_server_poll_stream(server, 1, &bytes, &len, &finished, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_poll_timeout(server, NULL, &deadline));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_poll_timeout(server, &flag, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_poll_woken(server, NULL, &deadline));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_poll_woken(server, &flag, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_poll_event(server, NULL, &key, &view));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_poll_event(server, &ev, NULL, &view));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_poll_event(server, &ev, &key, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_conn(server, 1, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_session_id(server, 1, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_counts(server, NULL, &n2));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_counts(server, &n1, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_close_stream_for_polling(server, 1, NULL, &flag));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_close_stream_for_polling(server, 1, &id, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_end_listen_streams(server, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_poll_action(client, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_poll_event(client, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_conn(client, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_poll_timeout(client, NULL, &deadline));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_poll_timeout(client, &flag, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_session_id(client, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_end_session(client, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_has_unheard(client, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_is_ending_session(client, NULL));
    CHECK(n1 == 9 && n2 == 9 && key == 9 && deadline == 9); /* written only on success */

    /* Inputs: NULL with a length, text that is not UTF-8, ids of no kind. */
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_http_server_handle_request(server, 0, NULL, 4, NULL, 0, &host, 1, NULL, 0, &r));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_http_server_handle_request(server, 0, S("POST"), NULL, 4, &host, 1, NULL, 0, &r));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_http_server_handle_request(server, 0, S("POST"), NULL, 0, NULL, 2, NULL, 0, &r));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_http_server_handle_request(server, 0, S("POST"), NULL, 0, &broken, 1, NULL, 0, &r));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_http_server_handle_request(server, 0, S("POST"), NULL, 0, &host, 1, NULL, 5, &r));
    RC(MCPW_ERR_INVALID_UTF8,
       mcpw_http_server_handle_request(server, 0, S("P\xffST"), NULL, 0, &host, 1, NULL, 0, &r));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_handle_response(client, 0, 1, 200, NULL, 1));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_handle_body(client, 0, 1, NULL, 1));
    id.kind = 9;
    RC(MCPW_ERR_INVALID_ID, mcpw_http_server_close_stream_for_polling(server, 1, &id, &flag));
    id.kind = MCPW_ID_INT;

    /* Unknown connections, streams and exchanges. */
    RC(MCPW_ERR_UNKNOWN_CONNECTION, mcpw_http_server_conn(server, 42, &view));
    RC(MCPW_ERR_UNKNOWN_CONNECTION, mcpw_http_server_session_id(server, 42, &s));
    RC(MCPW_ERR_UNKNOWN_STREAM, mcpw_http_server_settle(server, 42, &r));
    OK(mcpw_http_server_poll_stream(server, 42, &bytes, &len, &finished, &open));
    CHECK(!open && !finished && len == 0);
    RC(MCPW_ERR_CONSUME_TOO_MUCH, mcpw_http_server_consume_stream(server, 42, 1));
    OK(mcpw_http_server_consume_stream(server, 42, 0));
    OK(mcpw_http_server_stream_closed(server, 0, 42));
    OK(mcpw_http_server_close_stream_for_polling(server, 42, &id, &flag));
    CHECK(!flag);
    OK(mcpw_http_server_end_listen_streams(server, &n1));
    CHECK(n1 == 0);
    OK(mcpw_http_server_counts(server, &n1, &n2));
    CHECK(n1 == 0 && n2 == 0);
    OK(mcpw_http_server_poll_timeout(server, &flag, &deadline));
    CHECK(!flag && deadline == 0);
    OK(mcpw_http_server_handle_timeout(server, 5));
    OK(mcpw_http_server_poll_event(server, &ev, &key, &view));
    CHECK(ev.kind == MCPW_EVENT_NONE && key == 0 && view == NULL);
    /* Reports about exchanges the client never made are ignored. */
    OK(mcpw_http_client_handle_response(client, 0, 999, 200, &host, 1));
    OK(mcpw_http_client_handle_body(client, 0, 999, (const uint8_t *)"x", 1));
    OK(mcpw_http_client_handle_end(client, 0, 999, 0));
    OK(mcpw_http_client_handle_error(client, 0, 999, 0));
    OK(mcpw_http_client_handle_timeout(client, 1));
    /* Before any answer: no session id. */
    OK(mcpw_http_client_session_id(client, &s));
    CHECK(s.ptr == NULL && s.len == 0);
    /* Ending the session before its initialize went out (on a second client): there is none
     * to end yet, and none starts: the initialize never goes out, the connection closes. */
    {
        mcpw_http_client *ended = NULL;
        OK(mcpw_http_client_new(cc, 0, NULL, &ended));
        OK(mcpw_http_client_end_session(ended, &flag));
        CHECK(!flag);
        OK(mcpw_http_client_poll_action(ended, &a));
        CHECK(a.kind == MCPW_HTTP_ACTION_NONE);
        OK(mcpw_http_client_poll_event(ended, &ev));
        CHECK(ev.kind == MCPW_EVENT_CLOSED && ev.close_reason == MCPW_CLOSE_TRANSPORT_FAILED);
        mcpw_http_client_free(ended);
    }
    /* Its first request, ready at once: initialize (the client's era is "legacy"). */
    OK(mcpw_http_client_poll_action(client, &a));
    CHECK(a.kind == MCPW_HTTP_ACTION_SEND && str_eq(a.method, "POST") && a.exchange != 0);
    CHECK(contains(a.body, a.body_len, "\"method\":\"initialize\""));
    CHECK(str_eq(find_header(a.headers, a.headers_len, "Content-Type"), "application/json"));
    CHECK(find_header(a.headers, a.headers_len, "Accept").ptr != NULL);
    CHECK(find_header(a.headers, a.headers_len, "Mcp-Session-Id").ptr == NULL);
    exchange = a.exchange;
    OK(mcpw_http_client_poll_action(client, &a));
    CHECK(a.kind == MCPW_HTTP_ACTION_NONE);
    /* A proxy's error page instead of an answer: the handshake fails with the status, and
     * the page's text is kept for the message. */
    {
        mcpw_http_header html = {{"Content-Type", 12}, {"text/html", 9}};
        const char *page = "\n<h1>502 Bad Gateway</h1>\n";
        OK(mcpw_http_client_failure_text(client, &s));
        CHECK(s.ptr == NULL && s.len == 0);
        OK(mcpw_http_client_handle_response(client, 1, exchange, 502, &html, 1));
        OK(mcpw_http_client_handle_body(client, 1, exchange, (const uint8_t *)page, strlen(page)));
        OK(mcpw_http_client_handle_end(client, 1, exchange, 0));
        OK(mcpw_http_client_failure_text(client, &s));
        CHECK(str_eq(s, "<h1>502 Bad Gateway</h1>"));
        RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_failure_text(NULL, &s));
        RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_failure_text(client, NULL));
    }
    mcpw_http_client_free(client);
    mcpw_http_server_free(server);
    mcpw_config_free(sc);
    mcpw_config_free(cc);
}

static void test_http_a_session_in_the_handshake_era(void) {
    mcpw_http_server_options o = http_server_options();
    mcpw_request_options progress = {0, 1, MCPW_PROGRESS_RESET_DEFAULT};
    world w;
    mcpw_str sid, server_sid, version;
    mcpw_conn *view = NULL;
    mcpw_http_response r;
    size_t sessions = 9, streams = 9;
    int64_t rid;
    int calls = random_calls, at_progress, at_response;
    const logged_event *l;
    bool queued = false;
    char saved[128] = {0};

    world_start(&w, make_http_server(&o), MCPW_CLIENT_ERA_LEGACY, NULL);
    l = logged(&w, MCPW_EVENT_READY, 0);
    CHECK(l != NULL && strcmp(l->text, "2025-11-25") == 0);
    CHECK(random_calls > calls); /* the session id came from the host's source */
    /* initialize: a JSON answer with the session id; notifications/initialized: 202. */
    CHECK(w.seen_count == 2);
    CHECK(strcmp(w.seen[0].method, "POST") == 0 && w.seen[0].status == 200);
    CHECK(!w.seen[0].with_session);
    CHECK(w.seen[1].status == 202 && w.seen[1].with_session && w.seen[1].with_version);
    OK(mcpw_http_client_session_id(w.client, &sid));
    CHECK(sid.ptr != NULL && sid.len >= 16 && sid.len < sizeof saved);
    if (sid.ptr != NULL && sid.len < sizeof saved) memcpy(saved, sid.ptr, sid.len);
    OK(mcpw_http_server_session_id(w.server, w.key, &server_sid));
    CHECK(str_eq(server_sid, saved));
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 1 && streams == 0);
    OK(mcpw_http_client_conn(w.client, &view));
    OK(mcpw_conn_protocol_version(view, &version));
    CHECK(str_eq(version, "2025-11-25"));

    /* An echo: answered before the response's headers, so it comes as a plain JSON body. */
    rid = client_request(&w, "tools/call",
                         "{\"name\":\"echo\",\"arguments\":{\"text\":\"hello over HTTP\"}}", NULL);
    converse(&w);
    l = logged(&w, MCPW_EVENT_RESPONSE, rid);
    CHECK(l != NULL && strstr(l->text, "\"text\":\"hello over HTTP\"") != NULL);
    CHECK(last_seen(&w)->status == 200 && last_seen(&w)->with_session);
    CHECK(last_seen(&w)->with_version);
    CHECK(w.open_count == 0);

    /* Progress, then the answer: two messages, so an SSE stream. */
    rid = client_request(&w, "tools/call", "{\"name\":\"count\",\"arguments\":{\"text\":\"n\"}}",
                         &progress);
    converse(&w);
    at_progress = logged_at(&w, MCPW_EVENT_PROGRESS, rid);
    at_response = logged_at(&w, MCPW_EVENT_RESPONSE, rid);
    CHECK(at_progress >= 0 && at_progress < at_response);
    if (at_progress >= 0) {
        l = &w.log[at_progress];
        CHECK(l->progress == 1 && l->has_total && l->total == 2);
    }
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 1 && streams == 0);

    /* The end: one DELETE, and the session is gone. */
    OK(mcpw_http_client_is_ending_session(w.client, &queued));
    CHECK(!queued);
    OK(mcpw_http_client_end_session(w.client, &queued));
    CHECK(queued);
    OK(mcpw_http_client_end_session(w.client, &queued));
    CHECK(!queued);
    OK(mcpw_http_client_is_ending_session(w.client, &queued));
    CHECK(queued);
    OK(mcpw_http_client_session_id(w.client, &sid));
    CHECK(sid.ptr == NULL);
    converse(&w);
    OK(mcpw_http_client_is_ending_session(w.client, &queued));
    CHECK(!queued);
    CHECK(strcmp(last_seen(&w)->method, "DELETE") == 0 && last_seen(&w)->with_session);
    CHECK(last_seen(&w)->status == 200);
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 0 && streams == 0);
    CHECK(post_directly(w.server, w.now, "/mcp", "localhost", NULL, saved,
                        "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}", &r) == 404);
    world_free(&w);
}

/* A tools/call answered later, through mcpw_http_server_conn, while its SSE stream is open. */
static void test_http_an_answer_given_later_on_the_open_stream(void) {
    mcpw_http_server_options o = http_server_options();
    mcpw_request_options progress = {0, 1, MCPW_PROGRESS_RESET_DEFAULT};
    world w;
    mcpw_conn *view = NULL;
    size_t sessions = 0, streams = 0, ours = 9, peers = 9;
    int64_t rid;
    const logged_event *l;
    bool has = false;
    uint64_t named = 0;

    world_start(&w, make_http_server(&o), MCPW_CLIENT_ERA_LEGACY, NULL);
    w.hold_slow = 1;
    rid = client_request(&w, "tools/call", "{\"name\":\"slow\"}", &progress);
    converse(&w);
    CHECK(w.held && w.open_count == 1);
    CHECK(logged(&w, MCPW_EVENT_RESPONSE, rid) == NULL);
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 1 && streams == 1);
    do { /* what the conversation so far named */
        OK(mcpw_http_server_poll_woken(w.server, &has, &named));
    } while (has);

    OK(mcpw_http_server_conn(w.server, w.held_key, &view));
    OK(mcpw_conn_in_flight(view, &ours, &peers));
    CHECK(ours == 0 && peers == 1);
    OK(mcpw_conn_progress(view, &w.held_id, 0.5, 0, false, S("working")));
    /* The progress is for the held request's stream: that stream is named, once. */
    OK(mcpw_http_server_poll_woken(w.server, &has, &named));
    CHECK(has && named == w.open[0].stream);
    OK(mcpw_http_server_poll_woken(w.server, &has, &named));
    CHECK(!has && named == 0);
    converse(&w);
    l = logged(&w, MCPW_EVENT_PROGRESS, rid);
    CHECK(l != NULL && l->progress == 0.5 && !l->has_total);
    CHECK(w.open_count == 1);
    /* Everything on the stream was written: consuming more is refused. */
    RC(MCPW_ERR_CONSUME_TOO_MUCH, mcpw_http_server_consume_stream(w.server, w.open[0].stream, 1));

    OK(mcpw_http_server_conn(w.server, w.held_key, &view)); /* the earlier view is stale now */
    OK(mcpw_conn_respond(view, &w.held_id,
                         S("{\"content\":[{\"type\":\"text\",\"text\":\"done later\"}]}")));
    converse(&w);
    l = logged(&w, MCPW_EVENT_RESPONSE, rid);
    CHECK(l != NULL && strstr(l->text, "done later") != NULL);
    CHECK(w.open_count == 0);
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 1 && streams == 0);
    world_free(&w);
}

/* A callback the library runs (a random source, an event store) that calls back in: every call
   that takes a handle is refused with MCPW_ERR_REENTRANT and does nothing, a free included
   (it would have freed the server under the call that runs the callback; any such call
   aliased that call's handle, undefined behaviour). Outside the callbacks all is as before. */
typedef struct {
    mcpw_http_server *server;
    mcpw_tasks *tasks;
    int calls, refused, others;
} reentry;

static void reenter(reentry *r) {
    size_t a = 0, b = 0;
    bool has = false;
    uint64_t at = 0;
    mcpw_result rc = r->server != NULL ? mcpw_http_server_counts(r->server, &a, &b)
                                       : mcpw_tasks_poll_timeout(r->tasks, &has, &at);
    r->calls++;
    if (rc == MCPW_ERR_REENTRANT) r->refused++;
    else r->others++;
    seen_results[(int)rc] = 1;
    /* Functions without a handle still work. */
    if (strcmp(mcpw_result_message(MCPW_ERR_REENTRANT), "") == 0) r->others++;
    if (r->server != NULL) mcpw_http_server_free(r->server); /* nothing */
    else mcpw_tasks_free(r->tasks);                          /* nothing */
}

static void reentering_random(void *user, uint8_t *buf, size_t len) {
    test_random(&random_state, buf, len);
    reenter((reentry *)user);
}

static void reentering_append(void *user, const char *session, size_t session_len,
                              uint64_t stream, uint64_t event, const uint8_t *bytes,
                              size_t len) {
    (void)session, (void)session_len, (void)stream, (void)event, (void)bytes, (void)len;
    reenter((reentry *)user);
}

static int reentering_replay(void *user, const char *session, size_t session_len,
                             uint64_t stream, uint64_t after, mcpw_replay_sink sink,
                             void *sink_ctx) {
    (void)session, (void)session_len, (void)stream, (void)after, (void)sink, (void)sink_ctx;
    reenter((reentry *)user);
    return 0;
}

static void reentering_forget(void *user, const char *session, size_t session_len) {
    (void)session, (void)session_len;
    reenter((reentry *)user);
}

static void test_callbacks_that_call_back_in_are_refused(void) {
    mcpw_http_server_options o = http_server_options();
    mcpw_event_store hooks;
    reentry r, t;
    mcpw_http_response resp;
    size_t sessions = 0, streams = 0, len = 0;
    mcpw_str id, sid;
    char session[128] = {0}, last[64];
    int calls;
    mcpw_event ev;
    mcpw_conn *view = NULL;
    mcpw_id call;
    uint64_t key = 0, rkey = 0, stream = 0;
    const uint8_t *bytes = NULL;
    bool finished = false, open = false;
    mcpw_http_header get[5];

    memset(&call, 0, sizeof call);

    memset(&r, 0, sizeof r);
    hooks.user = &r;
    hooks.append = reentering_append;
    hooks.replay = reentering_replay;
    hooks.forget = reentering_forget;
    o.events = &hooks;
    o.random = reentering_random;
    o.random_user = &r;
    r.server = make_http_server(&o);
    CHECK(post_directly(r.server, 0, "/mcp", "localhost", NULL, NULL, HTTP_INIT, &resp) == 200);
    CHECK(r.calls >= 1 && r.refused == r.calls && r.others == 0); /* the session id's random */
    sid = find_header(resp.headers, resp.headers_len, "Mcp-Session-Id");
    CHECK(sid.ptr != NULL && sid.len < sizeof session);
    if (sid.ptr != NULL && sid.len < sizeof session) memcpy(session, sid.ptr, sid.len);
    CHECK(post_directly(r.server, 0, "/mcp", "localhost", NULL, session,
                        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
                        &resp) == 202);
    /* A call whose stream is polled before its answer: the answer is appended to the store. */
    calls = r.calls;
    CHECK(post_directly(r.server, 0, "/mcp", "localhost", NULL, session,
                        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"
                        "{\"name\":\"echo\",\"arguments\":{}}}",
                        &resp) == 200);
    CHECK(resp.has_stream);
    stream = resp.stream;
    for (;;) {
        OK(mcpw_http_server_poll_event(r.server, &ev, &key, &view));
        if (ev.kind == MCPW_EVENT_NONE) break;
        if (ev.kind == MCPW_EVENT_REQUEST) {
            call = ev.id;
            rkey = key;
        }
    }
    OK(mcpw_http_server_poll_stream(r.server, stream, &bytes, &len, &finished, &open));
    OK(mcpw_http_server_conn(r.server, rkey, &view));
    OK(mcpw_conn_respond(view, &call, S("{\"content\":[]}")));
    OK(mcpw_http_server_poll_stream(r.server, stream, &bytes, &len, &finished, &open));
    CHECK(finished && r.calls > calls && r.refused == r.calls && r.others == 0); /* append */
    /* A resumption of that stream: the store's replay. */
    calls = r.calls;
    snprintf(last, sizeof last, "%llu-1", (unsigned long long)stream);
    get[0] = make_header("Host", "localhost");
    get[1] = make_header("Accept", "text/event-stream");
    get[2] = make_header("Mcp-Session-Id", session);
    get[3] = make_header("MCP-Protocol-Version", "2025-11-25");
    get[4] = make_header("Last-Event-ID", last);
    OK(mcpw_http_server_handle_request(r.server, 0, S("GET"), S("/mcp"), get, 5, NULL, 0, &resp));
    CHECK(resp.status == 200);
    CHECK(r.calls > calls && r.refused == r.calls && r.others == 0); /* replay */
    OK(mcpw_http_server_counts(r.server, &sessions, &streams));
    CHECK(sessions == 1);
    r.calls = r.refused = 0;
    mcpw_http_server_free(r.server); /* forgets the live session: its callback calls in */
    CHECK(r.calls == 1 && r.refused == 1 && r.others == 0);

    memset(&t, 0, sizeof t);
    OK(mcpw_tasks_new(NULL, 0, 1795521600000ull, &t.tasks));
    OK(mcpw_tasks_create(t.tasks, 0, reentering_random, &t, &id));
    CHECK(t.calls >= 1 && t.refused == t.calls && t.others == 0);
    OK(mcpw_tasks_create(t.tasks, 0, test_random, &random_state, &id));
    mcpw_tasks_free(t.tasks);
}

/* What a consume may report is what the last poll_stream lent, however much waits on the
   stream by then (answers given on views since are moved onto it by any server call), and
   a consume of zero changes nothing. Checked against what waited at the consume, a consume
   larger than the loan passed and dropped bytes of an answer never written, and a consume of
   zero before the settle made an answer that would have been a JSON body a stream. */
static void test_http_consume_counts_against_what_was_lent(void) {
    mcpw_http_server_options o = http_server_options();
    mcpw_http_server *server = make_http_server(&o);
    mcpw_http_response r;
    mcpw_str sid;
    char session[128] = {0};
    mcpw_event ev;
    mcpw_conn *view = NULL;
    uint64_t key = 0, rkey = 0, stream = 0;
    mcpw_id id;
    const uint8_t *bytes = NULL;
    size_t len = 0, first = 0;
    bool finished = false, open = false;

    CHECK(post_directly(server, 0, "/mcp", "localhost", NULL, NULL, HTTP_INIT, &r) == 200);
    sid = find_header(r.headers, r.headers_len, "Mcp-Session-Id");
    CHECK(sid.ptr != NULL && sid.len < sizeof session);
    if (sid.ptr != NULL && sid.len < sizeof session) memcpy(session, sid.ptr, sid.len);
    CHECK(post_directly(server, 0, "/mcp", "localhost", NULL, session,
                        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
                        &r) == 202);
    for (int call = 2; call <= 3; call++) {
        char body[128];
        snprintf(body, sizeof body,
                 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":"
                 "{\"name\":\"echo\",\"arguments\":{}}}",
                 call);
        CHECK(post_directly(server, 0, "/mcp", "localhost", NULL, session, body, &r) == 200);
        CHECK(r.has_stream);
        stream = r.stream;
        memset(&id, 0, sizeof id);
        for (;;) {
            OK(mcpw_http_server_poll_event(server, &ev, &key, &view));
            if (ev.kind == MCPW_EVENT_NONE) break;
            if (ev.kind == MCPW_EVENT_REQUEST) {
                id = ev.id;
                rkey = key;
            }
        }
        CHECK(id.kind == MCPW_ID_INT && id.integer == call);
        if (call == 3) {
            /* The stream is polled before the answer: what is lent is its start, if any. */
            OK(mcpw_http_server_poll_stream(server, stream, &bytes, &len, &finished, &open));
            CHECK(open && !finished);
            first = len;
        }
        OK(mcpw_http_server_conn(server, rkey, &view)); /* (the last poll staled the view) */
        OK(mcpw_conn_respond(view, &id, S("{\"content\":[]}")));
        if (call == 2) {
            /* Zero written changes nothing: the answer is a JSON body still. */
            OK(mcpw_http_server_consume_stream(server, stream, 0));
            OK(mcpw_http_server_settle(server, stream, &r));
            CHECK(!r.has_stream && r.status == 200);
            CHECK(r.body_len > 0 && strstr((const char *)r.body, "\"id\":2") != NULL);
            continue;
        }
        /* The answer now waits on the stream, but was never lent: one byte more than the
           loan is refused, and the answer is whole. */
        RC(MCPW_ERR_CONSUME_TOO_MUCH, mcpw_http_server_consume_stream(server, stream, first + 1));
        OK(mcpw_http_server_poll_stream(server, stream, &bytes, &len, &finished, &open));
        CHECK(open && finished && len > first);
        CHECK(len >= first + 5 && memcmp(bytes + first, "id: ", 4) == 0);
        CHECK(contains(bytes, len, "\"id\":3"));
        /* Written in two parts, each reported; then nothing more may be. */
        OK(mcpw_http_server_consume_stream(server, stream, len / 2));
        OK(mcpw_http_server_consume_stream(server, stream, len - len / 2));
        RC(MCPW_ERR_CONSUME_TOO_MUCH, mcpw_http_server_consume_stream(server, stream, 1));
    }
    mcpw_http_server_free(server);
}

/* Connection views: every command and getter, no transport, never freed, stale after the
   lender's next other non-const call. */
static void test_http_connection_views(void) {
    mcpw_http_server_options o = http_server_options();
    world w;
    mcpw_conn *view = NULL, *again = NULL;
    mcpw_state state = MCPW_STATE_CLOSED;
    mcpw_role role = MCPW_ROLE_CLIENT;
    mcpw_era era = MCPW_ERA_UNDECIDED;
    mcpw_str text, sid;
    const uint8_t *bytes = NULL;
    size_t len = 0, n1 = 0, n2 = 0;
    uint64_t stream = 0, deadline = 0;
    bool has = false;
    int64_t rid = 0;
    mcpw_event ev;

    world_start(&w, make_http_server(&o), MCPW_CLIENT_ERA_LEGACY, NULL);
    OK(mcpw_http_server_conn(w.server, w.key, &view));
    CHECK(view != NULL);
    OK(mcpw_conn_state(view, &state));
    CHECK(state == MCPW_STATE_OPERATING);
    OK(mcpw_conn_role(view, &role));
    CHECK(role == MCPW_ROLE_SERVER);
    OK(mcpw_conn_era(view, &era));
    CHECK(era == MCPW_ERA_LEGACY);
    OK(mcpw_conn_peer_info(view, &text));
    CHECK(str_eq(text, "{\"name\":\"test\",\"version\":\"1.0\"}"));
    /* The lender's const calls keep the view. */
    OK(mcpw_http_server_counts(w.server, &n1, &n2));
    OK(mcpw_http_server_session_id(w.server, w.key, &sid));
    OK(mcpw_http_server_poll_timeout(w.server, &has, &deadline));
    OK(mcpw_conn_state(view, &state));
    /* The lender moves the bytes: the transport calls are refused. */
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_handle_input(view, w.now, (const uint8_t *)"{}\n", 3));
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_handle_frame(view, w.now, 1, (const uint8_t *)"{}", 2));
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_handle_eof(view, w.now));
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_transmit(view, &bytes, &len, &stream));
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_consume(view, 0));
    /* So are its timers: the lender fires them, with its own. */
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_handle_timeout(view, w.now));
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_poll_timeout(view, &has, &deadline));
    /* Freeing a view does nothing: it still works, and the server frees it once at the end. */
    mcpw_conn_free(view);
    OK(mcpw_conn_state(view, &state));
    CHECK(state == MCPW_STATE_OPERATING);
    /* Lending the same connection again keeps the other views valid (so does lending another
       connection's: test_http_each_connection_has_its_own_view). */
    OK(mcpw_http_server_conn(w.server, w.key, &again));
    OK(mcpw_conn_state(again, &state));
    OK(mcpw_conn_state(view, &state));
    /* Any other non-const call on the server makes the views stale: every call is refused. */
    OK(mcpw_http_server_handle_timeout(w.server, w.now));
    RC(MCPW_ERR_STALE_VIEW, mcpw_conn_state(view, &state));
    RC(MCPW_ERR_STALE_VIEW, mcpw_conn_state(again, &state));
    RC(MCPW_ERR_STALE_VIEW, mcpw_conn_protocol_version(view, &text));
    RC(MCPW_ERR_STALE_VIEW, mcpw_conn_notify(view, S("notifications/tools/list_changed"), NULL, 0));
    RC(MCPW_ERR_STALE_VIEW, mcpw_conn_poll_event(view, &ev));
    RC(MCPW_ERR_STALE_VIEW, mcpw_conn_close(view, w.now, 0));
    /* A refused lending changes nothing on the server: the views lent so far stay valid. It
       made them stale, and an answer given through one of them then failed. */
    OK(mcpw_http_server_conn(w.server, w.key, &view));
    RC(MCPW_ERR_UNKNOWN_CONNECTION, mcpw_http_server_conn(w.server, w.key + 1000, &again));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_conn(w.server, w.key, NULL));
    OK(mcpw_conn_state(view, &state));
    /* A view's events come from its lender: polling the view itself is refused. It took the
       connection's events past the server, and ended the views of the event the server had
       lent (a use after free when that event was large). */
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_poll_event(view, &ev));
    OK(mcpw_conn_state(view, &state));
    /* A view lent by poll_event dies with the next poll. */
    OK(mcpw_http_server_conn(w.server, w.key, &view));
    OK(mcpw_http_server_poll_event(w.server, &ev, &stream, &again));
    CHECK(ev.kind == MCPW_EVENT_NONE && again == NULL);
    RC(MCPW_ERR_STALE_VIEW, mcpw_conn_in_flight(view, &n1, &n2));

    /* The client's view: the same rules. */
    OK(mcpw_http_client_conn(w.client, &view));
    OK(mcpw_conn_role(view, &role));
    CHECK(role == MCPW_ROLE_CLIENT);
    OK(mcpw_http_client_session_id(w.client, &sid));
    OK(mcpw_http_client_poll_timeout(w.client, &has, &deadline));
    OK(mcpw_conn_state(view, &state));
    CHECK(state == MCPW_STATE_OPERATING);
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_transmit(view, &bytes, &len, &stream));
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_handle_input(view, w.now, (const uint8_t *)"{}\n", 3));
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_poll_event(view, &ev));
    /* Its timers are the client's: resumptions and lingering streams fire with them. */
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_handle_timeout(view, w.now));
    RC(MCPW_ERR_NOT_OWNER, mcpw_conn_poll_timeout(view, &has, &deadline));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_client_conn(w.client, NULL));
    OK(mcpw_conn_state(view, &state));
    mcpw_conn_free(view);
    OK(mcpw_conn_request(view, w.now, S("tools/list"), NULL, 0, NULL, &rid));
    OK(mcpw_http_client_handle_timeout(w.client, w.now));
    RC(MCPW_ERR_STALE_VIEW, mcpw_conn_state(view, &state));
    RC(MCPW_ERR_STALE_VIEW, mcpw_conn_request(view, w.now, S("tools/list"), NULL, 0, NULL, &rid));
    /* The request made through the view goes out through poll_action. */
    converse(&w);
    CHECK(logged(&w, MCPW_EVENT_RESPONSE, rid) != NULL);
    world_free(&w);
}

/* A command on a view after the lender's const poll_timeout: its deadline counts at the next
   poll_timeout and fires at handle_timeout. The lender took note of a view's connection only
   when it lent it: a request made after a poll_timeout, behind another session's earlier
   deadline, never timed out. */
static void test_http_a_command_on_a_view_after_poll_timeout_is_seen(void) {
    mcpw_http_server_options o = http_server_options();
    mcpw_request_options soon = {2000, 0, MCPW_PROGRESS_RESET_DEFAULT};
    mcpw_request_options later = {5000, 0, MCPW_PROGRESS_RESET_DEFAULT};
    world w;
    mcpw_conn *view = NULL, *other = NULL;
    mcpw_http_response r;
    mcpw_str sid;
    char second[128] = {0};
    bool has = false;
    uint64_t deadline = 0, key = 0, key2 = 0;
    int64_t rid = 0, rid2 = 0;
    int timed_out = 0;
    mcpw_event ev;

    world_start(&w, make_http_server(&o), MCPW_CLIENT_ERA_LEGACY, NULL);
    /* A second session, with a request of its own due in 5 s. */
    CHECK(post_directly(w.server, w.now, "/mcp", "localhost", NULL, NULL, HTTP_INIT, &r) == 200);
    sid = find_header(r.headers, r.headers_len, "Mcp-Session-Id");
    CHECK(sid.ptr != NULL && sid.len < sizeof second);
    if (sid.ptr != NULL && sid.len < sizeof second) memcpy(second, sid.ptr, sid.len);
    CHECK(post_directly(w.server, w.now, "/mcp", "localhost", NULL, second,
                        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
                        &r) == 202);
    for (;;) {
        OK(mcpw_http_server_poll_event(w.server, &ev, &key, &other));
        if (ev.kind == MCPW_EVENT_NONE) break;
        if (key != w.key) key2 = key;
    }
    CHECK(key2 != 0 && key2 != w.key);
    OK(mcpw_http_server_conn(w.server, key2, &other));
    OK(mcpw_conn_request(other, w.now, S("ping"), NULL, 0, &later, &rid2));
    OK(mcpw_http_server_poll_timeout(w.server, &has, &deadline));
    CHECK(has && deadline == w.now + 5000000000ull);

    /* The first session's view, then a poll_timeout, then a request due in 2 s. */
    OK(mcpw_http_server_conn(w.server, w.key, &view));
    OK(mcpw_http_server_poll_timeout(w.server, &has, &deadline));
    CHECK(has && deadline == w.now + 5000000000ull);
    OK(mcpw_conn_request(view, w.now, S("ping"), NULL, 0, &soon, &rid));
    OK(mcpw_http_server_poll_timeout(w.server, &has, &deadline));
    CHECK(has && deadline == w.now + 2000000000ull);
    OK(mcpw_http_server_handle_timeout(w.server, w.now + 2000000000ull));
    for (;;) {
        OK(mcpw_http_server_poll_event(w.server, &ev, &key, &other));
        if (ev.kind == MCPW_EVENT_NONE) break;
        if (ev.kind == MCPW_EVENT_TIMED_OUT && key == w.key && ev.request == rid) timed_out++;
        CHECK(ev.kind != MCPW_EVENT_TIMED_OUT || key == w.key);
    }
    CHECK(timed_out == 1);
    OK(mcpw_http_server_poll_timeout(w.server, &has, &deadline));
    CHECK(has && deadline == w.now + 5000000000ull);
    world_free(&w);
}

/* 2026-07-28: no sessions; each request a connection of its own, gone once answered; the
   standard headers and the tools' Mcp-Param headers. */
/* Views of two sessions lent one after the other are two views, each of its own session. */
static void test_http_each_connection_has_its_own_view(void) {
    mcpw_http_server_options o = http_server_options();
    world a, b;
    mcpw_conn *va = NULL, *vb = NULL, *again = NULL;
    size_t ours = 9, peers = 9;
    mcpw_state state;

    world_start(&a, make_http_server(&o), MCPW_CLIENT_ERA_LEGACY, NULL);
    a.hold_slow = 1;
    client_request(&a, "tools/call", "{\"name\":\"slow\"}", NULL);
    converse(&a);
    CHECK(a.held);
    world_start(&b, a.server, MCPW_CLIENT_ERA_LEGACY, NULL);
    CHECK(a.key != 0 && b.key != 0 && a.key != b.key);
    OK(mcpw_http_server_conn(a.server, a.key, &va));
    OK(mcpw_http_server_conn(a.server, b.key, &vb));
    CHECK(va != vb);
    /* Session A holds a request of its peer's; session B does not. */
    OK(mcpw_conn_in_flight(va, &ours, &peers));
    CHECK(peers == 1);
    OK(mcpw_conn_in_flight(vb, &ours, &peers));
    CHECK(peers == 0);
    /* Lending A again gives A's view again. */
    OK(mcpw_http_server_conn(a.server, a.key, &again));
    CHECK(again == va);
    OK(mcpw_conn_in_flight(va, &ours, &peers));
    CHECK(peers == 1);
    /* Both die with the next other call. */
    OK(mcpw_http_server_handle_timeout(a.server, a.now));
    RC(MCPW_ERR_STALE_VIEW, mcpw_conn_state(va, &state));
    RC(MCPW_ERR_STALE_VIEW, mcpw_conn_state(vb, &state));
    mcpw_http_client_free(b.client);
    world_free(&a);
}

static void test_http_the_stateless_era(void) {
    mcpw_http_server_options o = http_server_options();
    world w;
    mcpw_str s = {"x", 1};
    mcpw_conn *view = NULL;
    mcpw_era era = MCPW_ERA_UNDECIDED;
    mcpw_request_context context;
    mcpw_http_response r;
    mcpw_http_header h[6];
    size_t sessions = 9, streams = 9;
    int64_t rid;
    uint64_t key;
    const logged_event *l;
    char body[512];

    o.tools.ptr = HTTP_TOOLS;
    o.tools.len = strlen(HTTP_TOOLS);
    world_start(&w, make_http_server(&o), MCPW_CLIENT_ERA_MODERN, NULL);
    l = logged(&w, MCPW_EVENT_READY, 0);
    CHECK(l != NULL && strcmp(l->text, "2026-07-28") == 0);
    CHECK(w.seen_count == 1 && w.seen[0].status == 200 && w.seen[0].with_version);
    CHECK(!w.seen[0].with_session);
    OK(mcpw_http_client_session_id(w.client, &s));
    CHECK(s.ptr == NULL && s.len == 0);

    /* tools/list: the client learns the tools' header annotations. */
    rid = client_request(&w, "tools/list", NULL, NULL);
    converse(&w);
    l = logged(&w, MCPW_EVENT_RESPONSE, rid);
    CHECK(l != NULL && strstr(l->text, "\"sql\"") != NULL);
    rid = client_request(&w, "tools/call",
                         "{\"name\":\"echo\",\"arguments\":{\"text\":\"stateless hello\"}}", NULL);
    converse(&w);
    l = logged(&w, MCPW_EVENT_RESPONSE, rid);
    CHECK(l != NULL && strstr(l->text, "stateless hello") != NULL);
    /* Answered, its connection is gone. */
    key = w.key;
    RC(MCPW_ERR_UNKNOWN_CONNECTION, mcpw_http_server_session_id(w.server, key, &s));
    RC(MCPW_ERR_UNKNOWN_CONNECTION, mcpw_http_server_conn(w.server, key, &view));

    /* While a request is in flight, its connection has no session id. */
    w.hold_slow = 1;
    rid = client_request(&w, "tools/call", "{\"name\":\"slow\"}", NULL);
    converse(&w);
    CHECK(w.held && w.open_count == 1);
    s.ptr = "x";
    s.len = 1;
    OK(mcpw_http_server_session_id(w.server, w.held_key, &s));
    CHECK(s.ptr == NULL && s.len == 0);
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 0 && streams == 1);
    OK(mcpw_http_server_conn(w.server, w.held_key, &view));
    OK(mcpw_conn_era(view, &era));
    CHECK(era == MCPW_ERA_MODERN);
    OK(mcpw_conn_request_context(view, &w.held_id, &context));
    CHECK(context.known && str_eq(context.version, "2026-07-28"));
    OK(mcpw_conn_respond(view, &w.held_id, S("{\"content\":[]}")));
    converse(&w);
    CHECK(logged(&w, MCPW_EVENT_RESPONSE, rid) != NULL && w.open_count == 0);

    /* sql's region travels in Mcp-Param-Region too, which the server checks. */
    rid = client_request(&w, "tools/call", "{\"name\":\"sql\",\"arguments\":{\"region\":\"eu\"}}",
                         NULL);
    converse(&w);
    l = logged(&w, MCPW_EVENT_RESPONSE, rid);
    CHECK(l != NULL && strstr(l->text, "\"text\":\"eu\"") != NULL);
    CHECK(last_seen(&w)->with_region && !last_seen(&w)->with_session);
    /* Without it: 400 with -32020, before the application sees anything. */
    snprintf(body, sizeof body,
             "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"sql\","
             "\"arguments\":{\"region\":\"eu\"},%s}}",
             MODERN_META);
    h[0] = make_header("Host", "localhost");
    h[1] = make_header("Content-Type", "application/json");
    h[2] = make_header("Accept", "application/json, text/event-stream");
    h[3] = make_header("MCP-Protocol-Version", "2026-07-28");
    h[4] = make_header("Mcp-Method", "tools/call");
    h[5] = make_header("Mcp-Name", "sql");
    OK(mcpw_http_server_handle_request(w.server, w.now, S("POST"), S("/mcp"), h, 6,
                                       (const uint8_t *)body, strlen(body), &r));
    CHECK(r.status == 400 && !r.has_stream);
    CHECK(contains(r.body, r.body_len, "-32020") && contains(r.body, r.body_len, "\"id\":7"));
    CHECK(str_eq(find_header(r.headers, r.headers_len, "Content-Type"), "application/json"));
    /* The tools declared anew while the server runs: sql without its annotation is not
       checked any more; then with it again, it is. What is not a tools list changes nothing,
       and an invalid annotation is refused. */
    {
        static const char plain_sql[] =
            "[{\"name\":\"sql\",\"inputSchema\":{\"type\":\"object\"}}]";
        static const char bad[] =
            "[{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\",\"properties\":"
            "{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"bad name\"}}}}]";
        OK(mcpw_http_server_declare_tools(w.server, plain_sql, strlen(plain_sql)));
        OK(mcpw_http_server_handle_request(w.server, w.now, S("POST"), S("/mcp"), h, 6,
                                           (const uint8_t *)body, strlen(body), &r));
        CHECK(r.status == 200 && r.has_stream);
        /* The host's shutdown grace over: the request awaited on the stream gets -32603
           there, and the stream finishes with it. */
        {
            const uint8_t *bytes = NULL;
            size_t len = 0, answered = 0;
            bool finished = false, open = false;
            OK(mcpw_http_server_abandon_streams(w.server, &answered));
            CHECK(answered == 1);
            OK(mcpw_http_server_poll_stream(w.server, r.stream, &bytes, &len, &finished, &open));
            CHECK(open && finished && contains(bytes, len, "-32603") &&
                  contains(bytes, len, "\"id\":7"));
            OK(mcpw_http_server_consume_stream(w.server, r.stream, len));
            OK(mcpw_http_server_abandon_streams(w.server, NULL)); /* (nothing left: 0) */
            RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_abandon_streams(NULL, &answered));
        }
        converse(&w);
        RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_http_server_declare_tools(w.server, S("{\"tools\":5}")));
        RC(MCPW_ERR_INVALID_JSON, mcpw_http_server_declare_tools(w.server, S("[")));
        RC(MCPW_ERR_CONFIG_REFUSED, mcpw_http_server_declare_tools(w.server, bad, strlen(bad)));
        RC(MCPW_ERR_NULL_ARGUMENT, mcpw_http_server_declare_tools(NULL, S("[]")));
        OK(mcpw_http_server_declare_tools(w.server, HTTP_TOOLS, strlen(HTTP_TOOLS)));
        OK(mcpw_http_server_handle_request(w.server, w.now, S("POST"), S("/mcp"), h, 6,
                                           (const uint8_t *)body, strlen(body), &r));
        CHECK(r.status == 400 && contains(r.body, r.body_len, "-32020"));
    }
    /* GET and DELETE have nothing to do in this era. */
    OK(mcpw_http_server_handle_request(w.server, w.now, S("GET"), S("/mcp"), h, 4, NULL, 0, &r));
    CHECK(r.status == 405);
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 0 && streams == 0);
    world_free(&w);
}

/* 2026-07-28: the client cancels, which closes the request's stream; the server hears it as
   the stream closing, which cancels the request. */
static void test_http_closing_a_stateless_stream_cancels_the_request(void) {
    mcpw_http_server_options o = http_server_options();
    world w;
    mcpw_conn *view = NULL;
    size_t sessions = 9, streams = 9;
    int64_t rid;

    world_start(&w, make_http_server(&o), MCPW_CLIENT_ERA_MODERN, NULL);
    w.hold_slow = 1;
    rid = client_request(&w, "tools/call", "{\"name\":\"slow\"}", NULL);
    converse(&w);
    CHECK(w.held && w.open_count == 1 && w.cancelled == 0);
    OK(mcpw_http_client_conn(w.client, &view));
    OK(mcpw_conn_cancel(view, w.now, rid, S("changed my mind")));
    converse(&w); /* an ABORT action: the pump reports the stream closed */
    CHECK(w.open_count == 0);
    /* The application is told (MCPW_EVENT_PEER_CANCELLED), then the connection is gone. */
    CHECK(w.cancelled == 1);
    RC(MCPW_ERR_UNKNOWN_CONNECTION, mcpw_http_server_conn(w.server, w.held_key, &view));
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 0 && streams == 0);
    CHECK(logged(&w, MCPW_EVENT_RESPONSE, rid) == NULL);
    world_free(&w);
}

/* A stateless request held open whose client leaves: its PEER_CANCELLED comes with a view,
   and the next poll, which lends another request's view, ends that connection. Its view must
   be stale then: it pointed at the freed connection (whose memory the next request may
   reuse), and calls on it read and wrote there. */
static uint16_t post_stateless(mcpw_http_server *server, uint64_t now, int id,
                               mcpw_http_response *out) {
    mcpw_http_header h[6];
    mcpw_http_response settled;
    char body[512];
    snprintf(body, sizeof body,
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"x\",%s}}",
             id, MODERN_META);
    h[0] = make_header("Host", "localhost");
    h[1] = make_header("Content-Type", "application/json");
    h[2] = make_header("Accept", "application/json, text/event-stream");
    h[3] = make_header("MCP-Protocol-Version", "2026-07-28");
    h[4] = make_header("Mcp-Method", "tools/call");
    h[5] = make_header("Mcp-Name", "x");
    OK(mcpw_http_server_handle_request(server, now, S("POST"), S("/mcp"), h, 6,
                                       (const uint8_t *)body, strlen(body), out));
    if (out->has_stream) OK(mcpw_http_server_settle(server, out->stream, &settled));
    return out->status;
}

static void test_http_a_view_of_a_connection_a_poll_ended_is_stale(void) {
    mcpw_http_server_options o = http_server_options();
    mcpw_http_server *server = make_http_server(&o);
    mcpw_http_response first, second;
    mcpw_event ev;
    mcpw_conn *view = NULL, *left = NULL;
    uint64_t key;
    size_t ours = 0, peers = 0;
    int checked = 0;

    CHECK(post_stateless(server, 1, 1, &first) == 200 && first.has_stream);
    do OK(mcpw_http_server_poll_event(server, &ev, &key, &view)); /* READY, REQUEST: held */
    while (ev.kind != MCPW_EVENT_NONE);
    OK(mcpw_http_server_stream_closed(server, 2, first.stream)); /* its client went away */
    CHECK(post_stateless(server, 3, 2, &second) == 200);
    for (;;) {
        OK(mcpw_http_server_poll_event(server, &ev, &key, &view));
        if (ev.kind == MCPW_EVENT_PEER_CANCELLED) {
            left = view;
            OK(mcpw_conn_in_flight(left, &ours, &peers)); /* valid while its event is current */
        } else if (left != NULL && !checked) {
            /* This poll lent another connection's view, and ended the one that left. */
            RC(MCPW_ERR_STALE_VIEW, mcpw_conn_in_flight(left, &ours, &peers));
            RC(MCPW_ERR_STALE_VIEW, mcpw_conn_close(left, 4, 0));
            checked = 1;
        }
        if (ev.kind == MCPW_EVENT_NONE) break;
    }
    CHECK(left != NULL && checked);
    mcpw_http_server_free(server);
}

/* DNS rebinding protection, the endpoint's path, and the body cap. */
static void test_http_host_origin_path_and_size_checks(void) {
    mcpw_http_server_options o = http_server_options();
    mcpw_str allowed[1] = {{"mcp.example.com", 15}};
    mcpw_http_server *server;
    mcpw_http_response r;

    server = make_http_server(&o);
    CHECK(post_directly(server, 0, "/mcp", "evil.example.com", NULL, NULL, HTTP_INIT, &r) == 403);
    CHECK(contains(r.body, r.body_len, "Forbidden"));
    CHECK(post_directly(server, 0, "/mcp", "127.0.0.1:3000", "http://evil.example.com", NULL,
                        HTTP_INIT, &r) == 403);
    CHECK(post_directly(server, 0, "/mcp", "mcp.example.com", NULL, NULL, HTTP_INIT, &r) == 403);
    CHECK(post_directly(server, 0, "/mcp", "localhost:8080", "http://localhost:8080", NULL,
                        HTTP_INIT, &r) == 200);
    CHECK(find_header(r.headers, r.headers_len, "Mcp-Session-Id").ptr != NULL);
    /* Another path: 404, with nothing else. */
    CHECK(post_directly(server, 0, "/other", "localhost", NULL, NULL, HTTP_INIT, &r) == 404);
    CHECK(r.headers_len == 0 && r.body_len == 0 && !r.has_stream);
    /* The query string is not part of the path; no path at all is not checked. */
    CHECK(post_directly(server, 0, "/mcp?x=1", "localhost", NULL, NULL, HTTP_INIT, &r) == 200);
    CHECK(post_directly(server, 0, NULL, "localhost", NULL, NULL, HTTP_INIT, &r) == 200);
    mcpw_http_server_free(server);

    /* Names listed in allowed_hosts pass too (any port), loopback still does. */
    o.allowed_hosts = allowed;
    o.allowed_hosts_len = 1;
    o.endpoint.ptr = NULL; /* paths not checked */
    o.endpoint.len = 0;
    o.max_body = 64;
    server = make_http_server(&o);
    CHECK(post_directly(server, 0, "/anywhere", "mcp.example.com:443", "https://mcp.example.com",
                        NULL, "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}", &r) != 403);
    CHECK(post_directly(server, 0, "/", "mcp.example.com", NULL, NULL,
                        "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}", &r) != 403);
    CHECK(post_directly(server, 0, "/", "evil.example.com", NULL, NULL,
                        "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}", &r) == 403);
    CHECK(post_directly(server, 0, "/", "mcp.example.com", "https://evil.example.com", NULL,
                        "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}", &r) == 403);
    /* Over max_body: 413. */
    CHECK(post_directly(server, 0, "/", "localhost", NULL, NULL, HTTP_INIT, &r) == 413);
    mcpw_http_server_free(server);
}

/* 2025-11-25 polling: the application closes a long request's stream; the client comes back
   after `retry` with Last-Event-ID and gets the answer, replayed from the host's store. A
   store that cannot be read then gets the client 503, and it comes back again. */
static void test_http_polling_and_resumption_through_a_host_store(void) {
    static host_store store;
    mcpw_event_store hooks;
    mcpw_http_server_options o = http_server_options();
    world w;
    mcpw_conn *view = NULL;
    bool has = false, queued = false;
    uint64_t deadline = 0;
    size_t sessions = 9, streams = 9, seen;
    int64_t rid;
    int appends;
    const logged_event *l;

    memset(&store, 0, sizeof store);
    hooks.user = &store;
    hooks.append = store_append;
    hooks.replay = store_replay;
    hooks.forget = store_forget;
    o.events = &hooks;
    o.retry_ms = 250;
    world_start(&w, make_http_server(&o), MCPW_CLIENT_ERA_LEGACY, NULL);
    w.hold_slow = 1;
    w.poll_slow = 1;
    rid = client_request(&w, "tools/call", "{\"name\":\"slow\"}", NULL);
    converse(&w);
    /* The stream was primed, told `retry: 250` and ended before the answer. */
    CHECK(w.held && w.open_count == 0 && logged(&w, MCPW_EVENT_RESPONSE, rid) == NULL);
    OK(mcpw_http_client_poll_timeout(w.client, &has, &deadline));
    CHECK(has && deadline == w.now + 250 * MS);

    /* The work goes on with no HTTP connection open; its answer goes to the store. */
    appends = store.appends;
    OK(mcpw_http_server_conn(w.server, w.held_key, &view));
    OK(mcpw_conn_respond(view, &w.held_id,
                         S("{\"content\":[{\"type\":\"text\",\"text\":\"after polling\"}]}")));
    OK(mcpw_http_server_handle_timeout(w.server, w.now)); /* any call moves it on */
    CHECK(store.appends == appends + 1 && store.count >= 1);

    /* Early: nothing. At the deadline: a GET with Last-Event-ID, replayed from the store. */
    seen = w.seen_count;
    OK(mcpw_http_client_handle_timeout(w.client, deadline - 1));
    converse(&w);
    CHECK(w.seen_count == seen);
    /* A store that cannot be read, then one that hands back an event it cannot read (it
       went by unnoticed, a hole in the stream): each time 503, and the client comes back. */
    for (store.down = 1; store.down <= 2; store.down++) {
        w.now = deadline;
        OK(mcpw_http_client_handle_timeout(w.client, w.now));
        converse(&w);
        CHECK(w.seen_count == seen + store.down);
        CHECK(strcmp(last_seen(&w)->method, "GET") == 0 && last_seen(&w)->status == 503);
        CHECK(store.replays == store.down && store.replayed == 0);
        CHECK(logged(&w, MCPW_EVENT_RESPONSE, rid) == NULL);
        OK(mcpw_http_client_poll_timeout(w.client, &has, &deadline));
        CHECK(has && deadline > w.now);
    }
    store.down = 0;
    w.now = deadline;
    OK(mcpw_http_client_handle_timeout(w.client, w.now));
    converse(&w);
    CHECK(w.seen_count == seen + 3);
    CHECK(strcmp(last_seen(&w)->method, "GET") == 0 && last_seen(&w)->with_last_event_id);
    CHECK(last_seen(&w)->with_session && last_seen(&w)->status == 200);
    CHECK(store.replays == 3 && store.replayed == 1 && store.last_after > 0);
    l = logged(&w, MCPW_EVENT_RESPONSE, rid);
    CHECK(l != NULL && strstr(l->text, "after polling") != NULL);
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 1 && streams == 0);

    /* The session ends: the store forgets it. */
    OK(mcpw_http_client_end_session(w.client, &queued));
    converse(&w);
    CHECK(queued && store.forgets == 1 && store.count == 0);
    store_clear(&store);
    world_free(&w);
}

/* 2026-07-28 subscriptions/listen streams stay open until the server ends them. */
static void test_http_end_listen_streams(void) {
    mcpw_http_server_options o = http_server_options();
    world w;
    size_t ended = 9, sessions = 9, streams = 9;
    int64_t rid;

    world_start(&w, make_http_server(&o), MCPW_CLIENT_ERA_MODERN, NULL);
    rid = client_request(&w, "subscriptions/listen",
                         "{\"notifications\":{\"toolsListChanged\":true}}", NULL);
    converse(&w);
    CHECK(w.open_count == 1 && logged(&w, MCPW_EVENT_RESPONSE, rid) == NULL);
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 0 && streams == 1);
    OK(mcpw_http_server_end_listen_streams(w.server, &ended));
    CHECK(ended == 1);
    converse(&w);
    CHECK(w.open_count == 0 && logged(&w, MCPW_EVENT_RESPONSE, rid) != NULL);
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(streams == 0);
    OK(mcpw_http_server_end_listen_streams(w.server, &ended));
    CHECK(ended == 0);
    world_free(&w);
}

/* An idle session expires at the server's deadline; the client's next request gets 404, fails,
   and a new session starts. */
static void test_http_session_expiry(void) {
    static host_store store;
    mcpw_event_store hooks;
    mcpw_http_server_options o = http_server_options();
    world w;
    mcpw_str sid;
    char old[128] = {0};
    bool has = false;
    uint64_t deadline = 0;
    size_t sessions = 9, streams = 9, i;
    int64_t rid;
    int not_found = 0;
    const logged_event *l;

    memset(&store, 0, sizeof store);
    hooks.user = &store;
    hooks.append = store_append;
    hooks.replay = store_replay;
    hooks.forget = store_forget;
    o.events = &hooks;
    o.session_idle_timeout_ms = 60000;
    world_start(&w, make_http_server(&o), MCPW_CLIENT_ERA_LEGACY, NULL);
    OK(mcpw_http_client_session_id(w.client, &sid));
    CHECK(sid.ptr != NULL && sid.len < sizeof old);
    if (sid.ptr != NULL && sid.len < sizeof old) memcpy(old, sid.ptr, sid.len);
    OK(mcpw_http_server_poll_timeout(w.server, &has, &deadline));
    CHECK(has && deadline == w.now + 60000 * MS);
    OK(mcpw_http_server_handle_timeout(w.server, deadline - 1));
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 1);
    OK(mcpw_http_server_handle_timeout(w.server, deadline));
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 0 && streams == 0 && store.forgets == 1);
    OK(mcpw_http_server_poll_timeout(w.server, &has, &deadline));
    CHECK(!has);

    w.now += 61000 * MS;
    rid = client_request(&w, "tools/list", NULL, NULL);
    converse(&w);
    for (i = 0; i < w.seen_count; i++) {
        not_found += w.seen[i].status == 404 && w.seen[i].with_session;
    }
    CHECK(not_found == 1);
    /* The request failed, with the status... */
    l = logged(&w, MCPW_EVENT_FAILED, rid);
    CHECK(l != NULL && l->code == 404 && l->text[0] != '\0');
    CHECK(logged(&w, MCPW_EVENT_RESPONSE, rid) == NULL);
    /* ... and a new session started. */
    CHECK(count_logged(&w, MCPW_EVENT_READY) == 2);
    OK(mcpw_http_client_session_id(w.client, &sid));
    CHECK(sid.ptr != NULL && !str_eq(sid, old));
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 1);
    CHECK(post_directly(w.server, w.now, "/mcp", "localhost", NULL, old,
                        "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}", NULL) == 404);
    /* It works as the old one did. */
    rid = client_request(&w, "tools/list", NULL, NULL);
    converse(&w);
    CHECK(logged(&w, MCPW_EVENT_RESPONSE, rid) != NULL);
    /* Freeing the server ends its live session: the store forgets it too (no other process
       can serve it), rather than keep its events until the store expires them. */
    CHECK(store.forgets == 1);
    world_free(&w);
    CHECK(store.forgets == 2 && store.count == 0);
    store_clear(&store);
}

/* A failed exchange (no connection) fails its request at once. */
static void test_http_client_handle_error(void) {
    mcpw_http_server_options o = http_server_options();
    world w;
    mcpw_conn *view = NULL;
    mcpw_http_client *client;
    mcpw_http_action a;
    mcpw_event ev;
    size_t ours = 9, peers = 9;
    int64_t rid;
    int requests;
    const logged_event *l;

    world_start(&w, make_http_server(&o), MCPW_CLIENT_ERA_LEGACY, NULL);
    requests = w.requests;
    rid = client_request(&w, "tools/list", NULL, NULL);
    w.fail_next = 1;
    converse(&w);
    /* The failed POST never reached the server; then the client tells the session it gave up
       on the request (a notifications/cancelled: 202). */
    CHECK(w.seen_count == 4 && w.seen[2].status == 0 && w.requests == requests);
    CHECK(strcmp(last_seen(&w)->method, "POST") == 0 && last_seen(&w)->status == 202);
    /* No HTTP status: code 0, and a message saying what went wrong. */
    l = logged(&w, MCPW_EVENT_FAILED, rid);
    CHECK(l != NULL && l->code == 0 && l->text[0] != '\0');
    CHECK(logged(&w, MCPW_EVENT_RESPONSE, rid) == NULL);
    OK(mcpw_http_client_conn(w.client, &view));
    OK(mcpw_conn_in_flight(view, &ours, &peers));
    CHECK(ours == 0 && peers == 0); /* the request ended */
    rid = client_request(&w, "tools/list", NULL, NULL);
    converse(&w);
    CHECK(logged(&w, MCPW_EVENT_RESPONSE, rid) != NULL);
    world_free(&w);

    /* A handshake that cannot get through closes the client. */
    client = make_http_client(MCPW_CLIENT_ERA_LEGACY, 0, NULL);
    OK(mcpw_http_client_poll_action(client, &a));
    CHECK(a.kind == MCPW_HTTP_ACTION_SEND);
    OK(mcpw_http_client_handle_error(client, 1, a.exchange, 12345));
    OK(mcpw_http_client_poll_event(client, &ev));
    CHECK(ev.kind == MCPW_EVENT_CLOSED && ev.close_reason == MCPW_CLOSE_TRANSPORT_FAILED);
    CHECK(ev.code == 0 && ev.version.ptr != NULL && ev.version.len > 0); /* the reason */
    OK(mcpw_http_client_poll_event(client, &ev));
    CHECK(ev.kind == MCPW_EVENT_NONE);
    OK(mcpw_http_client_poll_action(client, &a));
    CHECK(a.kind == MCPW_HTTP_ACTION_NONE);
    mcpw_http_client_free(client);
}

/* A notification that went out is unheard until its response head: what a host about to exit
   waits for. A request is not (its answer is awaited anyway). */
static void test_http_client_has_unheard(void) {
    mcpw_http_client *client = make_http_client(MCPW_CLIENT_ERA_LEGACY, 0, NULL);
    mcpw_http_action a;
    mcpw_http_header json = {{"Content-Type", 12}, {"application/json", 16}};
    mcpw_http_header sessionless = {{"Content-Type", 12}, {"text/plain", 10}};
    const char *answer = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":"
                         "\"2025-11-25\",\"capabilities\":{},"
                         "\"serverInfo\":{\"name\":\"s\",\"version\":\"1\"}}}";
    bool unheard = true;
    uint64_t initialize;

    OK(mcpw_http_client_has_unheard(client, &unheard));
    CHECK(!unheard);
    OK(mcpw_http_client_poll_action(client, &a));
    CHECK(a.kind == MCPW_HTTP_ACTION_SEND && contains(a.body, a.body_len, "\"initialize\""));
    initialize = a.exchange;
    OK(mcpw_http_client_has_unheard(client, &unheard));
    CHECK(!unheard); /* a request */
    /* A server without sessions: no Mcp-Session-Id. */
    OK(mcpw_http_client_handle_response(client, 1, initialize, 200, &json, 1));
    OK(mcpw_http_client_handle_body(client, 1, initialize, (const uint8_t *)answer,
                                    strlen(answer)));
    OK(mcpw_http_client_handle_end(client, 1, initialize, 0));
    OK(mcpw_http_client_poll_action(client, &a));
    CHECK(a.kind == MCPW_HTTP_ACTION_SEND &&
          contains(a.body, a.body_len, "\"notifications/initialized\""));
    OK(mcpw_http_client_has_unheard(client, &unheard));
    CHECK(unheard);
    /* Its head, whatever the status, is what the host waited for. */
    OK(mcpw_http_client_handle_response(client, 2, a.exchange, 202, &sessionless, 1));
    OK(mcpw_http_client_has_unheard(client, &unheard));
    CHECK(!unheard);
    OK(mcpw_http_client_handle_end(client, 2, a.exchange, 0));
    OK(mcpw_http_client_has_unheard(client, &unheard));
    CHECK(!unheard);
    mcpw_http_client_free(client);
}

/* The client's standalone GET stream carries what belongs to no request, and a session whose
   client holds a stream never expires. */
static void test_http_the_get_stream(void) {
    mcpw_http_server_options o = http_server_options();
    mcpw_http_client_options co;
    world w;
    mcpw_conn *view = NULL;
    bool has = true;
    uint64_t deadline = 0;
    size_t sessions = 9, streams = 9;
    const logged_event *l;

    memset(&co, 0, sizeof co);
    co.open_get_stream = true;
    co.initial_delay_ms = 100;
    co.max_delay_ms = 1000;
    co.max_attempts = 2;
    o.session_idle_timeout_ms = 1000;
    o.keepalive_ms = UINT64_MAX; /* the session's own deadlines only */
    world_start(&w, make_http_server(&o), MCPW_CLIENT_ERA_LEGACY, &co);
    CHECK(w.seen_count == 3 && strcmp(w.seen[2].method, "GET") == 0 && w.seen[2].status == 200);
    CHECK(w.open_count == 1);
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 1 && streams == 1);
    OK(mcpw_http_server_poll_timeout(w.server, &has, &deadline));
    CHECK(!has);
    OK(mcpw_http_server_handle_timeout(w.server, w.now + 3600000 * MS));
    OK(mcpw_http_server_counts(w.server, &sessions, &streams));
    CHECK(sessions == 1);

    OK(mcpw_http_server_conn(w.server, w.key, &view));
    OK(mcpw_conn_notify(view, S("notifications/tools/list_changed"), NULL, 0));
    converse(&w);
    l = logged(&w, MCPW_EVENT_NOTIFICATION, 0);
    CHECK(l != NULL && strcmp(l->text, "notifications/tools/list_changed") == 0);
    CHECK(w.open_count == 1); /* it stays open */
    world_free(&w);
}

static void test_decode_without_a_connection(void) {
    const char *req = "{\"jsonrpc\":\"2.0\",\"id\":\"r-1\",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}";
    const char *batch = "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}},{\"jsonrpc\":\"1.0\",\"id\":2,\"method\":\"x\"}]";
    mcpw_message m[2];
    size_t count = 99;
    bool is_batch = true;

    OK(mcpw_decode((const uint8_t *)req, strlen(req), m, 2, &count, &is_batch));
    CHECK(count == 1 && !is_batch);
    CHECK(m[0].kind == MCPW_MESSAGE_REQUEST);
    CHECK(m[0].id.kind == MCPW_ID_STRING && str_eq(m[0].id.string, "r-1"));
    CHECK(str_eq(m[0].method, "tools/call") && !m[0].method_escaped);
    CHECK(str_eq(m[0].params, "{\"name\":\"echo\"}"));
    CHECK(m[0].params.ptr > req && m[0].params.ptr < req + strlen(req)); /* a view, not a copy */
    CHECK(m[0].result.ptr == NULL && m[0].reason == MCPW_DECODE_NONE);

    /* A batch with an invalid member, first with too little room: the count says how much. */
    OK(mcpw_decode((const uint8_t *)batch, strlen(batch), m, 1, &count, &is_batch));
    CHECK(count == 2 && is_batch);
    CHECK(m[0].kind == MCPW_MESSAGE_RESPONSE && m[0].id.integer == 1 && str_eq(m[0].result, "{}"));
    OK(mcpw_decode((const uint8_t *)batch, strlen(batch), m, 2, &count, &is_batch));
    CHECK(count == 2 && is_batch);
    CHECK(m[1].kind == MCPW_MESSAGE_INVALID && m[1].code == -32600);
    CHECK(m[1].reason == MCPW_DECODE_WRONG_VERSION && m[1].id.kind == MCPW_ID_INT && m[1].id.integer == 2);

    /* Shaped like a response but invalid: never answered, its id is one of ours. */
    const char *bad_answer = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{},\"result\":{}}";
    OK(mcpw_decode((const uint8_t *)bad_answer, strlen(bad_answer), m, 2, &count, &is_batch));
    CHECK(count == 1 && m[0].kind == MCPW_MESSAGE_INVALID_RESPONSE);
    CHECK(m[0].reason == MCPW_DECODE_DUPLICATE_KEY && m[0].id.kind == MCPW_ID_INT && m[0].id.integer == 3);

    /* A valid JSON-RPC notification MCP refuses (params an array): never answered either. */
    const char *array_params = "{\"jsonrpc\":\"2.0\",\"method\":\"x/y\",\"params\":[1,2]}";
    OK(mcpw_decode((const uint8_t *)array_params, strlen(array_params), m, 2, &count, &is_batch));
    CHECK(count == 1 && m[0].kind == MCPW_MESSAGE_INVALID_NOTIFICATION && m[0].code == -32600);
    CHECK(m[0].reason == MCPW_DECODE_PARAMS_NOT_OBJECT);

    /* Not JSON: one parse error, with its offset. A refusal is an answer, not a failed call. */
    OK(mcpw_decode((const uint8_t *)"{\"a\":", 5, m, 2, &count, &is_batch));
    CHECK(count == 1 && !is_batch && m[0].kind == MCPW_MESSAGE_PARSE_ERROR);
    CHECK(m[0].code == -32700 && m[0].reason == MCPW_DECODE_UNEXPECTED_END && m[0].offset == 5);

    count = 99;
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_decode((const uint8_t *)req, strlen(req), m, 2, NULL, &is_batch));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_decode((const uint8_t *)req, strlen(req), m, 2, &count, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_decode((const uint8_t *)req, strlen(req), NULL, 2, &count, &is_batch));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_decode(NULL, 3, m, 2, &count, &is_batch));
    CHECK(count == 99);
    OK(mcpw_decode((const uint8_t *)req, strlen(req), NULL, 0, &count, &is_batch)); /* the count only */
    CHECK(count == 1 && !is_batch);
}

static void test_json_helpers(void) {
    const char *obj = "{\"name\":\"echo\",\"arguments\":{\"text\":\"hi \\\"there\\\"\"},\"n\":[1,{\"a\":2}]}";
    mcpw_str v = {"unchanged", 9};
    mcpw_str args, n;

    OK(mcpw_json_get(obj, strlen(obj), S("name"), &v));
    CHECK(str_eq(v, "\"echo\""));
    CHECK(v.ptr >= obj && v.ptr < obj + strlen(obj)); /* a view into the caller's text */
    OK(mcpw_json_get(obj, strlen(obj), S("arguments"), &args));
    OK(mcpw_json_get(args.ptr, args.len, S("text"), &v));
    CHECK(str_eq(v, "\"hi \\\"there\\\"\""));
    OK(mcpw_json_get(obj, strlen(obj), S("missing"), &v));
    CHECK(v.ptr == NULL && v.len == 0);
    OK(mcpw_json_get(obj, strlen(obj), S("n"), &n));
    OK(mcpw_json_at(n.ptr, n.len, 1, &v));
    CHECK(str_eq(v, "{\"a\":2}"));
    OK(mcpw_json_at(n.ptr, n.len, 0, &v));
    CHECK(str_eq(v, "1"));
    OK(mcpw_json_at(n.ptr, n.len, 2, &v));
    CHECK(v.ptr == NULL);
    OK(mcpw_json_at(S("[]"), 0, &v));
    CHECK(v.ptr == NULL);

    /* A whole array in one pass: the count, and as many views as there is room for. */
    {
        const char *arr = " [ 1 , \"a\\\"]\" , {\"k\":[2,3]}, [] ] ";
        mcpw_str items[3] = {{"x", 1}, {"x", 1}, {"x", 1}};
        size_t count = 99;
        OK(mcpw_json_items(arr, strlen(arr), NULL, 0, &count));
        CHECK(count == 4);
        OK(mcpw_json_items(arr, strlen(arr), items, 3, &count));
        CHECK(count == 4);
        CHECK(str_eq(items[0], "1"));
        CHECK(str_eq(items[1], "\"a\\\"]\""));
        CHECK(str_eq(items[2], "{\"k\":[2,3]}"));
        CHECK(items[2].ptr > arr && items[2].ptr < arr + strlen(arr));
        OK(mcpw_json_items(S("[]"), items, 3, &count));
        CHECK(count == 0);
        count = 7;
        RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_json_items(S("{}"), items, 3, &count));
        RC(MCPW_ERR_INVALID_JSON, mcpw_json_items(S("[1,"), items, 3, &count));
        RC(MCPW_ERR_NULL_ARGUMENT, mcpw_json_items(S("[1]"), NULL, 1, &count));
        RC(MCPW_ERR_NULL_ARGUMENT, mcpw_json_items(S("[1]"), items, 3, NULL));
        CHECK(count == 7); /* nothing written when a call fails */
    }

    /* A string's text, escapes decoded; written only when it fits, NUL after it when room. */
    {
        char out[16];
        size_t len = 99;
        memset(out, 'z', sizeof out);
        OK(mcpw_json_string(S(" \"a\\\"b\\u00e9\\n\\ud83d\\ude00\" "), NULL, 0, &len));
        CHECK(len == 10); /* a " b é(2) \n 😀(4) */
        OK(mcpw_json_string(S("\"a\\\"b\\u00e9\\n\\ud83d\\ude00\""), out, 10, &len));
        CHECK(len == 10 && memcmp(out, "a\"b\xc3\xa9\n\xf0\x9f\x98\x80", 10) == 0);
        CHECK(out[10] == 'z'); /* no room for the NUL: none written */
        OK(mcpw_json_string(S("\"a\\\"b\\u00e9\\n\\ud83d\\ude00\""), out, 11, &len));
        CHECK(out[10] == '\0' && strlen(out) == 10);
        memset(out, 'z', sizeof out);
        OK(mcpw_json_string(S("\"too long for nine\""), out, 9, &len));
        CHECK(len == 17 && out[0] == 'z'); /* too small: nothing written */
        OK(mcpw_json_string(S("\"x\\u0000y\""), out, sizeof out, &len));
        CHECK(len == 3 && memcmp(out, "x\0y", 4) == 0);
        OK(mcpw_json_string(S("\"\""), out, sizeof out, &len));
        CHECK(len == 0 && out[0] == '\0');
        len = 7;
        RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_json_string(S("12"), out, sizeof out, &len));
        RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_json_string(S("null"), out, sizeof out, &len));
        RC(MCPW_ERR_INVALID_JSON, mcpw_json_string(S("\"a\\x\""), out, sizeof out, &len));
        RC(MCPW_ERR_INVALID_JSON, mcpw_json_string(S("\"\\ud800\""), out, sizeof out, &len));
        RC(MCPW_ERR_INVALID_UTF8, mcpw_json_string(S("\"\xff\""), out, sizeof out, &len));
        RC(MCPW_ERR_NULL_ARGUMENT, mcpw_json_string(S("\"a\""), NULL, 1, &len));
        RC(MCPW_ERR_NULL_ARGUMENT, mcpw_json_string(S("\"a\""), out, sizeof out, NULL));
        CHECK(len == 7); /* nothing written when a call fails */
        /* Decoding in place: the text is never longer than the value, and may be written
           over it (plain, with surrounding whitespace, with escapes). */
        char in_place[] = " \"abc\" ";
        OK(mcpw_json_string(in_place, strlen(in_place), in_place, sizeof in_place, &len));
        CHECK(len == 3 && strcmp(in_place, "abc") == 0);
        char plain[] = "\"abcdef\"";
        OK(mcpw_json_string(plain, strlen(plain), plain, sizeof plain, &len));
        CHECK(len == 6 && strcmp(plain, "abcdef") == 0);
        char escaped[] = "\"a\\nb\"";
        OK(mcpw_json_string(escaped, strlen(escaped), escaped, sizeof escaped, &len));
        CHECK(len == 3 && memcmp(escaped, "a\nb", 4) == 0);
    }

    /* A number as the nearest double, whatever the C locale's decimal point. */
    {
        double d = 99;
        OK(mcpw_json_number(S(" 2.5 "), &d));
        CHECK(d == 2.5);
        OK(mcpw_json_number(S("-1.5e3"), &d));
        CHECK(d == -1500.0);
        OK(mcpw_json_number(S("0.1"), &d));
        CHECK(d == 0.1);
        OK(mcpw_json_number(S("123456789012345678901234567890"), &d));
        CHECK(d == 123456789012345678901234567890.0);
        OK(mcpw_json_number(S("-0"), &d));
        CHECK(d == 0 && signbit(d));
        OK(mcpw_json_number(S("1e-400"), &d));
        CHECK(d == 0);
        d = 7;
        RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_json_number(S("1e400"), &d));
        RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_json_number(S("\"2\""), &d));
        RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_json_number(S("true"), &d));
        RC(MCPW_ERR_INVALID_JSON, mcpw_json_number(S("2."), &d));
        RC(MCPW_ERR_INVALID_JSON, mcpw_json_number(S("0x10"), &d));
        RC(MCPW_ERR_INVALID_JSON, mcpw_json_number(S("NaN"), &d));
        RC(MCPW_ERR_NULL_ARGUMENT, mcpw_json_number(S("1"), NULL));
        CHECK(d == 7); /* nothing written when a call fails */
    }

    v.ptr = "unchanged";
    RC(MCPW_ERR_DUPLICATE_KEY, mcpw_json_get(S("{\"a\":1,\"a\":2}"), S("a"), &v));
    RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_json_get(S("[1]"), S("a"), &v));
    RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_json_at(S("{}"), 0, &v));
    RC(MCPW_ERR_INVALID_JSON, mcpw_json_get(S("{\"a\":"), S("a"), &v));
    RC(MCPW_ERR_INVALID_JSON, mcpw_json_at(NULL, 0, 0, &v));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_json_get(S("{}"), S("\xff"), &v));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_json_at(S("[\"\xff\"]"), 0, &v));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_json_get(S("{}"), S("a"), NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_json_get(NULL, 2, S("a"), &v));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_json_at(S("[1]"), 0, NULL));
    CHECK(strcmp(v.ptr, "unchanged") == 0);

    /* Several members in one pass, in the order asked; absent ones are NULL. */
    mcpw_str keys[4] = {{"arguments", 9}, {"missing", 7}, {"na\\u006de", 0}, {"name", 4}};
    keys[2].len = strlen(keys[2].ptr); /* a key is compared as decoded text: this is not "name" */
    mcpw_str vals[4] = {{"x", 1}, {"x", 1}, {"x", 1}, {"x", 1}};
    OK(mcpw_json_get_each(obj, strlen(obj), keys, 4, vals));
    CHECK(str_eq(vals[0], "{\"text\":\"hi \\\"there\\\"\"}"));
    CHECK(vals[1].ptr == NULL && vals[1].len == 0);
    CHECK(vals[2].ptr == NULL);
    CHECK(str_eq(vals[3], "\"echo\""));
    CHECK(vals[3].ptr >= obj && vals[3].ptr < obj + strlen(obj));
    /* An escaped key in the text matches its decoded spelling. */
    mcpw_str one = {"x", 1};
    OK(mcpw_json_get_each(S("{\"na\\u006de\":1}"), keys + 3, 1, &one));
    CHECK(str_eq(one, "1"));
    /* The same key twice gets the same view twice. */
    mcpw_str twice[2] = {{"name", 4}, {"name", 4}};
    OK(mcpw_json_get_each(obj, strlen(obj), twice, 2, vals));
    CHECK(str_eq(vals[0], "\"echo\"") && str_eq(vals[1], "\"echo\""));
    OK(mcpw_json_get_each(obj, strlen(obj), NULL, 0, vals)); /* nothing asked, nothing written */
    /* The answers may go over the keys themselves (the same length by design). */
    mcpw_str in_out[2] = {{"name", 4}, {"arguments", 9}};
    OK(mcpw_json_get_each(obj, strlen(obj), in_out, 2, in_out));
    CHECK(str_eq(in_out[0], "\"echo\"") && str_eq(in_out[1], "{\"text\":\"hi \\\"there\\\"\"}"));

    vals[0].ptr = "unchanged";
    vals[0].len = 9;
    mcpw_str a = {"a", 1};
    RC(MCPW_ERR_DUPLICATE_KEY, mcpw_json_get_each(S("{\"a\":1,\"a\":2}"), &a, 1, vals));
    OK(mcpw_json_get_each(S("{\"b\":1,\"b\":2,\"a\":3}"), &a, 1, vals)); /* not asked for */
    CHECK(str_eq(vals[0], "3"));
    vals[0].ptr = "unchanged";
    RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_json_get_each(S("[1]"), &a, 1, vals));
    RC(MCPW_ERR_INVALID_JSON, mcpw_json_get_each(S("{\"a\":"), &a, 1, vals));
    mcpw_str bad = {"\xff", 1};
    RC(MCPW_ERR_INVALID_UTF8, mcpw_json_get_each(S("{}"), &bad, 1, vals));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_json_get_each(S("{}"), &a, 1, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_json_get_each(S("{}"), NULL, 1, vals));
    mcpw_str many[65];
    for (int i = 0; i < 65; i++) many[i] = a;
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_json_get_each(S("{}"), many, 65, vals));
    CHECK(strcmp(vals[0].ptr, "unchanged") == 0);
}

/* ---- Tasks: the io.modelcontextprotocol/tasks extension of 2026-07-28 ---------------------- */

#define WALL_MS 1795521600000ull /* 2026-11-24T12:00:00Z on the wall clock */

static const char TASKS_CAPS[] =
    "{\"tools\":{},\"prompts\":{},\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}}";
static const char WITH_TASKS[] =
    "{\"elicitation\":{},\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}}";

/* A server that declared the tasks extension. In 2026-07-28 there is no handshake: each
   request carries its version and capabilities in _meta. */
static mcpw_conn *tasks_server(void) {
    mcpw_config *config = make_config(MCPW_ROLE_SERVER);
    mcpw_conn *conn;
    OK(mcpw_config_set_capabilities(config, TASKS_CAPS, strlen(TASKS_CAPS)));
    conn = make_conn(config, 0);
    mcpw_config_free(config);
    return conn;
}

/* Feeds `server` the 2026-07-28 request `id` for `method`, with the params members `members`
   ("" for none) and the client capabilities `caps`, and returns its first event (after
   MCPW_EVENT_READY, which the connection's first request brings). */
static mcpw_event modern_request(mcpw_conn *server, uint64_t now, int id, const char *method,
                                 const char *members, const char *caps) {
    mcpw_event ev;
    char line[1024];
    int n = snprintf(line, sizeof line,
                     "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\",\"params\":{\"_meta\":{"
                     "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                     "\"io.modelcontextprotocol/clientCapabilities\":%s}%s%s}}\n",
                     id, method, caps, members[0] != '\0' ? "," : "", members);
    CHECK(n > 0 && (size_t)n < sizeof line);
    OK(mcpw_conn_handle_input(server, now, (const uint8_t *)line, strlen(line)));
    ev = next(server);
    if (ev.kind == MCPW_EVENT_READY) ev = next(server);
    return ev;
}

/* Everything `conn` has to write, as NUL-terminated text in `out`; returns its length. */
static size_t take_output(mcpw_conn *conn, char *out, size_t cap) {
    size_t n = 0;
    for (;;) {
        const uint8_t *bytes = NULL;
        size_t len = 0;
        uint64_t stream = 0;
        OK(mcpw_conn_transmit(conn, &bytes, &len, &stream));
        if (len == 0) break;
        CHECK(n + len < cap);
        if (n + len < cap) {
            memcpy(out + n, bytes, len);
            n += len;
        }
        OK(mcpw_conn_consume(conn, len));
    }
    out[n] = '\0';
    return n;
}

/* Copies a task id the table lent (it dies with the next non-const call on the table). */
static void keep_task_id(mcpw_str id, char out[64]) {
    size_t n = id.ptr != NULL && id.len < 64 ? id.len : 0;
    CHECK(n == 32);
    if (n > 0) memcpy(out, id.ptr, n);
    out[n] = '\0';
}

/* Creates a task and keeps its id in `out`. */
static void create_task(mcpw_tasks *tasks, uint64_t now, char out[64]) {
    mcpw_str id = {NULL, 0};
    OK(mcpw_tasks_create(tasks, now, test_random, &random_state, &id));
    keep_task_id(id, out);
}

/* The status of `task`, or MCPW_TASK_STATUS_OTHER when the call fails. */
static mcpw_task_status status_of(const mcpw_tasks *tasks, const char *task) {
    mcpw_task_status status = MCPW_TASK_STATUS_OTHER;
    mcpw_result rc = mcpw_tasks_status(tasks, task, strlen(task), &status);
    if ((int)rc >= 0 && (int)rc < 1000) seen_results[(int)rc] = 1;
    return rc == MCPW_OK ? status : MCPW_TASK_STATUS_OTHER;
}

/* Sends `method` for `task` from a client that declared the extension, answers it through
   mcpw_tasks_serve, and leaves what the server wrote in `out`. */
static void tasks_call(mcpw_conn *server, mcpw_tasks *tasks, uint64_t now, int id,
                       const char *method, const char *members, char *out, size_t cap) {
    bool served = false;
    mcpw_event ev = modern_request(server, now, id, method, members, WITH_TASKS);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, method));
    OK(mcpw_tasks_serve(tasks, now, server, &ev.id, ev.method.ptr, ev.method.len, ev.params.ptr,
                        ev.params.len, &served));
    CHECK(served);
    take_output(server, out, cap);
}

/* MCPW_POLICY_REVIEW_LISTENS: a listen comes as a request; the server lists its items, checks
   each, and grants only those it allows. Nothing goes out before the grant. */
static void test_review_listens(void) {
    static const char caps[] = "{\"tools\":{\"listChanged\":true},\"resources\":{\"subscribe\":"
                               "true},\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}}";
    mcpw_config *config = make_config(MCPW_ROLE_SERVER);
    mcpw_conn *server;
    mcpw_listen_item items[8];
    mcpw_id id, other = {MCPW_ID_INT, 99, {NULL, 0}};
    mcpw_event ev;
    size_t count = 7;
    bool keep[4] = {true, false, true, false};
    char out[4096];
    uint64_t now = 5 * MS;

    OK(mcpw_config_set_capabilities(config, caps, strlen(caps)));
    OK(mcpw_config_set_policy(config, MCPW_POLICY_DEFAULT | MCPW_POLICY_REVIEW_LISTENS));
    server = make_conn(config, 0);
    mcpw_config_free(config);
    ev = modern_request(server, now, 1, "subscriptions/listen",
                        "\"notifications\":{\"toolsListChanged\":true,\"resourceSubscriptions\":"
                        "[\"file:///a\",\"file:///b\"],\"taskIds\":[\"t1\"]}",
                        WITH_TASKS);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, "subscriptions/listen"));
    id = ev.id;
    CHECK(id.kind == MCPW_ID_INT && id.integer == 1);
    CHECK(take_output(server, out, sizeof out) == 0);

    OK(mcpw_conn_listen_items(server, &id, NULL, 0, &count));
    CHECK(count == 4);
    OK(mcpw_conn_listen_items(server, &id, items, 8, &count));
    CHECK(count == 4);
    CHECK(items[0].kind == MCPW_LISTEN_TOOLS_LIST_CHANGED && items[0].text.ptr == NULL);
    CHECK(items[1].kind == MCPW_LISTEN_RESOURCE && str_eq(items[1].text, "file:///a"));
    CHECK(items[2].kind == MCPW_LISTEN_RESOURCE && str_eq(items[2].text, "file:///b"));
    CHECK(items[3].kind == MCPW_LISTEN_TASK && str_eq(items[3].text, "t1"));
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_listen_items(server, &other, items, 8, &count));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_listen_items(server, &id, items, 8, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_listen_items(server, &id, NULL, 8, &count));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_listen_items(NULL, &id, items, 8, &count));
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_conn_grant_listen(server, &id, keep, 3));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_grant_listen(server, &id, NULL, 4));
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_grant_listen(server, &other, NULL, 0));
    CHECK(take_output(server, out, sizeof out) == 0);

    OK(mcpw_conn_grant_listen(server, &id, keep, 4));
    take_output(server, out, sizeof out);
    CHECK(strstr(out, "notifications/subscriptions/acknowledged") != NULL);
    CHECK(strstr(out, "\"toolsListChanged\":true") != NULL);
    CHECK(strstr(out, "\"resourceSubscriptions\":[\"file:///b\"]") != NULL);
    CHECK(strstr(out, "file:///a") == NULL && strstr(out, "t1") == NULL);
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_listen_items(server, &id, items, 8, &count));
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_grant_listen(server, &id, keep, 4));

    /* The stream hears the resource it was granted, not the other. */
    OK(mcpw_conn_notify(server, S("notifications/resources/updated"),
                        S("{\"uri\":\"file:///a\"}")));
    CHECK(take_output(server, out, sizeof out) == 0);
    OK(mcpw_conn_notify(server, S("notifications/resources/updated"),
                        S("{\"uri\":\"file:///b\"}")));
    take_output(server, out, sizeof out);
    CHECK(strstr(out, "file:///b") != NULL);
    mcpw_conn_free(server);
}

static void test_tasks_the_whole_flow(void) {
    mcpw_conn *server = tasks_server();
    mcpw_tasks *tasks = NULL;
    mcpw_task_config config = mcpw_task_config_default();
    mcpw_request_context context;
    mcpw_task_event te;
    mcpw_str created = {NULL, 0};
    mcpw_event ev;
    char task[64], other[64], out[4096], members[256];
    bool served = true, requested = true;
    uint64_t now = 5 * MS;
    const char *elicit =
        "{\"method\":\"elicitation/create\",\"params\":{\"message\":\"Deploy?\","
        "\"requestedSchema\":{\"type\":\"object\",\"properties\":{}}}}";
    const char *answer = "{\"action\":\"accept\",\"content\":{}}";

    CHECK(config.max_tasks == 1024 && config.ttl_ms == 3600000 && config.poll_interval_ms == 1000);
    CHECK(config.max_input_requests == 16 && config.max_payload == 1024 * 1024);
    CHECK(config.max_tasks_per_owner == 256);
    OK(mcpw_tasks_new(&config, now, WALL_MS, &tasks));
    CHECK(tasks != NULL);

    /* A tools/call that declared the extension gets a task handle at once. */
    ev = modern_request(server, now, 1, "tools/call", "\"name\":\"deploy\"", WITH_TASKS);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, "tools/call"));
    OK(mcpw_conn_request_context(server, &ev.id, &context));
    CHECK(context.known && (context.client_capabilities & MCPW_CAP_TASKS_EXTENSION) != 0);
    OK(mcpw_tasks_create(tasks, now, test_random, &random_state, &created));
    keep_task_id(created, task);
    /* The lent id goes straight back in (the table is only read). */
    OK(mcpw_conn_respond_task(server, &ev.id, tasks, created.ptr, created.len));
    take_output(server, out, sizeof out);
    CHECK(strstr(out, "\"id\":1") != NULL && strstr(out, "\"resultType\":\"task\"") != NULL);
    CHECK(strstr(out, task) != NULL && strstr(out, "\"status\":\"working\"") != NULL);
    CHECK(strstr(out, "\"createdAt\":\"2026-11-24T12:00:00.000Z\"") != NULL);
    CHECK(strstr(out, "\"ttlMs\":3600000") != NULL && strstr(out, "\"pollIntervalMs\":1000") != NULL);
    /* Answered once; the id is no longer in flight. */
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_respond_task(server, &ev.id, tasks, task, strlen(task)));
    CHECK(status_of(tasks, task) == MCPW_TASK_STATUS_WORKING);

    /* tasks/get, through the table. */
    snprintf(members, sizeof members, "\"taskId\":\"%s\"", task);
    tasks_call(server, tasks, now + MS, 2, "tasks/get", members, out, sizeof out);
    CHECK(strstr(out, "\"id\":2") != NULL && strstr(out, "\"status\":\"working\"") != NULL);
    CHECK(strstr(out, task) != NULL && strstr(out, "\"error\"") == NULL);

    /* Any other method is the application's: nothing is answered. */
    ev = modern_request(server, now, 3, "tools/list", "", WITH_TASKS);
    OK(mcpw_tasks_serve(tasks, now, server, &ev.id, ev.method.ptr, ev.method.len, ev.params.ptr,
                        ev.params.len, &served));
    CHECK(!served);
    CHECK(take_output(server, out, sizeof out) == 0);
    OK(mcpw_conn_respond(server, &ev.id, S("{\"tools\":[]}")));
    take_output(server, out, sizeof out);

    /* The task asks for input: input_required, and tasks/get shows the request. */
    OK(mcpw_tasks_set_message(tasks, now + 2 * MS, task, strlen(task), S("waiting for approval")));
    OK(mcpw_tasks_ask(tasks, now + 2 * MS, task, strlen(task), S("confirm"), elicit, strlen(elicit)));
    RC(MCPW_ERR_TASK_KEY_REUSED,
       mcpw_tasks_ask(tasks, now, task, strlen(task), S("confirm"), elicit, strlen(elicit)));
    CHECK(status_of(tasks, task) == MCPW_TASK_STATUS_INPUT_REQUIRED);
    tasks_call(server, tasks, now + 2 * MS, 4, "tasks/get", members, out, sizeof out);
    CHECK(strstr(out, "\"status\":\"input_required\"") != NULL);
    CHECK(strstr(out, "\"inputRequests\":{\"confirm\":{\"method\":\"elicitation/create\"") != NULL);
    CHECK(strstr(out, "\"statusMessage\":\"waiting for approval\"") != NULL);
    CHECK(strstr(out, "\"lastUpdatedAt\":\"2026-11-24T12:00:00.002Z\"") != NULL);

    /* tasks/update: the answer comes as an event (a key never asked is ignored), and the
       task works again. */
    snprintf(members, sizeof members,
             "\"taskId\":\"%s\",\"inputResponses\":{\"confirm\":%s,\"never-asked\":{}}", task,
             answer);
    tasks_call(server, tasks, now + 3 * MS, 5, "tasks/update", members, out, sizeof out);
    CHECK(strstr(out, "\"id\":5") != NULL && strstr(out, "\"result\"") != NULL);
    CHECK(strstr(out, "\"error\"") == NULL);
    memset(&te, 0xA5, sizeof te); /* outputs must be fully written */
    OK(mcpw_tasks_poll_event(tasks, &te));
    CHECK(te.kind == MCPW_TASK_EVENT_INPUT && str_eq(te.task, task));
    CHECK(str_eq(te.key, "confirm") && str_eq(te.response, answer));
    memset(&te, 0xA5, sizeof te);
    OK(mcpw_tasks_poll_event(tasks, &te));
    CHECK(te.kind == MCPW_TASK_EVENT_NONE && te.task.ptr == NULL && te.key.ptr == NULL &&
          te.response.ptr == NULL);
    CHECK(status_of(tasks, task) == MCPW_TASK_STATUS_WORKING);

    /* It completes; tasks/get shows the result, and the task never changes again. */
    OK(mcpw_tasks_complete(tasks, now + 4 * MS, task, strlen(task),
                           S("{\"content\":[{\"type\":\"text\",\"text\":\"deployed\"}]}")));
    CHECK(status_of(tasks, task) == MCPW_TASK_STATUS_COMPLETED);
    snprintf(members, sizeof members, "\"taskId\":\"%s\"", task);
    tasks_call(server, tasks, now + 4 * MS, 6, "tasks/get", members, out, sizeof out);
    CHECK(strstr(out, "\"status\":\"completed\"") != NULL && strstr(out, "deployed") != NULL);
    /* Its status notification: the full DetailedTask, for the listen streams that follow it. */
    mcpw_str note_method, note_params;
    OK(mcpw_tasks_status_notification(tasks, task, strlen(task), &note_method, &note_params));
    CHECK(str_eq(note_method, "notifications/tasks"));
    {
        char params[1024];
        CHECK(note_params.len < sizeof params);
        memcpy(params, note_params.ptr, note_params.len);
        params[note_params.len] = 0;
        CHECK(strstr(params, "\"status\":\"completed\"") != NULL && strstr(params, "deployed") != NULL);
    }
    RC(MCPW_ERR_UNKNOWN_TASK,
       mcpw_tasks_status_notification(tasks, S("nope"), &note_method, &note_params));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_tasks_status_notification(tasks, task, strlen(task), NULL, &note_params));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_tasks_status_notification(NULL, task, strlen(task), &note_method, &note_params));
    RC(MCPW_ERR_TASK_TERMINAL, mcpw_tasks_complete(tasks, now, task, strlen(task), S("{}")));
    RC(MCPW_ERR_TASK_TERMINAL,
       mcpw_tasks_ask(tasks, now, task, strlen(task), S("again"), elicit, strlen(elicit)));
    RC(MCPW_ERR_TASK_TERMINAL, mcpw_tasks_set_message(tasks, now, task, strlen(task), NULL, 0));
    RC(MCPW_ERR_TASK_TERMINAL,
       mcpw_tasks_fail(tasks, now, task, strlen(task), -32603, S("x"), NULL, 0));
    RC(MCPW_ERR_TASK_TERMINAL, mcpw_tasks_cancel(tasks, now, task, strlen(task)));
    OK(mcpw_tasks_cancel_requested(tasks, task, strlen(task), &requested));
    CHECK(!requested);

    /* tasks/cancel is a request: the work stops when the application says so. */
    create_task(tasks, now, other);
    snprintf(members, sizeof members, "\"taskId\":\"%s\"", other);
    tasks_call(server, tasks, now + 5 * MS, 7, "tasks/cancel", members, out, sizeof out);
    CHECK(strstr(out, "\"id\":7") != NULL && strstr(out, "\"error\"") == NULL);
    CHECK(status_of(tasks, other) == MCPW_TASK_STATUS_WORKING);
    OK(mcpw_tasks_cancel_requested(tasks, other, strlen(other), &requested));
    CHECK(requested);
    OK(mcpw_tasks_poll_event(tasks, &te));
    CHECK(te.kind == MCPW_TASK_EVENT_CANCEL_REQUESTED && str_eq(te.task, other));
    CHECK(te.key.ptr == NULL && te.response.ptr == NULL);
    /* The event's view goes straight back in. */
    OK(mcpw_tasks_cancel(tasks, now + 5 * MS, te.task.ptr, te.task.len));
    CHECK(status_of(tasks, other) == MCPW_TASK_STATUS_CANCELLED);
    tasks_call(server, tasks, now + 5 * MS, 8, "tasks/get", members, out, sizeof out);
    CHECK(strstr(out, "\"status\":\"cancelled\"") != NULL);

    /* A protocol-level failure. */
    create_task(tasks, now, other);
    OK(mcpw_tasks_fail(tasks, now + 6 * MS, other, strlen(other), -32603, S("the job failed"),
                       S("{\"step\":2}")));
    CHECK(status_of(tasks, other) == MCPW_TASK_STATUS_FAILED);
    snprintf(members, sizeof members, "\"taskId\":\"%s\"", other);
    tasks_call(server, tasks, now + 6 * MS, 9, "tasks/get", members, out, sizeof out);
    CHECK(strstr(out, "\"status\":\"failed\"") != NULL);
    CHECK(strstr(out, "\"error\":{\"code\":-32603,\"message\":\"the job failed\"") != NULL);
    CHECK(strstr(out, "\"statusMessage\":\"the job failed\"") != NULL);

    /* Results and input requests are objects. */
    create_task(tasks, now, other);
    RC(MCPW_ERR_INVALID_TASK_PAYLOAD, mcpw_tasks_complete(tasks, now, other, strlen(other), S("[1]")));
    RC(MCPW_ERR_INVALID_TASK_PAYLOAD,
       mcpw_tasks_ask(tasks, now, other, strlen(other), S("k"), S("\"text\"")));
    RC(MCPW_ERR_INVALID_JSON, mcpw_tasks_complete(tasks, now, other, strlen(other), S("{")));
    CHECK(status_of(tasks, other) == MCPW_TASK_STATUS_WORKING);
    /* A message may be cleared (NULL); an empty one is a message. */
    OK(mcpw_tasks_set_message(tasks, now, other, strlen(other), "", 0));
    OK(mcpw_tasks_set_message(tasks, now, other, strlen(other), NULL, 0));

    mcpw_tasks_free(tasks);
    mcpw_conn_free(server);
}

static void test_tasks_refused_without_the_extension(void) {
    mcpw_conn *server = tasks_server();
    mcpw_tasks *tasks = NULL;
    mcpw_request_context context;
    mcpw_event ev;
    mcpw_id unknown = {MCPW_ID_INT, 99, {NULL, 0}};
    pair p;
    char task[64], out[4096], members[128];
    int64_t rid = 0;
    bool served = true;

    OK(mcpw_tasks_new(NULL, 0, WALL_MS, &tasks));
    create_task(tasks, 0, task);
    snprintf(members, sizeof members, "\"taskId\":\"%s\"", task);

    /* The request did not declare the extension: no task for it, and the request is still
       answered normally. */
    ev = modern_request(server, MS, 1, "tools/call", "\"name\":\"deploy\"", "{}");
    CHECK(ev.kind == MCPW_EVENT_REQUEST);
    OK(mcpw_conn_request_context(server, &ev.id, &context));
    CHECK(context.known && (context.client_capabilities & MCPW_CAP_TASKS_EXTENSION) == 0);
    RC(MCPW_ERR_NOT_NEGOTIATED, mcpw_conn_respond_task(server, &ev.id, tasks, task, strlen(task)));
    CHECK(take_output(server, out, sizeof out) == 0);
    OK(mcpw_tasks_cancel(tasks, MS, task, strlen(task)));
    OK(mcpw_conn_respond(server, &ev.id, S("{\"content\":[]}")));
    take_output(server, out, sizeof out);
    CHECK(strstr(out, "\"resultType\":\"task\"") == NULL);

    /* Only tools/call may get a task; only a request in flight may be answered. */
    create_task(tasks, 0, task);
    ev = modern_request(server, MS, 2, "prompts/get", "\"name\":\"p\"", WITH_TASKS);
    CHECK(ev.kind == MCPW_EVENT_REQUEST);
    RC(MCPW_ERR_NOT_ELIGIBLE, mcpw_conn_respond_task(server, &ev.id, tasks, task, strlen(task)));
    OK(mcpw_conn_respond_error(server, &ev.id, MCPW_JSONRPC_INVALID_PARAMS, S("no"), NULL, 0));
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_conn_respond_task(server, &unknown, tasks, task, strlen(task)));
    take_output(server, out, sizeof out);

    /* The tasks methods from a client without the extension: the engine answers -32021
       itself, and they never reach the table. */
    ev = modern_request(server, MS, 3, "tasks/get", members, "{}");
    CHECK(ev.kind == MCPW_EVENT_VIOLATION);
    CHECK(ev.violation == MCPW_VIOLATION_MISSING_CLIENT_CAPABILITY);
    take_output(server, out, sizeof out);
    CHECK(strstr(out, "\"id\":3") != NULL && strstr(out, "-32021") != NULL);

    /* A handshake-era connection has no tasks of this extension. */
    p = make_pair("{\"tools\":{}}", "2025-06-18");
    OK(mcpw_conn_request(p.client, p.now, S("tools/call"), S("{\"name\":\"x\"}"), NULL, &rid));
    pump(p.client, p.server, p.now);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, "tools/call"));
    RC(MCPW_ERR_NOT_IN_VERSION, mcpw_conn_respond_task(p.server, &ev.id, tasks, task, strlen(task)));
    /* Nor does a closed one. */
    OK(mcpw_conn_handle_eof(p.server, p.now));
    drain(p.server, MCPW_EVENT_NONE);
    RC(MCPW_ERR_CLOSED, mcpw_conn_respond_task(p.server, &ev.id, tasks, task, strlen(task)));
    snprintf(members, sizeof members, "{\"taskId\":\"%s\"}", task);
    RC(MCPW_ERR_CLOSED, mcpw_tasks_serve(tasks, p.now, p.server, &ev.id, S("tasks/get"),
                                         members, strlen(members), &served));
    CHECK(served); /* outputs are written only on success */
    free_pair(&p);
    mcpw_tasks_free(tasks);
    mcpw_conn_free(server);
}

static void test_tasks_expire_at_their_ttl(void) {
    mcpw_conn *server = tasks_server();
    mcpw_tasks *tasks = NULL, *forever = NULL;
    mcpw_task_config config = mcpw_task_config_default();
    mcpw_task_event te;
    char a[64], b[64], out[4096], members[128];
    bool has = true;
    uint64_t deadline = 7, t0 = 10 * MS;

    config.ttl_ms = 1000;
    OK(mcpw_tasks_new(&config, t0, WALL_MS, &tasks));
    OK(mcpw_tasks_poll_timeout(tasks, &has, &deadline));
    CHECK(!has && deadline == 0);
    create_task(tasks, t0, a);
    create_task(tasks, t0 + 500 * MS, b);
    /* A terminal task expires too, but quietly. */
    OK(mcpw_tasks_complete(tasks, t0 + 600 * MS, b, strlen(b), S("{\"content\":[]}")));
    OK(mcpw_tasks_poll_timeout(tasks, &has, &deadline));
    CHECK(has && deadline == t0 + 1000 * MS);

    OK(mcpw_tasks_handle_timeout(tasks, t0 + 999 * MS));
    OK(mcpw_tasks_poll_event(tasks, &te));
    CHECK(te.kind == MCPW_TASK_EVENT_NONE);
    CHECK(status_of(tasks, a) == MCPW_TASK_STATUS_WORKING);

    OK(mcpw_tasks_handle_timeout(tasks, t0 + 1000 * MS));
    OK(mcpw_tasks_poll_event(tasks, &te));
    CHECK(te.kind == MCPW_TASK_EVENT_EXPIRED && str_eq(te.task, a));
    OK(mcpw_tasks_poll_event(tasks, &te));
    CHECK(te.kind == MCPW_TASK_EVENT_NONE);
    CHECK(status_of(tasks, a) == MCPW_TASK_STATUS_OTHER); /* MCPW_ERR_UNKNOWN_TASK */
    RC(MCPW_ERR_UNKNOWN_TASK, mcpw_tasks_complete(tasks, t0, a, strlen(a), S("{}")));
    /* The client polling it learns it is gone. */
    snprintf(members, sizeof members, "\"taskId\":\"%s\"", a);
    tasks_call(server, tasks, t0 + 1000 * MS, 1, "tasks/get", members, out, sizeof out);
    CHECK(strstr(out, "-32602") != NULL && strstr(out, "Task not found") != NULL);

    CHECK(status_of(tasks, b) == MCPW_TASK_STATUS_COMPLETED);
    OK(mcpw_tasks_poll_timeout(tasks, &has, &deadline));
    CHECK(has && deadline == t0 + 1500 * MS);
    OK(mcpw_tasks_handle_timeout(tasks, t0 + 1500 * MS));
    OK(mcpw_tasks_poll_event(tasks, &te));
    CHECK(te.kind == MCPW_TASK_EVENT_NONE);
    CHECK(status_of(tasks, b) == MCPW_TASK_STATUS_OTHER);
    OK(mcpw_tasks_poll_timeout(tasks, &has, &deadline));
    CHECK(!has && deadline == 0);

    /* Without a TTL, nothing expires. */
    config.ttl_ms = 0;
    OK(mcpw_tasks_new(&config, 0, WALL_MS, &forever));
    create_task(forever, 0, a);
    OK(mcpw_tasks_poll_timeout(forever, &has, &deadline));
    CHECK(!has);
    OK(mcpw_tasks_handle_timeout(forever, UINT64_MAX));
    CHECK(status_of(forever, a) == MCPW_TASK_STATUS_WORKING);
    snprintf(members, sizeof members, "\"taskId\":\"%s\"", a);
    tasks_call(server, forever, 0, 2, "tasks/get", members, out, sizeof out);
    CHECK(strstr(out, "\"ttlMs\":null") != NULL);

    mcpw_tasks_free(forever);
    mcpw_tasks_free(tasks);
    mcpw_conn_free(server);
}

static void test_tasks_unknown_tasks_and_bounds(void) {
    mcpw_conn *server = tasks_server();
    mcpw_tasks *tasks = NULL;
    mcpw_task_config config = mcpw_task_config_default();
    mcpw_task_status status = MCPW_TASK_STATUS_WORKING;
    mcpw_event ev;
    char first[64], second[64], out[4096];
    const char *nope = "0123456789abcdef0123456789abcdef";
    const char *request = "{\"method\":\"roots/list\"}";
    char big[128];
    bool requested = true;

    config.max_tasks = 1;
    config.max_input_requests = 1;
    config.max_payload = 64;
    OK(mcpw_tasks_new(&config, 0, WALL_MS, &tasks));

    /* Unknown tasks: refused, nothing changes. */
    RC(MCPW_ERR_UNKNOWN_TASK, mcpw_tasks_status(tasks, nope, strlen(nope), &status));
    CHECK(status == MCPW_TASK_STATUS_WORKING);
    RC(MCPW_ERR_UNKNOWN_TASK, mcpw_tasks_status(tasks, NULL, 0, &status));
    RC(MCPW_ERR_UNKNOWN_TASK, mcpw_tasks_set_message(tasks, 0, nope, strlen(nope), S("m")));
    RC(MCPW_ERR_UNKNOWN_TASK,
       mcpw_tasks_ask(tasks, 0, nope, strlen(nope), S("k"), request, strlen(request)));
    RC(MCPW_ERR_UNKNOWN_TASK, mcpw_tasks_complete(tasks, 0, nope, strlen(nope), S("{}")));
    RC(MCPW_ERR_UNKNOWN_TASK, mcpw_tasks_fail(tasks, 0, nope, strlen(nope), -1, S("m"), NULL, 0));
    RC(MCPW_ERR_UNKNOWN_TASK, mcpw_tasks_cancel(tasks, 0, nope, strlen(nope)));
    OK(mcpw_tasks_cancel_requested(tasks, nope, strlen(nope), &requested));
    CHECK(!requested);
    ev = modern_request(server, 0, 1, "tools/call", "\"name\":\"deploy\"", WITH_TASKS);
    RC(MCPW_ERR_UNKNOWN_TASK, mcpw_conn_respond_task(server, &ev.id, tasks, nope, strlen(nope)));
    CHECK(take_output(server, out, sizeof out) == 0);
    OK(mcpw_conn_respond(server, &ev.id, S("{\"content\":[]}")));
    take_output(server, out, sizeof out);
    /* ... and a client asking for one gets -32602, as for a missing taskId. */
    tasks_call(server, tasks, 0, 2, "tasks/get", "\"taskId\":\"0123\"", out, sizeof out);
    CHECK(strstr(out, "\"id\":2") != NULL && strstr(out, "-32602") != NULL);
    tasks_call(server, tasks, 0, 3, "tasks/cancel", "\"other\":1", out, sizeof out);
    CHECK(strstr(out, "\"id\":3") != NULL && strstr(out, "-32602") != NULL);

    /* max_tasks: full while no task is terminal, and while no client has fetched how the
       terminal ones ended (a task keeps its place for the TTL its handle gave); then the
       oldest fetched one makes room. */
    create_task(tasks, 0, first);
    {
        /* A random source that repeats itself is refused (the call spun for good). */
        mcpw_tasks *stuck = NULL;
        mcpw_str id = {"unchanged", 9};
        OK(mcpw_tasks_new(NULL, 0, 0, &stuck));
        RC(MCPW_ERR_RANDOM_REPEATS, mcpw_tasks_create(stuck, 0, no_random, NULL, &id));
        OK(mcpw_tasks_create(stuck, 0, stuck_random, NULL, &id));
        RC(MCPW_ERR_RANDOM_REPEATS, mcpw_tasks_create(stuck, 0, stuck_random, NULL, &id));
        mcpw_tasks_free(stuck);
    }
    {
        mcpw_str id = {"unchanged", 9};
        RC(MCPW_ERR_TASKS_FULL, mcpw_tasks_create(tasks, 0, test_random, &random_state, &id));
        CHECK(str_eq(id, "unchanged"));
    }
    OK(mcpw_tasks_complete(tasks, 0, first, strlen(first), S("{}")));
    {
        mcpw_str id = {"unchanged", 9};
        char members[96];
        RC(MCPW_ERR_TASKS_FULL, mcpw_tasks_create(tasks, 0, test_random, &random_state, &id));
        snprintf(members, sizeof members, "\"taskId\":\"%s\"", first);
        tasks_call(server, tasks, 0, 4, "tasks/get", members, out, sizeof out);
        CHECK(strstr(out, "\"id\":4") != NULL && strstr(out, "\"completed\"") != NULL);
    }
    create_task(tasks, 0, second);
    CHECK(strcmp(first, second) != 0);
    CHECK(status_of(tasks, first) == MCPW_TASK_STATUS_OTHER);

    /* max_input_requests and max_payload. */
    OK(mcpw_tasks_ask(tasks, 0, second, strlen(second), S("k1"), request, strlen(request)));
    RC(MCPW_ERR_TOO_MANY_INPUT_REQUESTS,
       mcpw_tasks_ask(tasks, 0, second, strlen(second), S("k2"), request, strlen(request)));
    memset(big, 0, sizeof big);
    snprintf(big, sizeof big, "{\"content\":[{\"type\":\"text\",\"text\":\"%070d\"}]}", 0);
    CHECK(strlen(big) > 64);
    RC(MCPW_ERR_INVALID_TASK_PAYLOAD, mcpw_tasks_complete(tasks, 0, second, strlen(second), big,
                                                          strlen(big)));
    RC(MCPW_ERR_INVALID_TASK_PAYLOAD,
       mcpw_tasks_fail(tasks, 0, second, strlen(second), -32603, big, strlen(big), NULL, 0));
    CHECK(status_of(tasks, second) == MCPW_TASK_STATUS_INPUT_REQUIRED);
    /* A code the task's version does not define is refused, as mcpw_conn_respond_error does. */
    RC(MCPW_ERR_INVALID_TASK_PAYLOAD,
       mcpw_tasks_fail(tasks, 0, second, strlen(second), -32042, S("m"), NULL, 0));
    CHECK(status_of(tasks, second) == MCPW_TASK_STATUS_INPUT_REQUIRED);
    mcpw_tasks_free(tasks);

    /* Times beyond 2^53 - 1 ms go out as 2^53 - 1, which JSON readers still keep exact. */
    config = mcpw_task_config_default();
    config.ttl_ms = UINT64_MAX;
    config.poll_interval_ms = UINT64_MAX;
    OK(mcpw_tasks_new(&config, 0, WALL_MS, &tasks));
    create_task(tasks, 0, first);
    {
        mcpw_str method, params;
        OK(mcpw_tasks_status_notification(tasks, first, strlen(first), &method, &params));
        CHECK(contains((const uint8_t *)params.ptr, params.len, "\"ttlMs\":9007199254740991,"));
        CHECK(contains((const uint8_t *)params.ptr, params.len, "\"pollIntervalMs\":9007199254740991"));
    }

    mcpw_tasks_free(tasks);
    mcpw_conn_free(server);
}

static void test_tasks_refuse_null_and_invalid_arguments(void) {
    mcpw_conn *server = tasks_server();
    mcpw_tasks *tasks = NULL;
    mcpw_task_config config = mcpw_task_config_default();
    mcpw_task_status status = MCPW_TASK_STATUS_OTHER;
    mcpw_task_event te;
    mcpw_str id = {NULL, 0};
    mcpw_id bad_id = {77, 1, {NULL, 0}};
    mcpw_event ev;
    char task[64], out[1024];
    bool flag = true, has = true;
    uint64_t deadline = 0;
    size_t n;

    mcpw_tasks_free(NULL);
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_new(NULL, 0, WALL_MS, NULL));
    config.max_tasks = 0;
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_tasks_new(&config, 0, WALL_MS, &tasks));
    config = mcpw_task_config_default();
    config.max_tasks_per_owner = 0;
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_tasks_new(&config, 0, WALL_MS, &tasks));
    config = mcpw_task_config_default();
    config.poll_interval_ms = 0;
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_tasks_new(&config, 0, WALL_MS, &tasks));
    config = mcpw_task_config_default();
    config.max_input_requests = 0;
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_tasks_new(&config, 0, WALL_MS, &tasks));
    config = mcpw_task_config_default();
    config.max_payload = 0;
    RC(MCPW_ERR_INVALID_ARGUMENT, mcpw_tasks_new(&config, 0, WALL_MS, &tasks));
    CHECK(tasks == NULL);
    OK(mcpw_tasks_new(NULL, 0, WALL_MS, &tasks));
    create_task(tasks, 0, task);

    /* A NULL table. */
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_create(NULL, 0, test_random, &random_state, &id));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_status(NULL, S("t"), &status));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_cancel_requested(NULL, S("t"), &flag));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_set_message(NULL, 0, S("t"), S("m")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_ask(NULL, 0, S("t"), S("k"), S("{}")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_complete(NULL, 0, S("t"), S("{}")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_fail(NULL, 0, S("t"), -1, S("m"), NULL, 0));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_cancel(NULL, 0, S("t")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_poll_event(NULL, &te));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_poll_timeout(NULL, &has, &deadline));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_handle_timeout(NULL, 0));

    /* NULL outputs and callbacks; outputs are written only on success. */
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_create(tasks, 0, NULL, NULL, &id));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_create(tasks, 0, test_random, &random_state, NULL));
    CHECK(id.ptr == NULL);
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_status(tasks, task, strlen(task), NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_cancel_requested(tasks, task, strlen(task), NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_poll_event(tasks, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_poll_timeout(tasks, NULL, &deadline));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_poll_timeout(tasks, &has, NULL));
    CHECK(has && deadline == 0);

    /* Text: NULL with a length, invalid UTF-8, JSON that is not JSON. */
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_status(tasks, NULL, 3, &status));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_tasks_status(tasks, S("\xff"), &status));
    CHECK(status == MCPW_TASK_STATUS_OTHER);
    RC(MCPW_ERR_INVALID_UTF8, mcpw_tasks_cancel_requested(tasks, S("\xc3"), &flag));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_tasks_set_message(tasks, 0, task, strlen(task), S("\xff")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_set_message(tasks, 0, task, strlen(task), NULL, 2));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_tasks_ask(tasks, 0, task, strlen(task), S("\xff"), S("{}")));
    RC(MCPW_ERR_INVALID_JSON, mcpw_tasks_ask(tasks, 0, task, strlen(task), S("k"), NULL, 0));
    RC(MCPW_ERR_INVALID_JSON, mcpw_tasks_complete(tasks, 0, task, strlen(task), S("{} {}")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_fail(tasks, 0, task, strlen(task), -1, NULL, 4, NULL, 0));
    RC(MCPW_ERR_INVALID_JSON, mcpw_tasks_fail(tasks, 0, task, strlen(task), -1, S("m"), S("{")));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_tasks_cancel(tasks, 0, S("\xff")));
    CHECK(status_of(tasks, task) == MCPW_TASK_STATUS_WORKING);

    /* The calls on a connection as well. */
    ev = modern_request(server, 0, 1, "tools/call", "\"name\":\"deploy\"", WITH_TASKS);
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond_task(NULL, &ev.id, tasks, task, strlen(task)));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond_task(server, NULL, tasks, task, strlen(task)));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond_task(server, &ev.id, NULL, task, strlen(task)));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_conn_respond_task(server, &ev.id, tasks, NULL, 5));
    RC(MCPW_ERR_INVALID_UTF8, mcpw_conn_respond_task(server, &ev.id, tasks, S("\xff")));
    RC(MCPW_ERR_INVALID_ID, mcpw_conn_respond_task(server, &bad_id, tasks, task, strlen(task)));
    CHECK(take_output(server, out, sizeof out) == 0);
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_tasks_serve(NULL, 0, server, &ev.id, S("tasks/get"), S("{}"), &flag));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_tasks_serve(tasks, 0, NULL, &ev.id, S("tasks/get"), S("{}"), &flag));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_tasks_serve(tasks, 0, server, NULL, S("tasks/get"), S("{}"), &flag));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_serve(tasks, 0, server, &ev.id, NULL, 9, S("{}"), &flag));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_tasks_serve(tasks, 0, server, &ev.id, S("tasks/get"), S("{}"), NULL));
    RC(MCPW_ERR_INVALID_UTF8,
       mcpw_tasks_serve(tasks, 0, server, &ev.id, S("\xff"), S("{}"), &flag));
    RC(MCPW_ERR_INVALID_JSON,
       mcpw_tasks_serve(tasks, 0, server, &ev.id, S("tasks/get"), S("{"), &flag));
    RC(MCPW_ERR_INVALID_ID,
       mcpw_tasks_serve(tasks, 0, server, &bad_id, S("tasks/get"), S("{}"), &flag));
    CHECK(flag);
    n = take_output(server, out, sizeof out);
    CHECK(n == 0);
    /* The request is still in flight and can be answered after all that. */
    OK(mcpw_conn_respond_task(server, &ev.id, tasks, task, strlen(task)));
    take_output(server, out, sizeof out);
    CHECK(strstr(out, "\"resultType\":\"task\"") != NULL);

    mcpw_tasks_free(tasks);
    mcpw_conn_free(server);
}

/* POSTs one 2026-07-28 request to `server` with the headers a client sends, answers its
   event (a tools/call with a new task, anything else through the table), and copies the
   settled body into `out`. Returns the status. */
static uint16_t tasks_post(mcpw_http_server *server, mcpw_tasks *tasks, uint64_t now,
                           const char *method, const char *name, const char *members,
                           char *out, size_t cap) {
    mcpw_http_header h[6];
    mcpw_http_response r;
    char body[512];
    int n = snprintf(body, sizeof body,
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\",\"params\":{\"_meta\":{"
                     "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                     "\"io.modelcontextprotocol/clientCapabilities\":%s},%s}}",
                     method, WITH_TASKS, members);
    CHECK(n > 0 && (size_t)n < sizeof body);
    h[0] = make_header("Host", "localhost");
    h[1] = make_header("Content-Type", "application/json");
    h[2] = make_header("Accept", "application/json, text/event-stream");
    h[3] = make_header("MCP-Protocol-Version", "2026-07-28");
    h[4] = make_header("Mcp-Method", method);
    h[5] = make_header("Mcp-Name", name);
    OK(mcpw_http_server_handle_request(server, now, S("POST"), S("/mcp"), h, 6,
                                       (const uint8_t *)body, strlen(body), &r));
    if (r.has_stream) {
        for (;;) {
            mcpw_event ev;
            uint64_t key = 0;
            mcpw_conn *view = NULL;
            bool served = false;
            OK(mcpw_http_server_poll_event(server, &ev, &key, &view));
            if (ev.kind == MCPW_EVENT_NONE) break;
            CHECK(ev.kind == MCPW_EVENT_REQUEST || ev.kind == MCPW_EVENT_READY);
            if (ev.kind != MCPW_EVENT_REQUEST) continue;
            if (str_eq(ev.method, "tools/call")) {
                mcpw_str id = {NULL, 0};
                OK(mcpw_tasks_create(tasks, now, test_random, &random_state, &id));
                OK(mcpw_conn_respond_task(view, &ev.id, tasks, id.ptr, id.len));
                continue;
            }
            OK(mcpw_tasks_serve(tasks, now, view, &ev.id, ev.method.ptr, ev.method.len,
                                ev.params.ptr, ev.params.len, &served));
            CHECK(served);
        }
        OK(mcpw_http_server_settle(server, r.stream, &r));
        CHECK(!r.has_stream);
    }
    CHECK(r.body_len < cap);
    n = r.body_len < cap ? (int)r.body_len : 0;
    if (n > 0) memcpy(out, r.body, (size_t)n);
    out[n] = '\0';
    return r.status;
}

/* Over Streamable HTTP each 2026-07-28 request has a connection of its own: the task made on
   one is served on the next ones, from the one table. */
static void test_http_tasks_outlive_their_request(void) {
    mcpw_http_server_options o = http_server_options();
    mcpw_config *config = make_config(MCPW_ROLE_SERVER);
    mcpw_http_server *server = NULL;
    mcpw_tasks *tasks = NULL;
    char out[2048], task[64], members[128];
    const char *at;
    size_t sessions = 9, streams = 9;

    OK(mcpw_config_set_capabilities(config, TASKS_CAPS, strlen(TASKS_CAPS)));
    OK(mcpw_http_server_new(config, &o, &server));
    mcpw_config_free(config);
    OK(mcpw_tasks_new(NULL, 0, WALL_MS, &tasks));

    CHECK(tasks_post(server, tasks, MS, "tools/call", "deploy", "\"name\":\"deploy\"", out,
                     sizeof out) == 200);
    CHECK(strstr(out, "\"resultType\":\"task\"") != NULL);
    at = strstr(out, "\"taskId\":\"");
    CHECK(at != NULL);
    if (at == NULL) goto done;
    memcpy(task, at + 10, 32);
    task[32] = '\0';
    CHECK(status_of(tasks, task) == MCPW_TASK_STATUS_WORKING);
    OK(mcpw_http_server_counts(server, &sessions, &streams));
    CHECK(sessions == 0 && streams == 0); /* the request and its connection are done */

    snprintf(members, sizeof members, "\"taskId\":\"%s\"", task);
    CHECK(tasks_post(server, tasks, 2 * MS, "tasks/get", task, members, out, sizeof out) == 200);
    CHECK(strstr(out, "\"status\":\"working\"") != NULL);
    OK(mcpw_tasks_complete(tasks, 3 * MS, task, strlen(task),
                           S("{\"content\":[{\"type\":\"text\",\"text\":\"deployed\"}]}")));
    CHECK(tasks_post(server, tasks, 4 * MS, "tasks/get", task, members, out, sizeof out) == 200);
    CHECK(strstr(out, "\"status\":\"completed\"") != NULL && strstr(out, "deployed") != NULL);

done:
    mcpw_tasks_free(tasks);
    mcpw_http_server_free(server);
}

/* ---- URL elicitation and the 2025-11-25 experimental tasks ---------------------------------- */

static const char REQUIRED[] =
    "[{\"mode\":\"url\",\"elicitationId\":\"e-7\",\"url\":\"https://example.com/authorize\","
    "\"message\":\"Authorize access\"}]";

static void test_url_elicitation_required_and_its_completion(void) {
    pair p = make_pair_with("{\"elicitation\":{\"url\":{}}}", "{\"tools\":{}}", "2025-11-25");
    pair old;
    mcpw_event ev;
    mcpw_id id;
    mcpw_stats stats;
    int64_t rid = 0;
    int completions = 0;
    const char *ids[3] = {"{\"elicitationId\":\"nobody\"}", "{\"elicitationId\":\"e-7\"}",
                          "{\"elicitationId\":\"e-7\"}"};
    size_t i;

    CHECK(MCPW_CAP_TASKS_TOOLS_CALL == 1u << 23 && MCPW_CAP_TASKS_SAMPLING == 1u << 24);
    CHECK(MCPW_CAP_TASKS_ELICITATION == 1u << 25);
    OK(mcpw_conn_request(p.client, p.now, S("tools/call"), S("{\"name\":\"files\"}"), NULL, &rid));
    exchange(&p);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, "tools/call"));
    id = ev.id;
    RC(MCPW_ERR_INVALID_PARAMS, mcpw_conn_respond_url_elicitation_required(p.server, &id, S("[]")));
    RC(MCPW_ERR_INVALID_PARAMS, mcpw_conn_respond_url_elicitation_required(
                                    p.server, &id, S("[{\"mode\":\"form\",\"message\":\"m\"}]")));
    RC(MCPW_ERR_INVALID_JSON, mcpw_conn_respond_url_elicitation_required(p.server, &id, S("[")));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_conn_respond_url_elicitation_required(NULL, &id, REQUIRED, strlen(REQUIRED)));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_conn_respond_url_elicitation_required(p.server, NULL, REQUIRED, strlen(REQUIRED)));
    OK(mcpw_conn_respond_url_elicitation_required(p.server, &id, REQUIRED, strlen(REQUIRED)));
    exchange(&p);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_URL_ELICITATION_REQUIRED && ev.request == rid);
    CHECK(str_eq(ev.data, REQUIRED) && ev.result.ptr == NULL && ev.message.ptr == NULL);
    CHECK(next(p.client).kind == MCPW_EVENT_NONE);

    /* The completion of an id never seen is ignored; ours comes once. */
    for (i = 0; i < 3; i++) {
        OK(mcpw_conn_notify(p.server, S("notifications/elicitation/complete"), ids[i],
                            strlen(ids[i])));
    }
    exchange(&p);
    for (;;) {
        ev = next(p.client);
        if (ev.kind == MCPW_EVENT_NONE) break;
        CHECK(ev.kind == MCPW_EVENT_ELICITATION_COMPLETE && str_eq(ev.message, "e-7"));
        completions++;
    }
    CHECK(completions == 1);
    OK(mcpw_conn_stats(p.client, &stats));
    uint64_t ignored = 0;
    OK(mcpw_conn_ignored_elicitation_completions(p.client, &ignored));
    CHECK(ignored == 2);
    CHECK(mcpw_conn_ignored_elicitation_completions(NULL, &ignored) == MCPW_ERR_NULL_ARGUMENT);
    CHECK(mcpw_conn_ignored_elicitation_completions(p.client, NULL) == MCPW_ERR_NULL_ARGUMENT);
    free_pair(&p);

    /* A client without elicitation.url, and a version before URL mode. */
    p = make_pair_with("{\"elicitation\":{}}", "{\"tools\":{}}", "2025-11-25");
    old = make_pair("{\"tools\":{}}", "2025-06-18");
    OK(mcpw_conn_request(p.client, p.now, S("tools/call"), S("{\"name\":\"x\"}"), NULL, &rid));
    OK(mcpw_conn_request(old.client, old.now, S("tools/call"), S("{\"name\":\"x\"}"), NULL, &rid));
    exchange(&p);
    exchange(&old);
    ev = next(p.server);
    RC(MCPW_ERR_NOT_NEGOTIATED,
       mcpw_conn_respond_url_elicitation_required(p.server, &ev.id, REQUIRED, strlen(REQUIRED)));
    ev = next(old.server);
    RC(MCPW_ERR_NOT_IN_VERSION,
       mcpw_conn_respond_url_elicitation_required(old.server, &ev.id, REQUIRED, strlen(REQUIRED)));
    free_pair(&p);
    free_pair(&old);
}

static void test_tasks_created_event_in_2026_07_28(void) {
    mcpw_config *cc = make_config(MCPW_ROLE_CLIENT);
    mcpw_config *sc = make_config(MCPW_ROLE_SERVER);
    mcpw_conn *client, *server;
    mcpw_tasks *tasks = NULL;
    mcpw_event ev;
    mcpw_str created = {NULL, 0};
    char task[64], members[128];
    int64_t rid = 0, get = 0;
    bool served = false;

    OK(mcpw_config_set_client_era(cc, MCPW_CLIENT_ERA_MODERN));
    OK(mcpw_config_set_capabilities(cc, WITH_TASKS, strlen(WITH_TASKS)));
    OK(mcpw_config_set_capabilities(sc, TASKS_CAPS, strlen(TASKS_CAPS)));
    client = make_conn(cc, 0);
    server = make_conn(sc, 0);
    mcpw_config_free(cc);
    mcpw_config_free(sc);
    OK(mcpw_tasks_new(NULL, 0, WALL_MS, &tasks));
    pump(client, server, 0);
    pump(server, client, 0);
    CHECK(drain(client, MCPW_EVENT_READY) == 1);
    drain(server, MCPW_EVENT_NONE);

    OK(mcpw_conn_request(client, MS, S("tools/call"), S("{\"name\":\"slow\"}"), NULL, &rid));
    pump(client, server, MS);
    ev = next(server);
    if (ev.kind == MCPW_EVENT_READY) ev = next(server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, "tools/call"));
    OK(mcpw_tasks_create(tasks, MS, test_random, &random_state, &created));
    keep_task_id(created, task);
    OK(mcpw_conn_respond_task(server, &ev.id, tasks, task, strlen(task)));
    pump(server, client, MS);
    ev = next(client);
    CHECK(ev.kind == MCPW_EVENT_TASK_CREATED && ev.request == rid);
    CHECK(ev.result.ptr != NULL && contains((const uint8_t *)ev.result.ptr, ev.result.len, task));
    CHECK(contains((const uint8_t *)ev.result.ptr, ev.result.len, "\"resultType\":\"task\""));
    CHECK(next(client).kind == MCPW_EVENT_NONE);

    /* The client polls; the table answers. */
    OK(mcpw_tasks_complete(tasks, 2 * MS, task, strlen(task), S("{\"content\":[]}")));
    snprintf(members, sizeof members, "{\"taskId\":\"%s\"}", task);
    OK(mcpw_conn_request(client, 2 * MS, S("tasks/get"), members, strlen(members), NULL, &get));
    pump(client, server, 2 * MS);
    ev = next(server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, "tasks/get"));
    OK(mcpw_tasks_serve(tasks, 2 * MS, server, &ev.id, ev.method.ptr, ev.method.len, ev.params.ptr,
                        ev.params.len, &served));
    CHECK(served);
    pump(server, client, 2 * MS);
    ev = next(client);
    CHECK(ev.kind == MCPW_EVENT_RESPONSE && ev.request == get);
    CHECK(contains((const uint8_t *)ev.result.ptr, ev.result.len, "\"status\":\"completed\""));

    mcpw_tasks_free(tasks);
    mcpw_conn_free(client);
    mcpw_conn_free(server);
}

static const char LEGACY_TASKS_CAPS[] =
    "{\"tools\":{},\"tasks\":{\"list\":{},\"cancel\":{},\"requests\":{\"tools\":{\"call\":{}}}}}";

/* The client sends `method` with `params`; the server hands it to the table as `owner`.
   Returns the client's request id; `*served` says whether the table took it. */
static int64_t legacy_round(pair *p, mcpw_tasks *tasks, uint64_t owner, const char *method,
                            const char *params, bool *served) {
    mcpw_event ev;
    int64_t rid = 0;
    OK(mcpw_conn_request(p->client, p->now, method, strlen(method), params, strlen(params), NULL,
                         &rid));
    exchange(p);
    ev = next(p->server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, method));
    OK(mcpw_tasks_serve_legacy(tasks, p->now, owner, p->server, &ev.id, ev.method.ptr,
                               ev.method.len, ev.params.ptr, ev.params.len, served));
    exchange(p);
    return rid;
}

/* A tasks/result answer whose write finds the connection's output full is handed back by the
   next poll, for a write once the output is drained: the poll replaced it, and the client's
   request was never answered. */
static void test_tasks_legacy_result_survives_a_full_output(void) {
    pair p = make_pair(LEGACY_TASKS_CAPS, "2025-11-25");
    mcpw_tasks *tasks = NULL;
    mcpw_event ev;
    mcpw_task_result r;
    mcpw_str created = {NULL, 0};
    char task[64], params[128];
    int64_t waiting;
    bool served = false;
    size_t big_len = 1024 * 1024;
    char *big = malloc(big_len + 32);
    int i, full = 0;

    CHECK(big != NULL);
    OK(mcpw_tasks_new(NULL, 0, WALL_MS, &tasks));
    OK(mcpw_tasks_create_legacy(tasks, p.now, test_random, &random_state, 1, &created));
    keep_task_id(created, task);
    snprintf(params, sizeof params, "{\"taskId\":\"%s\"}", task);
    waiting = legacy_round(&p, tasks, 1, "tasks/result", params, &served);
    CHECK(served);
    OK(mcpw_tasks_complete(tasks, p.now, task, strlen(task), S("{\"content\":[]}")));
    /* The server's output fills up (nobody reads it for now). */
    memcpy(big, "{\"pad\":\"", 8);
    memset(big + 8, 'x', big_len);
    memcpy(big + 8 + big_len, "\"}", 3);
    for (i = 0; i < 64 && !full; i++) {
        mcpw_result rc = mcpw_conn_notify(p.server, S("x/pad"), big, strlen(big));
        CHECK(rc == MCPW_OK || rc == MCPW_ERR_OUTPUT_FULL);
        full = rc == MCPW_ERR_OUTPUT_FULL;
    }
    CHECK(full);
    OK(mcpw_tasks_poll_result(tasks, &r));
    CHECK(r.ready && r.id.kind == MCPW_ID_INT);
    RC(MCPW_ERR_OUTPUT_FULL, mcpw_tasks_write_result(tasks, p.server));
    /* Drained, then polled again: the same answer, which now goes out. */
    exchange(&p);
    while (next(p.client).kind != MCPW_EVENT_NONE) {
    }
    OK(mcpw_tasks_poll_result(tasks, &r));
    CHECK(r.ready && r.id.kind == MCPW_ID_INT);
    OK(mcpw_tasks_write_result(tasks, p.server));
    OK(mcpw_tasks_poll_result(tasks, &r));
    CHECK(!r.ready);
    exchange(&p);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_RESPONSE && ev.request == waiting);
    free(big);
    mcpw_tasks_free(tasks);
    free_pair(&p);
}

static void test_tasks_legacy_flow(void) {
    pair p = make_pair(LEGACY_TASKS_CAPS, "2025-11-25");
    mcpw_tasks *tasks = NULL;
    mcpw_event ev;
    mcpw_task_result r;
    mcpw_task_event te;
    mcpw_str created = {NULL, 0};
    mcpw_id call_id;
    char task[64], other[64], params[128], handle[96];
    int64_t rid = 0, waiting, got;
    bool served = false;
    const char *result = "{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}";

    OK(mcpw_tasks_new(NULL, 0, WALL_MS, &tasks));
    /* A task-augmented tools/call gets a {"task":{...}} handle. */
    OK(mcpw_conn_request(p.client, p.now, S("tools/call"), S("{\"name\":\"x\",\"task\":{}}"), NULL,
                         &rid));
    exchange(&p);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_REQUEST && str_eq(ev.method, "tools/call"));
    call_id = ev.id;
    OK(mcpw_tasks_create_legacy(tasks, p.now, test_random, &random_state, 1, &created));
    keep_task_id(created, task);
    OK(mcpw_conn_respond_task(p.server, &call_id, tasks, task, strlen(task)));
    exchange(&p);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_TASK_CREATED && ev.request == rid);
    snprintf(handle, sizeof handle, "{\"task\":{\"taskId\":\"%s\"", task);
    CHECK(ev.result.ptr != NULL && ev.result.len > strlen(handle) &&
          memcmp(ev.result.ptr, handle, strlen(handle)) == 0);
    CHECK(contains((const uint8_t *)ev.result.ptr, ev.result.len, "\"ttl\":3600000"));

    /* tasks/get for its owner; another owner does not see it; any other method is ours. */
    snprintf(params, sizeof params, "{\"taskId\":\"%s\"}", task);
    got = legacy_round(&p, tasks, 1, "tasks/get", params, &served);
    CHECK(served);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_RESPONSE && ev.request == got);
    CHECK(contains((const uint8_t *)ev.result.ptr, ev.result.len, "\"status\":\"working\""));
    CHECK(contains((const uint8_t *)ev.result.ptr, ev.result.len, "\"pollInterval\":1000"));
    got = legacy_round(&p, tasks, 2, "tasks/get", params, &served);
    ev = next(p.client);
    CHECK(served && ev.kind == MCPW_EVENT_ERROR && ev.request == got &&
          ev.code == MCPW_JSONRPC_INVALID_PARAMS);
    got = legacy_round(&p, tasks, 1, "tools/list", "{}", &served);
    CHECK(!served && next(p.client).kind == MCPW_EVENT_NONE);
    ev = next(p.server);
    CHECK(ev.kind == MCPW_EVENT_NONE);

    /* tasks/result waits for the task's end. */
    waiting = legacy_round(&p, tasks, 1, "tasks/result", params, &served);
    CHECK(served && next(p.client).kind == MCPW_EVENT_NONE);
    memset(&r, 0xA5, sizeof r); /* outputs must be fully written */
    OK(mcpw_tasks_poll_result(tasks, &r));
    CHECK(!r.ready && r.id.kind == MCPW_ID_NONE && r.result.ptr == NULL && r.message.ptr == NULL);
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_tasks_write_result(tasks, p.server));
    /* Input asked by the server itself, then resumed (the 2025-11-25 flow). */
    OK(mcpw_tasks_ask(tasks, p.now, task, strlen(task), S("k"), S("{\"method\":\"roots/list\"}")));
    CHECK(status_of(tasks, task) == MCPW_TASK_STATUS_INPUT_REQUIRED);
    OK(mcpw_tasks_resume(tasks, p.now, task, strlen(task)));
    CHECK(status_of(tasks, task) == MCPW_TASK_STATUS_WORKING);
    OK(mcpw_tasks_resume(tasks, p.now, task, strlen(task)));
    OK(mcpw_tasks_complete(tasks, p.now, task, strlen(task), result, strlen(result)));
    RC(MCPW_ERR_TASK_TERMINAL, mcpw_tasks_resume(tasks, p.now, task, strlen(task)));
    RC(MCPW_ERR_UNKNOWN_TASK, mcpw_tasks_resume(tasks, p.now, S("nope")));
    memset(&r, 0xA5, sizeof r);
    OK(mcpw_tasks_poll_result(tasks, &r));
    CHECK(r.ready && r.owner == 1 && !r.is_error && r.id.kind == MCPW_ID_INT);
    CHECK(r.result.ptr != NULL && r.message.ptr == NULL && r.data.ptr == NULL && r.code == 0);
    CHECK(contains((const uint8_t *)r.result.ptr, r.result.len, "io.modelcontextprotocol/related-task"));
    OK(mcpw_tasks_write_result(tasks, p.server));
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_tasks_write_result(tasks, p.server));
    OK(mcpw_tasks_poll_result(tasks, &r));
    CHECK(!r.ready);
    exchange(&p);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_RESPONSE && ev.request == waiting);
    CHECK(contains((const uint8_t *)ev.result.ptr, ev.result.len, "\"text\":\"done\""));
    CHECK(contains((const uint8_t *)ev.result.ptr, ev.result.len,
                   "\"_meta\":{\"io.modelcontextprotocol/related-task\":{\"taskId\":\""));
    CHECK(contains((const uint8_t *)ev.result.ptr, ev.result.len, task));

    /* A failure comes back as the error; tasks/cancel ends a task at once. */
    OK(mcpw_tasks_create_legacy(tasks, p.now, test_random, &random_state, 1, &created));
    keep_task_id(created, other);
    snprintf(params, sizeof params, "{\"taskId\":\"%s\"}", other);
    waiting = legacy_round(&p, tasks, 1, "tasks/result", params, &served);
    OK(mcpw_tasks_fail(tasks, p.now, other, strlen(other), MCPW_JSONRPC_INTERNAL_ERROR,
                       S("it broke"), S("{\"step\":2}")));
    OK(mcpw_tasks_poll_result(tasks, &r));
    CHECK(r.ready && r.is_error && r.code == MCPW_JSONRPC_INTERNAL_ERROR && r.result.ptr == NULL);
    CHECK(str_eq(r.message, "it broke") && str_eq(r.data, "{\"step\":2}"));
    /* The wrong connection refuses it, and the answer is kept for the right one. */
    RC(MCPW_ERR_UNKNOWN_REQUEST, mcpw_tasks_write_result(tasks, p.client));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_write_result(tasks, NULL));
    OK(mcpw_tasks_write_result(tasks, p.server));
    exchange(&p);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_ERROR && ev.request == waiting && str_eq(ev.message, "it broke"));
    OK(mcpw_tasks_create_legacy(tasks, p.now, test_random, &random_state, 1, &created));
    keep_task_id(created, other);
    snprintf(params, sizeof params, "{\"taskId\":\"%s\"}", other);
    got = legacy_round(&p, tasks, 1, "tasks/cancel", params, &served);
    ev = next(p.client);
    CHECK(ev.kind == MCPW_EVENT_RESPONSE && ev.request == got);
    CHECK(contains((const uint8_t *)ev.result.ptr, ev.result.len, "\"status\":\"cancelled\""));
    CHECK(status_of(tasks, other) == MCPW_TASK_STATUS_CANCELLED);
    OK(mcpw_tasks_poll_event(tasks, &te));
    CHECK(te.kind == MCPW_TASK_EVENT_CANCEL_REQUESTED && str_eq(te.task, other));

    /* max_tasks_per_owner: a full owner gets MCPW_ERR_TASKS_FULL, others still get tasks,
       and the owner's oldest terminal task whose result it fetched makes room for it. */
    {
        mcpw_tasks *owned = NULL;
        mcpw_task_config config = mcpw_task_config_default();
        mcpw_str id = {"unchanged", 9};
        char mine[64];
        config.max_tasks_per_owner = 1;
        OK(mcpw_tasks_new(&config, 0, WALL_MS, &owned));
        OK(mcpw_tasks_create_legacy(owned, 0, test_random, &random_state, 1, &created));
        keep_task_id(created, mine);
        RC(MCPW_ERR_TASKS_FULL,
           mcpw_tasks_create_legacy(owned, 0, test_random, &random_state, 1, &id));
        CHECK(str_eq(id, "unchanged"));
        OK(mcpw_tasks_create_legacy(owned, 0, test_random, &random_state, 2, &created));
        OK(mcpw_tasks_complete(owned, 0, mine, strlen(mine), S("{}")));
        RC(MCPW_ERR_TASKS_FULL,
           mcpw_tasks_create_legacy(owned, 0, test_random, &random_state, 1, &id));
        snprintf(params, sizeof params, "{\"taskId\":\"%s\"}", mine);
        got = legacy_round(&p, owned, 1, "tasks/result", params, &served);
        ev = next(p.client);
        CHECK(served && ev.kind == MCPW_EVENT_RESPONSE && ev.request == got);
        OK(mcpw_tasks_create_legacy(owned, 0, test_random, &random_state, 1, &created));
        CHECK(status_of(owned, mine) == MCPW_TASK_STATUS_OTHER);
        mcpw_tasks_free(owned);
    }

    /* NULL handles and outputs. */
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_tasks_create_legacy(NULL, 0, test_random, &random_state, 1, &created));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_create_legacy(tasks, 0, NULL, NULL, 1, &created));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_tasks_create_legacy(tasks, 0, test_random, &random_state, 1, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_resume(NULL, 0, S("t")));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_poll_result(NULL, &r));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_poll_result(tasks, NULL));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_write_result(NULL, p.server));
    RC(MCPW_ERR_NULL_ARGUMENT, mcpw_tasks_serve_legacy(NULL, 0, 1, p.server, &call_id,
                                                       S("tasks/get"), S("{}"), &served));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_tasks_serve_legacy(tasks, 0, 1, NULL, &call_id, S("tasks/get"), S("{}"), &served));
    RC(MCPW_ERR_NULL_ARGUMENT,
       mcpw_tasks_serve_legacy(tasks, 0, 1, p.server, &call_id, S("tasks/get"), S("{}"), NULL));
    RC(MCPW_ERR_INVALID_JSON, mcpw_tasks_serve_legacy(tasks, 0, 1, p.server, &call_id,
                                                      S("tasks/get"), S("{"), &served));

    mcpw_tasks_free(tasks);
    free_pair(&p);
}

/* Last: every result code that C can reach was returned by some call above. PANIC and
   POISONED need a bug inside mcpwire (bindings/c/src/tests.rs covers them), and COMMAND_REFUSED is
   kept for engine refusals added later. */
static void test_every_reachable_result_code_was_seen(void) {
    int code;
    for (code = 0; code < 1000; code++) {
        const char *m = mcpw_result_message(code);
        int known = strcmp(m, "unknown result code") != 0;
        int unreachable = code == MCPW_ERR_PANIC || code == MCPW_ERR_POISONED ||
                          code == MCPW_ERR_COMMAND_REFUSED;
        if (known && !unreachable && !seen_results[code]) {
            fprintf(stderr, "    result %d (%s) was never returned\n", code, m);
            checks_failed_in_test++;
        }
    }
}

int main(void) {
    run("version", test_version);
    run("result_messages", test_result_messages);
    run("config_new_and_free", test_config_new_and_free);
    run("config_setters", test_config_setters);
    run("null_handles_and_outputs", test_null_handles_and_outputs);
    run("handshake_and_getters", test_handshake_and_getters);
    run("getters_before_the_handshake", test_getters_before_the_handshake);
    run("request_and_response", test_request_and_response);
    run("string_ids_round_trip_exactly", test_string_ids_round_trip_exactly);
    run("invalid_command_arguments", test_invalid_command_arguments);
    run("zero_lengths", test_zero_lengths);
    run("notifications", test_notifications);
    run("progress", test_progress);
    run("cancellation", test_cancellation);
    run("timeouts", test_timeouts);
    run("partial_transmit_and_consume", test_partial_transmit_and_consume);
    run("violations", test_violations);
    run("frame_cap", test_frame_cap);
    run("engine_refusals", test_engine_refusals);
    run("bounds", test_bounds);
    run("input_piece", test_input_piece);
    run("graceful_close", test_graceful_close);
    run("eof", test_eof);
    run("fatal_handshake_failures", test_fatal_handshake_failures);
    run("strict_lifecycle_policy", test_strict_lifecycle_policy);
    run("escaped_method_is_decoded", test_escaped_method_is_decoded);
    run("related_requests_and_frames", test_related_requests_and_frames);
    run("logging_in_the_handshake_era", test_logging_in_the_handshake_era);
    run("the_stateless_era", test_the_stateless_era);
    run("json_helpers", test_json_helpers);
    run("decode_without_a_connection", test_decode_without_a_connection);
    run("http_refuses_null_and_invalid_arguments", test_http_refuses_null_and_invalid_arguments);
    run("http_a_session_in_the_handshake_era", test_http_a_session_in_the_handshake_era);
    run("http_an_answer_given_later_on_the_open_stream",
        test_http_an_answer_given_later_on_the_open_stream);
    run("callbacks_that_call_back_in_are_refused", test_callbacks_that_call_back_in_are_refused);
    run("http_consume_counts_against_what_was_lent",
        test_http_consume_counts_against_what_was_lent);
    run("http_connection_views", test_http_connection_views);
    run("http_a_command_on_a_view_after_poll_timeout_is_seen",
        test_http_a_command_on_a_view_after_poll_timeout_is_seen);
    run("http_each_connection_has_its_own_view", test_http_each_connection_has_its_own_view);
    run("http_the_stateless_era", test_http_the_stateless_era);
    run("http_closing_a_stateless_stream_cancels_the_request",
        test_http_closing_a_stateless_stream_cancels_the_request);
    run("http_a_view_of_a_connection_a_poll_ended_is_stale",
        test_http_a_view_of_a_connection_a_poll_ended_is_stale);
    run("http_host_origin_path_and_size_checks", test_http_host_origin_path_and_size_checks);
    run("http_polling_and_resumption_through_a_host_store",
        test_http_polling_and_resumption_through_a_host_store);
    run("http_end_listen_streams", test_http_end_listen_streams);
    run("http_session_expiry", test_http_session_expiry);
    run("http_client_handle_error", test_http_client_handle_error);
    run("http_client_has_unheard", test_http_client_has_unheard);
    run("http_the_get_stream", test_http_the_get_stream);
    run("review_listens", test_review_listens);
    run("tasks_the_whole_flow", test_tasks_the_whole_flow);
    run("tasks_refused_without_the_extension", test_tasks_refused_without_the_extension);
    run("tasks_expire_at_their_ttl", test_tasks_expire_at_their_ttl);
    run("tasks_unknown_tasks_and_bounds", test_tasks_unknown_tasks_and_bounds);
    run("tasks_refuse_null_and_invalid_arguments", test_tasks_refuse_null_and_invalid_arguments);
    run("http_tasks_outlive_their_request", test_http_tasks_outlive_their_request);
    run("url_elicitation_required_and_its_completion",
        test_url_elicitation_required_and_its_completion);
    run("tasks_created_event_in_2026_07_28", test_tasks_created_event_in_2026_07_28);
    run("tasks_legacy_flow", test_tasks_legacy_flow);
    run("tasks_legacy_result_survives_a_full_output", test_tasks_legacy_result_survives_a_full_output);
    run("every_reachable_result_code_was_seen", test_every_reachable_result_code_was_seen);
    printf("\ntest result: %s. %d passed; %d failed\n", tests_failed == 0 ? "ok" : "FAILED",
           tests_passed, tests_failed);
    return tests_failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
