/* C helpers for the Go package; see shim.h for why they exist. */
#include "shim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

const char mcpwgo_empty[1] = {0};

static mcpw_str event_view(const mcpw_event *e, int which) {
    switch (which) {
    case MCPWGO_ID:
        return e->id.kind == MCPW_ID_STRING ? e->id.string : (mcpw_str){NULL, 0};
    case MCPWGO_METHOD:
        return e->method;
    case MCPWGO_PARAMS:
        return e->params;
    case MCPWGO_RESULT:
        return e->result;
    case MCPWGO_MESSAGE:
        return e->message;
    case MCPWGO_DATA:
        return e->data;
    case MCPWGO_REASON:
        return e->reason;
    case MCPWGO_VERSION:
        return e->version;
    case MCPWGO_INPUT_REQUESTS:
        return e->input_requests;
    default:
        return e->request_state;
    }
}

static size_t event_bytes(const mcpw_event *e) {
    size_t total = 0;
    int i;
    for (i = 0; i < MCPWGO_VIEWS; i++) total += event_view(e, i).len;
    return total;
}

static void record_event(const mcpw_event *e, mcpwgo_record *r, uint8_t *arena, size_t *used) {
    int i;
    r->kind = (uint32_t)e->kind;
    r->id_kind = e->id.kind;
    r->request = e->request;
    r->id_int = e->id.integer;
    r->code = e->code;
    r->progress = e->progress;
    r->total = e->total;
    r->has_total = e->has_total ? 1u : 0u;
    r->close_reason = (uint32_t)e->close_reason;
    r->violation = (uint32_t)e->violation;
    r->decode_reason = (uint32_t)e->decode_reason;
    for (i = 0; i < MCPWGO_VIEWS; i++) {
        mcpw_str v = event_view(e, i);
        r->off[i] = *used;
        if (v.ptr == NULL) {
            r->len[i] = -1;
            continue;
        }
        r->len[i] = (int64_t)v.len;
        if (v.len > 0) memcpy(arena + *used, v.ptr, v.len);
        *used += v.len;
    }
}

mcpwgo_drained mcpwgo_drain(mcpw_conn *conn, mcpwgo_drainer *d, mcpwgo_record *records,
                            size_t records_cap, uint8_t *arena, size_t arena_cap) {
    mcpwgo_drained out = {MCPW_OK, 0, 0, 0, 0};
    /* Check room for a record before polling: an event must never stay pending past the
       return to Go unless the caller comes straight back (the `need` case). */
    while (out.count < records_cap) {
        size_t size;
        if (!d->has_pending) {
            mcpw_result rc = mcpw_conn_poll_event(conn, &d->pending);
            if (rc != MCPW_OK) {
                out.rc = rc;
                return out;
            }
            if (d->pending.kind == MCPW_EVENT_NONE) {
                out.empty = 1;
                return out;
            }
            d->has_pending = 1;
        }
        size = event_bytes(&d->pending);
        if (size > arena_cap - out.used) {
            out.need = size;
            return out;
        }
        record_event(&d->pending, &records[out.count], arena, &out.used);
        d->has_pending = 0;
        out.count++;
    }
    return out;
}

mcpwgo_lent mcpwgo_transmit(const mcpw_conn *conn) {
    mcpwgo_lent out = {MCPW_OK, NULL, 0, 0};
    out.rc = mcpw_conn_transmit(conn, &out.bytes, &out.len, &out.stream);
    return out;
}

mcpwgo_lent mcpwgo_feed(mcpw_conn *conn, uint64_t now_ns, const uint8_t *data, size_t len) {
    mcpwgo_lent out = {MCPW_OK, NULL, 0, 0};
    const uint8_t *bytes = NULL;
    uint64_t stream = 0;
    out.rc = mcpw_conn_handle_input(conn, now_ns, data, len);
    if (out.rc == MCPW_OK && mcpw_conn_transmit(conn, &bytes, &out.len, &stream) != MCPW_OK)
        out.len = 0;
    return out;
}

mcpwgo_deadline mcpwgo_poll_timeout(const mcpw_conn *conn) {
    mcpwgo_deadline out = {MCPW_OK, 0, 0};
    bool has = false;
    out.rc = mcpw_conn_poll_timeout(conn, &has, &out.at_ns);
    out.has = has ? 1 : 0;
    return out;
}

