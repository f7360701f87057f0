/*
 * Tests of the mcpwire C ABI from C: every exported function, every result code C can reach,
 * and misuse (NULL everywhere, zero lengths, invalid UTF-8 and JSON, use after the connection
 * closed on a fatal error).
 *
 * A client and a server engine talk to each other in memory, with simulated time. Each test
 * prints one line; the last line is "test result: ok. N passed; 0 failed" (or FAILED) and
 * the exit status is 0 only when everything passed. tests/c_abi.rs builds and runs this under
 * ASan+UBSan and under valgrind.
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

static pair make_pair(const char *server_caps, const char *version) {
    pair p = {NULL, NULL, 1000 * MS};
    mcpw_config *cc = make_config(MCPW_ROLE_CLIENT);
    mcpw_config *sc = make_config(MCPW_ROLE_SERVER);
    OK(mcpw_config_set_capabilities(cc, S("{\"roots\":{\"listChanged\":true},\"sampling\":{}}")));
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
        MCPW_ERR_COMMAND_REFUSED, MCPW_ERR_PANIC,
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
    RC(MCPW_ERR_INVALID_UTF8, mcpw_config_set_info(c, S("{\"name\":\"\xff\"}")));

    /* capabilities */
    OK(mcpw_config_set_capabilities(c, S("{\"tools\":{}}")));
    RC(MCPW_ERR_INVALID_JSON, mcpw_config_set_capabilities(c, S("{tools}")));
    RC(MCPW_ERR_INVALID_JSON, mcpw_config_set_capabilities(c, NULL, 0));
    RC(MCPW_ERR_JSON_WRONG_TYPE, mcpw_config_set_capabilities(c, S("true")));
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
                                     MCPW_POLICY_DELIVER_NON_INCREASING_PROGRESS));
    OK(mcpw_config_get_policy(c, &flags));
    CHECK(flags == (MCPW_POLICY_DEFAULT | MCPW_POLICY_RESET_TIMEOUT_ON_PROGRESS |
                    MCPW_POLICY_DELIVER_NON_INCREASING_PROGRESS));
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
    copy = ev.id;
    copy.string.ptr = saved;
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
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"no\"}}\n", &client);
    CHECK(ev.kind == MCPW_EVENT_CLOSED && ev.close_reason == MCPW_CLOSE_INITIALIZE_REJECTED);
    CHECK(ev.code == -32602);
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
    run("graceful_close", test_graceful_close);
    run("eof", test_eof);
    run("fatal_handshake_failures", test_fatal_handshake_failures);
    run("strict_lifecycle_policy", test_strict_lifecycle_policy);
    run("escaped_method_is_decoded", test_escaped_method_is_decoded);
    run("related_requests_and_frames", test_related_requests_and_frames);
    run("logging_in_the_handshake_era", test_logging_in_the_handshake_era);
    run("the_stateless_era", test_the_stateless_era);
    run("json_helpers", test_json_helpers);
    run("every_reachable_result_code_was_seen", test_every_reachable_result_code_was_seen);
    printf("\ntest result: %s. %d passed; %d failed\n", tests_failed == 0 ? "ok" : "FAILED",
           tests_passed, tests_failed);
    return tests_failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