mcpwgo_new_conn mcpwgo_conn_new(const mcpw_config *config, uint64_t now_ns) {
    mcpwgo_new_conn out = {MCPW_OK, NULL};
    out.rc = mcpw_conn_new(config, now_ns, &out.conn);
    return out;
}

mcpwgo_new_config mcpwgo_config_new(uint32_t role, const char *name, size_t name_len,
                                    const char *version, size_t version_len) {
    mcpwgo_new_config out = {MCPW_OK, NULL};
    out.rc = mcpw_config_new(role, name, name_len, version, version_len, &out.config);
    return out;
}

mcpw_result mcpwgo_config_set_versions(mcpw_config *config, const char *joined,
                                       const size_t *lens, size_t count) {
    mcpw_str small[16];
    mcpw_str *views = small;
    size_t i, at = 0;
    mcpw_result rc;
    if (count > sizeof small / sizeof small[0]) {
        views = malloc(count * sizeof *views);
        if (views == NULL) return MCPW_ERR_INVALID_ARGUMENT;
    }
    for (i = 0; i < count; i++) {
        views[i].ptr = joined != NULL ? joined + at : mcpwgo_empty;
        views[i].len = lens[i];
        at += lens[i];
    }
    rc = mcpw_config_set_versions(config, count > 0 ? views : NULL, count);
    if (views != small) free(views);
    return rc;
}

mcpwgo_requested mcpwgo_request(mcpw_conn *conn, uint64_t now_ns, const char *method,
                                size_t method_len, const char *params, size_t params_len,
                                uint64_t timeout_ms, uint32_t progress,
                                uint32_t reset_on_progress) {
    mcpwgo_requested out = {MCPW_OK, 0};
    mcpw_request_options options;
    options.timeout_ms = timeout_ms;
    options.progress = progress;
    options.reset_on_progress = reset_on_progress;
    out.rc = mcpw_conn_request(conn, now_ns, method, method_len, params, params_len, &options,
                               &out.id);
    return out;
}

static mcpw_id make_id(uint32_t kind, int64_t integer, const char *text, size_t len) {
    mcpw_id id;
    id.kind = kind;
    id.integer = integer;
    id.string.ptr = kind == MCPW_ID_STRING && text == NULL ? mcpwgo_empty : text;
    id.string.len = len;
    return id;
}

mcpw_result mcpwgo_respond(mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                           const char *id_str, size_t id_len, const char *result,
                           size_t result_len) {
    mcpw_id id = make_id(id_kind, id_int, id_str, id_len);
    return mcpw_conn_respond(conn, &id, result, result_len);
}

mcpw_result mcpwgo_respond_error(mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                 const char *id_str, size_t id_len, int64_t code,
                                 const char *message, size_t message_len, const char *data,
                                 size_t data_len) {
    mcpw_id id = make_id(id_kind, id_int, id_str, id_len);
    return mcpw_conn_respond_error(conn, &id, code, message, message_len, data, data_len);
}

mcpw_result mcpwgo_listen_items(const mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                const char *id_str, size_t id_len, mcpw_listen_item *out,
                                size_t capacity, size_t *count) {
    mcpw_id id = make_id(id_kind, id_int, id_str, id_len);
    return mcpw_conn_listen_items(conn, &id, out, capacity, count);
}

mcpw_result mcpwgo_grant_listen(mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                const char *id_str, size_t id_len, const bool *keep,
                                size_t keep_len) {
    mcpw_id id = make_id(id_kind, id_int, id_str, id_len);
    return mcpw_conn_grant_listen(conn, &id, keep, keep_len);
}

mcpw_result mcpwgo_progress(mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                            const char *id_str, size_t id_len, double progress, double total,
                            int has_total, const char *message, size_t message_len) {
    mcpw_id id = make_id(id_kind, id_int, id_str, id_len);
    return mcpw_conn_progress(conn, &id, progress, total, has_total != 0, message, message_len);
}

mcpwgo_requested mcpwgo_request_related(mcpw_conn *conn, uint64_t now_ns, uint32_t id_kind,
                                        int64_t id_int, const char *id_str, size_t id_len,
                                        const char *method, size_t method_len,
                                        const char *params, size_t params_len,
                                        uint64_t timeout_ms, uint32_t progress,
                                        uint32_t reset_on_progress) {
    mcpwgo_requested out = {MCPW_OK, 0};
    mcpw_id parent = make_id(id_kind, id_int, id_str, id_len);
    mcpw_request_options options;
    options.timeout_ms = timeout_ms;
    options.progress = progress;
    options.reset_on_progress = reset_on_progress;
    out.rc = mcpw_conn_request_related(conn, now_ns, &parent, method, method_len, params,
                                       params_len, &options, &out.id);
    return out;
}

mcpwgo_requested mcpwgo_retry(mcpw_conn *conn, uint64_t now_ns, int64_t request_id,
                              const char *input_responses, size_t input_responses_len) {
    mcpwgo_requested out = {MCPW_OK, 0};
    out.rc = mcpw_conn_retry(conn, now_ns, request_id, input_responses, input_responses_len,
                             &out.id);
    return out;
}

mcpw_result mcpwgo_respond_url_elicitation_required(mcpw_conn *conn, uint32_t id_kind,
                                                    int64_t id_int, const char *id_str,
                                                    size_t id_len, const char *elicitations,
                                                    size_t elicitations_len) {
    mcpw_id id = make_id(id_kind, id_int, id_str, id_len);
    return mcpw_conn_respond_url_elicitation_required(conn, &id, elicitations, elicitations_len);
}

mcpw_result mcpwgo_respond_input_required(mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                          const char *id_str, size_t id_len,
                                          const char *input_requests,
                                          size_t input_requests_len,
                                          const char *request_state, size_t request_state_len) {
    mcpw_id id = make_id(id_kind, id_int, id_str, id_len);
    return mcpw_conn_respond_input_required(conn, &id, input_requests, input_requests_len,
                                            request_state, request_state_len);
}

mcpwgo_logged mcpwgo_log(mcpw_conn *conn, uint32_t id_kind, int64_t id_int, const char *id_str,
                         size_t id_len, uint32_t level, const char *logger, size_t logger_len,
                         const char *data, size_t data_len) {
    mcpwgo_logged out = {MCPW_OK, 0};
    bool sent = false;
    mcpw_id id = make_id(id_kind, id_int, id_str, id_len);
    out.rc = mcpw_conn_log(conn, &id, level, logger, logger_len, data, data_len, &sent);
    out.sent = sent ? 1 : 0;
    return out;
}

mcpwgo_era mcpwgo_conn_era(const mcpw_conn *conn) {
    mcpwgo_era out = {MCPW_OK, 0};
    mcpw_era era = MCPW_ERA_OTHER;
    out.rc = mcpw_conn_era(conn, &era);
    out.era = (uint32_t)era;
    return out;
}

mcpwgo_view mcpwgo_protocol_version(const mcpw_conn *conn) {
    mcpwgo_view out = {MCPW_OK, {NULL, 0}};
    out.rc = mcpw_conn_protocol_version(conn, &out.view);
    return out;
}

mcpwgo_view mcpwgo_peer_info(const mcpw_conn *conn) {
    mcpwgo_view out = {MCPW_OK, {NULL, 0}};
    out.rc = mcpw_conn_peer_info(conn, &out.view);
    return out;
}

mcpwgo_view mcpwgo_peer_capabilities(const mcpw_conn *conn) {
    mcpwgo_view out = {MCPW_OK, {NULL, 0}};
    out.rc = mcpw_conn_peer_capabilities(conn, &out.view);
    return out;
}

mcpwgo_view mcpwgo_peer_instructions(const mcpw_conn *conn) {
    mcpwgo_view out = {MCPW_OK, {NULL, 0}};
    out.rc = mcpw_conn_peer_instructions(conn, &out.view);
    return out;
}

mcpwgo_state mcpwgo_conn_status(const mcpw_conn *conn) {
    mcpwgo_state out;
    mcpw_state state = MCPW_STATE_OTHER;
    mcpw_role role = MCPW_ROLE_CLIENT;
    memset(&out, 0, sizeof out);
    out.rc = mcpw_conn_state(conn, &state);
    if (out.rc == MCPW_OK) out.rc = mcpw_conn_role(conn, &role);
    if (out.rc == MCPW_OK) out.rc = mcpw_conn_in_flight(conn, &out.ours, &out.peers);
    if (out.rc == MCPW_OK) out.rc = mcpw_conn_stats(conn, &out.stats);
    if (out.rc == MCPW_OK)
        out.rc = mcpw_conn_ignored_elicitation_completions(conn, &out.ignored_elicitation_completions);
    out.state = (uint32_t)state;
    out.role = (uint32_t)role;
    return out;
}

mcpwgo_limits mcpwgo_config_get_limits(const mcpw_config *config) {
    mcpwgo_limits out;
    memset(&out, 0, sizeof out);
    out.rc = mcpw_config_get_limits(config, &out.limits);
    return out;
}

mcpwgo_context mcpwgo_request_context(const mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                      const char *id_str, size_t id_len) {
    mcpwgo_context out;
    mcpw_id id = make_id(id_kind, id_int, id_str, id_len);
    memset(&out, 0, sizeof out);
    out.rc = mcpw_conn_request_context(conn, &id, &out.context);
    return out;
}

/* ---- The HTTP server ------------------------------------------------------------------- */

void mcpwgo_random(void *user, uint8_t *buf, size_t len) {
    size_t done = 0;
    (void)user;
    while (done < len) {
        ssize_t n = getrandom(buf + done, len - done, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            abort(); /* no secure randomness: session ids would be guessable */
        }
        done += (size_t)n;
    }
}

/* How many headers split_headers puts in the caller's stack array; more are allocated. */
#define STACK_HEADERS 32

/* The headers Go passes as one byte string of name,value pairs cut by `lens` (2 * count
   entries), as views for the C ABI: in `stack` (STACK_HEADERS entries) when they fit, else in
   memory to free (NULL for none). */
static mcpw_http_header *split_headers(const char *joined, const size_t *lens, size_t count,
                                       mcpw_http_header *stack) {
    mcpw_http_header *hs = stack;
    size_t i, at = 0;
    if (count == 0) return NULL;
    if (count > STACK_HEADERS) {
        hs = calloc(count, sizeof *hs);
        if (hs == NULL) abort();
    }
    for (i = 0; i < count; i++) {
        hs[i].name.ptr = joined + at;
        hs[i].name.len = lens[2 * i];
        at += lens[2 * i];
        hs[i].value.ptr = joined + at;
        hs[i].value.len = lens[2 * i + 1];
        at += lens[2 * i + 1];
    }
    return hs;
}

/* Copies the event in `p` (polled by the caller) into `record` and `arena`, or says how much
   arena it needs (the event then stays pending for the caller's next try). */
static mcpwgo_http_polled record_pending(mcpwgo_http_pending *p, mcpwgo_record *record,
                                         uint8_t *arena, size_t arena_cap) {
    mcpwgo_http_polled out;
    size_t size = event_bytes(&p->event);
    memset(&out, 0, sizeof out);
    if (size > arena_cap) {
        out.need = size;
        return out;
    }
    record_event(&p->event, record, arena, &out.used);
    out.key = p->key;
    out.conn = p->conn;
    p->has = 0;
    return out;
}

mcpwgo_http_new mcpwgo_http_server_new(const mcpw_config *config, uint64_t idle_ms,
                                       size_t max_sessions, size_t max_body,
                                       size_t event_store, size_t event_store_bytes,
                                       uint64_t retry_ms, uint64_t keepalive_ms,
                                       const char *hosts, const size_t *host_lens,
                                       size_t host_count, const char *tools, size_t tools_len) {
    mcpwgo_http_new out = {MCPW_OK, NULL};
    mcpw_http_server_options o;
    mcpw_str *allowed = NULL;
    size_t i, at = 0;
    memset(&o, 0, sizeof o);
    o.random = mcpwgo_random;
    o.session_idle_timeout_ms = idle_ms;
    o.max_sessions = max_sessions;
    o.max_body = max_body;
    o.event_store = event_store;
    o.event_store_bytes = event_store_bytes;
    o.retry_ms = retry_ms;
    o.keepalive_ms = keepalive_ms;
    if (tools_len > 0) {
        o.tools.ptr = tools;
        o.tools.len = tools_len;
    }
    if (host_count > 0) {
        allowed = calloc(host_count, sizeof *allowed);
        if (allowed == NULL) abort();
        for (i = 0; i < host_count; i++) {
            allowed[i].ptr = hosts + at;
            allowed[i].len = host_lens[i];
            at += host_lens[i];
        }
        o.allowed_hosts = allowed;
        o.allowed_hosts_len = host_count;
    }
    out.rc = mcpw_http_server_new(config, &o, &out.server);
    free(allowed);
    return out;
}

mcpwgo_http_answer mcpwgo_http_handle(mcpw_http_server *server, uint64_t now_ns,
                                      const char *method, size_t method_len,
                                      const char *headers, const size_t *lens, size_t count,
                                      const uint8_t *body, size_t body_len) {
    mcpwgo_http_answer out;
    mcpw_http_header stack[STACK_HEADERS];
    mcpw_http_header *hs = split_headers(headers, lens, count, stack);
    memset(&out, 0, sizeof out);
    out.rc = mcpw_http_server_handle_request(server, now_ns, method, method_len, NULL, 0, hs,
                                             count, body, body_len, &out.response);
    if (hs != stack) free(hs);
    return out;
}

mcpwgo_http_answer mcpwgo_http_settle(mcpw_http_server *server, uint64_t stream) {
    mcpwgo_http_answer out;
    memset(&out, 0, sizeof out);
    out.rc = mcpw_http_server_settle(server, stream, &out.response);
    return out;
}

mcpwgo_http_polled mcpwgo_http_poll_event(mcpw_http_server *server, mcpwgo_http_pending *p,
                                          mcpwgo_record *record, uint8_t *arena,
                                          size_t arena_cap) {
    mcpwgo_http_polled out;
    memset(&out, 0, sizeof out);
    if (!p->has) {
        out.rc = mcpw_http_server_poll_event(server, &p->event, &p->key, &p->conn);
        if (out.rc != MCPW_OK) return out;
        if (p->event.kind == MCPW_EVENT_NONE) {
            out.empty = 1;
            return out;
        }
        p->has = 1;
    }
    return record_pending(p, record, arena, arena_cap);
}

mcpwgo_http_handled mcpwgo_http_handle_first(mcpw_http_server *server, uint64_t now_ns,
                                             const char *method, size_t method_len,
                                             const char *headers, const size_t *lens,
                                             size_t count, const uint8_t *body,
                                             size_t body_len, mcpwgo_http_pending *p,
                                             mcpwgo_record *record, uint8_t *arena,
                                             size_t arena_cap) {
    mcpwgo_http_handled out;
    memset(&out, 0, sizeof out);
    out.answer = mcpwgo_http_handle(server, now_ns, method, method_len, headers, lens, count,
                                    body, body_len);
    out.polled.empty = 1;
    if (out.answer.rc == MCPW_OK && out.answer.response.has_stream)
        out.polled = mcpwgo_http_poll_event(server, p, record, arena, arena_cap);
    return out;
}

mcpwgo_http_next mcpwgo_http_next_or_settle(mcpw_http_server *server, uint64_t stream,
                                            mcpwgo_http_pending *p, mcpwgo_record *record,
                                            uint8_t *arena, size_t arena_cap) {
    mcpwgo_http_next out;
    memset(&out, 0, sizeof out);
    out.polled = mcpwgo_http_poll_event(server, p, record, arena, arena_cap);
    if (out.polled.rc == MCPW_OK && !out.polled.empty) return out;
    out.settled = 1;
    out.answer = mcpwgo_http_settle(server, stream);
    out.deadline = mcpwgo_http_poll_timeout(server);
    return out;
}

mcpwgo_http_stream mcpwgo_http_poll_stream(mcpw_http_server *server, uint64_t stream) {
    mcpwgo_http_stream out;
    bool finished = false, open = false;
    memset(&out, 0, sizeof out);
    out.rc = mcpw_http_server_poll_stream(server, stream, &out.bytes, &out.len, &finished,
                                          &open);
    out.finished = finished;
    out.open = open;
    return out;
}

mcpwgo_http_conn mcpwgo_http_server_conn(mcpw_http_server *server, uint64_t key) {
    mcpwgo_http_conn out = {MCPW_OK, NULL};
    out.rc = mcpw_http_server_conn(server, key, &out.conn);
    return out;
}

size_t mcpwgo_http_take_woken(mcpw_http_server *server, uint64_t *ids, size_t cap) {
    size_t n = 0;
    while (n < cap) {
        bool has = false;
        uint64_t stream = 0;
        if (mcpw_http_server_poll_woken(server, &has, &stream) != MCPW_OK || !has) break;
        ids[n++] = stream;
    }
    return n;
}

mcpwgo_deadline mcpwgo_http_poll_timeout(const mcpw_http_server *server) {
    mcpwgo_deadline out = {MCPW_OK, 0, 0};
    bool has = false;
    out.rc = mcpw_http_server_poll_timeout(server, &has, &out.at_ns);
    out.has = has;
    return out;
}

mcpwgo_http_closed mcpwgo_http_close_for_polling(mcpw_http_server *server, uint64_t key,
                                                 uint32_t id_kind, int64_t id_int,
                                                 const char *id_str, size_t id_len) {
    mcpwgo_http_closed out = {MCPW_OK, 0};
    mcpw_id id;
    bool closed = false;
    id.kind = id_kind;
    id.integer = id_int;
    id.string.ptr = id_str;
    id.string.len = id_len;
    out.rc = mcpw_http_server_close_stream_for_polling(server, key, &id, &closed);
    out.closed = closed;
    return out;
}

/* ---- The HTTP client ------------------------------------------------------------------- */

mcpwgo_http_client_new mcpwgo_http_client_create(const mcpw_config *config, uint64_t now_ns,
                                                 uint64_t initial_delay_ms,
                                                 uint64_t max_delay_ms, uint32_t max_attempts,
                                                 int open_get_stream) {
    mcpwgo_http_client_new out = {MCPW_OK, NULL};
    mcpw_http_client_options o;
    memset(&o, 0, sizeof o);
    o.initial_delay_ms = initial_delay_ms;
    o.max_delay_ms = max_delay_ms;
    o.max_attempts = max_attempts;
    o.open_get_stream = open_get_stream != 0;
    out.rc = mcpw_http_client_new(config, now_ns, &o, &out.client);
    return out;
}

mcpwgo_http_polled mcpwgo_http_client_poll_event(mcpw_http_client *client,
                                                 mcpwgo_http_pending *p, mcpwgo_record *record,
                                                 uint8_t *arena, size_t arena_cap) {
    mcpwgo_http_polled out;
    memset(&out, 0, sizeof out);
    if (!p->has) {
        out.rc = mcpw_http_client_poll_event(client, &p->event);
        if (out.rc != MCPW_OK) return out;
        if (p->event.kind == MCPW_EVENT_NONE) {
            out.empty = 1;
            return out;
        }
        p->key = 0;
        p->conn = NULL;
        p->has = 1;
    }
    return record_pending(p, record, arena, arena_cap);
}

mcpwgo_http_action mcpwgo_http_client_poll_action(mcpw_http_client *client) {
    mcpwgo_http_action out;
    memset(&out, 0, sizeof out);
    out.rc = mcpw_http_client_poll_action(client, &out.action);
    return out;
}

mcpw_result mcpwgo_http_client_response(mcpw_http_client *client, uint64_t now_ns,
                                        uint64_t exchange, uint16_t status,
                                        const char *headers, const size_t *lens, size_t count) {
    mcpw_http_header stack[STACK_HEADERS];
    mcpw_http_header *hs = split_headers(headers, lens, count, stack);
    mcpw_result rc;
    rc = mcpw_http_client_handle_response(client, now_ns, exchange, status, hs, count);
    if (hs != stack) free(hs);
    return rc;
}

mcpwgo_http_client_conn mcpwgo_http_client_view(mcpw_http_client *client) {
    mcpwgo_http_client_conn out = {MCPW_OK, NULL};
    out.rc = mcpw_http_client_conn(client, &out.conn);
    return out;
}

mcpwgo_deadline mcpwgo_http_client_deadline(const mcpw_http_client *client) {
    mcpwgo_deadline out = {MCPW_OK, 0, 0};
    bool has = false;
    out.rc = mcpw_http_client_poll_timeout(client, &has, &out.at_ns);
    out.has = has;
    return out;
}

/* ---- Tasks ------------------------------------------------------------------------------ */

mcpwgo_tasks_made mcpwgo_tasks_new(uint64_t now_ns, uint64_t unix_ms, size_t max_tasks,
                                   int has_ttl, uint64_t ttl_ms, uint64_t poll_interval_ms,
                                   size_t max_input_requests, size_t max_payload,
                                   size_t max_tasks_per_owner) {
    mcpwgo_tasks_made out = {MCPW_OK, NULL};
    mcpw_task_config config = mcpw_task_config_default();
    if (max_tasks > 0) config.max_tasks = max_tasks;
    if (has_ttl) config.ttl_ms = ttl_ms;
    if (poll_interval_ms > 0) config.poll_interval_ms = poll_interval_ms;
    if (max_input_requests > 0) config.max_input_requests = max_input_requests;
    if (max_payload > 0) config.max_payload = max_payload;
    if (max_tasks_per_owner > 0) config.max_tasks_per_owner = max_tasks_per_owner;
    out.rc = mcpw_tasks_new(&config, now_ns, unix_ms, &out.tasks);
    return out;
}

mcpwgo_view mcpwgo_tasks_create(mcpw_tasks *tasks, uint64_t now_ns) {
    mcpwgo_view out = {MCPW_OK, {NULL, 0}};
    out.rc = mcpw_tasks_create(tasks, now_ns, mcpwgo_random, NULL, &out.view);
    return out;
}

mcpw_result mcpwgo_tasks_respond(mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                 const char *id_str, size_t id_len, const mcpw_tasks *tasks,
                                 const char *task, size_t task_len) {
    mcpw_id id = make_id(id_kind, id_int, id_str, id_len);
    return mcpw_conn_respond_task(conn, &id, tasks, task, task_len);
}

mcpwgo_task_state mcpwgo_tasks_state(const mcpw_tasks *tasks, const char *task, size_t task_len) {
    mcpwgo_task_state out = {MCPW_OK, 0, 0};
    mcpw_task_status status = MCPW_TASK_STATUS_OTHER;
    bool requested = false;
    out.rc = mcpw_tasks_status(tasks, task, task_len, &status);
    if (out.rc != MCPW_OK) return out;
    out.rc = mcpw_tasks_cancel_requested(tasks, task, task_len, &requested);
    out.status = (uint32_t)status;
    out.cancel_requested = requested ? 1 : 0;
    return out;
}

mcpwgo_served mcpwgo_tasks_serve(mcpw_tasks *tasks, uint64_t now_ns, mcpw_conn *conn,
                                 uint32_t id_kind, int64_t id_int, const char *id_str,
                                 size_t id_len, const char *method, size_t method_len,
                                 const char *params, size_t params_len) {
    mcpwgo_served out = {MCPW_OK, 0};
    bool served = false;
    mcpw_id id = make_id(id_kind, id_int, id_str, id_len);
    out.rc = mcpw_tasks_serve(tasks, now_ns, conn, &id, method, method_len, params, params_len,
                              &served);
    out.served = served ? 1 : 0;
    return out;
}

mcpwgo_view mcpwgo_tasks_create_legacy(mcpw_tasks *tasks, uint64_t now_ns, uint64_t owner) {
    mcpwgo_view out = {MCPW_OK, {NULL, 0}};
    out.rc = mcpw_tasks_create_legacy(tasks, now_ns, mcpwgo_random, NULL, owner, &out.view);
    return out;
}

mcpwgo_served mcpwgo_tasks_serve_legacy(mcpw_tasks *tasks, uint64_t now_ns, uint64_t owner,
                                        mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                        const char *id_str, size_t id_len, const char *method,
                                        size_t method_len, const char *params,
                                        size_t params_len) {
    mcpwgo_served out = {MCPW_OK, 0};
    bool served = false;
    mcpw_id id = make_id(id_kind, id_int, id_str, id_len);
    out.rc = mcpw_tasks_serve_legacy(tasks, now_ns, owner, conn, &id, method, method_len, params,
                                     params_len, &served);
    out.served = served ? 1 : 0;
    return out;
}

mcpwgo_task_result_polled mcpwgo_tasks_poll_result(mcpw_tasks *tasks) {
    mcpwgo_task_result_polled out;
    memset(&out, 0, sizeof out);
    out.rc = mcpw_tasks_poll_result(tasks, &out.result);
    return out;
}

mcpwgo_task_polled mcpwgo_tasks_poll_event(mcpw_tasks *tasks) {
    mcpwgo_task_polled out;
    memset(&out, 0, sizeof out);
    out.rc = mcpw_tasks_poll_event(tasks, &out.event);
    return out;
}

mcpwgo_deadline mcpwgo_tasks_poll_timeout(const mcpw_tasks *tasks) {
    mcpwgo_deadline out = {MCPW_OK, 0, 0};
    bool has = false;
    out.rc = mcpw_tasks_poll_timeout(tasks, &has, &out.at_ns);
    out.has = has ? 1 : 0;
    return out;
}

mcpwgo_member mcpwgo_json_member(const char *json, size_t json_len, const char *key,
                                 size_t key_len) {
    mcpwgo_member out = {MCPW_OK, 0, 0, 0};
    mcpw_str value = {NULL, 0};
    out.rc = mcpw_json_get(json, json_len, key, key_len, &value);
    if (out.rc == MCPW_OK && value.ptr != NULL) {
        out.has = 1;
        out.off = (size_t)(value.ptr - json);
        out.len = value.len;
    }
    return out;
}

mcpw_result mcpwgo_json_members(const char *json, size_t json_len, const char *keys,
                                const size_t *key_lens, size_t n, size_t *offs, size_t *lens) {
    mcpw_str k[64], v[64];
    if (n > 64) return MCPW_ERR_INVALID_ARGUMENT;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        k[i].ptr = keys == NULL ? NULL : keys + at;
        k[i].len = key_lens[i];
        at += key_lens[i];
    }
    mcpw_result rc = mcpw_json_get_each(json, json_len, n == 0 ? NULL : k, n, v);
    if (rc != MCPW_OK) return rc;
    for (size_t i = 0; i < n; i++) {
        offs[i] = v[i].ptr == NULL ? SIZE_MAX : (size_t)(v[i].ptr - json);
        lens[i] = v[i].len;
    }
    return MCPW_OK;
}

/* A view as an offset into frame, or len -1 when absent. An empty view's pointer is the
 * library's static empty string, not inside the frame: it becomes offset 0. */
static void frame_view(const uint8_t *frame, mcpw_str v, uint64_t *off, int64_t *len) {
    if (v.ptr == NULL || v.len == 0) {
        *off = 0;
        *len = v.ptr == NULL ? -1 : 0;
        return;
    }
    *off = (uint64_t)((const uint8_t *)v.ptr - frame);
    *len = (int64_t)v.len;
}

mcpwgo_decoded mcpwgo_decode(const uint8_t *frame, size_t len, mcpwgo_message *out, size_t cap) {
    enum { ON_STACK = 8 };
    mcpw_message stack[ON_STACK];
    mcpw_message *m = stack;
    mcpwgo_decoded d = {MCPW_OK, 0, 0};
    bool batch = false;
    size_t i, n;
    if (cap > ON_STACK) {
        m = malloc(cap * sizeof *m);
        if (m == NULL) {
            d.rc = MCPW_ERR_INVALID_ARGUMENT; /* no memory for that many members */
            return d;
        }
    }
    d.rc = mcpw_decode(frame, len, m, cap, &d.count, &batch);
    d.batch = batch;
    n = d.rc == MCPW_OK ? (d.count < cap ? d.count : cap) : 0;
    for (i = 0; i < n; i++) {
        const mcpw_message *src = &m[i];
        mcpwgo_message *dst = &out[i];
        dst->kind = src->kind;
        dst->id_kind = src->id.kind;
        dst->id_int = src->id.integer;
        dst->code = src->code;
        dst->offset = src->offset;
        dst->reason = (uint32_t)src->reason;
        dst->escaped = (src->method_escaped ? 1u : 0u) | (src->message_escaped ? 2u : 0u);
        frame_view(frame, src->id.string, &dst->off[0], &dst->len[0]);
        frame_view(frame, src->method, &dst->off[1], &dst->len[1]);
        frame_view(frame, src->params, &dst->off[2], &dst->len[2]);
        frame_view(frame, src->result, &dst->off[3], &dst->len[3]);
        frame_view(frame, src->message, &dst->off[4], &dst->len[4]);
        frame_view(frame, src->data, &dst->off[5], &dst->len[5]);
    }
    if (m != stack) free(m);
    return d;
}
