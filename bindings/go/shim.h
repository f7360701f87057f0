/*
 * Small C helpers compiled into the Go package (not part of the mcpwire C ABI).
 *
 * They exist for two reasons. First, cgo forbids passing Go memory that holds Go pointers,
 * so every call that takes a struct with views (mcpw_id, mcpw_str arrays) gets a flat
 * wrapper that builds the struct on the C side. Second, each cgo crossing costs tens of
 * nanoseconds, so events are drained in batches: one crossing polls many events and copies
 * their views into Go buffers lent for the duration of that call only.
 */
#ifndef MCPWIRE_GO_SHIM_H
#define MCPWIRE_GO_SHIM_H

#include "mcpwire.h"

/* The views an event may carry, in record order. */
enum {
    MCPWGO_ID = 0,
    MCPWGO_METHOD,
    MCPWGO_PARAMS,
    MCPWGO_RESULT,
    MCPWGO_MESSAGE,
    MCPWGO_DATA,
    MCPWGO_REASON,
    MCPWGO_VERSION,
    MCPWGO_INPUT_REQUESTS,
    MCPWGO_REQUEST_STATE,
    MCPWGO_VIEWS
};

/* One event with its views replaced by offsets into the batch arena (len -1: absent). */
typedef struct mcpwgo_record {
    uint32_t kind;
    uint32_t id_kind;
    int64_t request;
    int64_t id_int;
    int64_t code;
    double progress;
    double total;
    uint32_t has_total;
    uint32_t close_reason;
    uint32_t violation;
    uint32_t decode_reason;
    uint64_t off[MCPWGO_VIEWS];
    int64_t len[MCPWGO_VIEWS];
} mcpwgo_record;

/* Per-connection C memory: an event polled but not yet copied because the arena was full.
 * It is only ever left pending between two mcpwgo_drain calls made back to back by the same
 * Go function, with no other call on the handle in between, so its views stay valid. */
typedef struct mcpwgo_drainer {
    mcpw_event pending;
    int has_pending;
} mcpwgo_drainer;

typedef struct mcpwgo_drained {
    mcpw_result rc;
    size_t count; /* records written */
    size_t used;  /* arena bytes written */
    size_t need;  /* > 0: the pending event needs this many arena bytes */
    int empty;    /* the engine's queue is empty */
} mcpwgo_drained;

mcpwgo_drained mcpwgo_drain(mcpw_conn *conn, mcpwgo_drainer *d, mcpwgo_record *records,
                            size_t records_cap, uint8_t *arena, size_t arena_cap);

typedef struct mcpwgo_lent {
    mcpw_result rc;
    const uint8_t *bytes;
    size_t len;
    uint64_t stream;
} mcpwgo_lent;

mcpwgo_lent mcpwgo_transmit(const mcpw_conn *conn);

/* Feeds input and says, in len, how much output the engine then holds (what it lends
   next): Serve's check of the room left, in the same crossing. bytes and stream are unset. */
mcpwgo_lent mcpwgo_feed(mcpw_conn *conn, uint64_t now_ns, const uint8_t *data, size_t len);

typedef struct mcpwgo_deadline {
    mcpw_result rc;
    int has;
    uint64_t at_ns;
} mcpwgo_deadline;

mcpwgo_deadline mcpwgo_poll_timeout(const mcpw_conn *conn);

typedef struct mcpwgo_new_conn {
    mcpw_result rc;
    mcpw_conn *conn;
} mcpwgo_new_conn;

mcpwgo_new_conn mcpwgo_conn_new(const mcpw_config *config, uint64_t now_ns);

typedef struct mcpwgo_new_config {
    mcpw_result rc;
    mcpw_config *config;
} mcpwgo_new_config;

mcpwgo_new_config mcpwgo_config_new(uint32_t role, const char *name, size_t name_len,
                                    const char *version, size_t version_len);

/* Versions as one byte string cut by `lens` (count entries). */
mcpw_result mcpwgo_config_set_versions(mcpw_config *config, const char *joined,
                                       const size_t *lens, size_t count);

typedef struct mcpwgo_requested {
    mcpw_result rc;
    int64_t id;
} mcpwgo_requested;

mcpwgo_requested mcpwgo_request(mcpw_conn *conn, uint64_t now_ns, const char *method,
                                size_t method_len, const char *params, size_t params_len,
                                uint64_t timeout_ms, uint32_t progress,
                                uint32_t reset_on_progress);

mcpw_result mcpwgo_respond(mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                           const char *id_str, size_t id_len, const char *result,
                           size_t result_len);

/* mcpw_conn_listen_items and mcpw_conn_grant_listen with the id in parts. */
mcpw_result mcpwgo_listen_items(const mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                const char *id_str, size_t id_len, mcpw_listen_item *out,
                                size_t capacity, size_t *count);
mcpw_result mcpwgo_grant_listen(mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                const char *id_str, size_t id_len, const bool *keep,
                                size_t keep_len);

mcpw_result mcpwgo_respond_error(mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                 const char *id_str, size_t id_len, int64_t code,
                                 const char *message, size_t message_len, const char *data,
                                 size_t data_len);

mcpw_result mcpwgo_progress(mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                            const char *id_str, size_t id_len, double progress, double total,
                            int has_total, const char *message, size_t message_len);

mcpwgo_requested mcpwgo_request_related(mcpw_conn *conn, uint64_t now_ns, uint32_t id_kind,
                                        int64_t id_int, const char *id_str, size_t id_len,
                                        const char *method, size_t method_len,
                                        const char *params, size_t params_len,
                                        uint64_t timeout_ms, uint32_t progress,
                                        uint32_t reset_on_progress);

mcpwgo_requested mcpwgo_retry(mcpw_conn *conn, uint64_t now_ns, int64_t request_id,
                              const char *input_responses, size_t input_responses_len);

mcpw_result mcpwgo_respond_input_required(mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                          const char *id_str, size_t id_len,
                                          const char *input_requests,
                                          size_t input_requests_len,
                                          const char *request_state, size_t request_state_len);

mcpw_result mcpwgo_respond_url_elicitation_required(mcpw_conn *conn, uint32_t id_kind,
                                                    int64_t id_int, const char *id_str,
                                                    size_t id_len, const char *elicitations,
                                                    size_t elicitations_len);

typedef struct mcpwgo_logged {
    mcpw_result rc;
    int sent;
} mcpwgo_logged;

mcpwgo_logged mcpwgo_log(mcpw_conn *conn, uint32_t id_kind, int64_t id_int, const char *id_str,
                         size_t id_len, uint32_t level, const char *logger, size_t logger_len,
                         const char *data, size_t data_len);

typedef struct mcpwgo_era {
    mcpw_result rc;
    uint32_t era;
} mcpwgo_era;

mcpwgo_era mcpwgo_conn_era(const mcpw_conn *conn);

/* Getters that return a view or a small value. */
typedef struct mcpwgo_view {
    mcpw_result rc;
    mcpw_str view;
} mcpwgo_view;

mcpwgo_view mcpwgo_protocol_version(const mcpw_conn *conn);
mcpwgo_view mcpwgo_peer_info(const mcpw_conn *conn);
mcpwgo_view mcpwgo_peer_capabilities(const mcpw_conn *conn);
mcpwgo_view mcpwgo_peer_instructions(const mcpw_conn *conn);

typedef struct mcpwgo_state {
    mcpw_result rc;
    uint32_t state;
    uint32_t role;
    size_t ours;
    size_t peers;
    mcpw_stats stats;
    uint64_t ignored_elicitation_completions;
} mcpwgo_state;

/* State, role, in-flight counts and stats in one crossing. */
mcpwgo_state mcpwgo_conn_status(const mcpw_conn *conn);

typedef struct mcpwgo_limits {
    mcpw_result rc;
    mcpw_limits limits;
} mcpwgo_limits;

mcpwgo_limits mcpwgo_config_get_limits(const mcpw_config *config);

typedef struct mcpwgo_context {
    mcpw_result rc;
    mcpw_request_context context;
} mcpwgo_context;

/* What the peer's request id declared (2026-07-28). */
mcpwgo_context mcpwgo_request_context(const mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                      const char *id_str, size_t id_len);

/* ---- The HTTP server (http.go) ---------------------------------------------------------- */

/* Fills buf from getrandom(2): the engine's session ids. */
void mcpwgo_random(void *user, uint8_t *buf, size_t len);

typedef struct mcpwgo_http_new {
    mcpw_result rc;
    mcpw_http_server *server;
} mcpwgo_http_new;

/* A server with the options Go passes as plain numbers; allowed hosts as one byte string cut
   by `host_lens` (count entries). */
mcpwgo_http_new mcpwgo_http_server_new(const mcpw_config *config, uint64_t idle_ms,
                                       size_t max_sessions, size_t max_body,
                                       size_t event_store, size_t event_store_bytes,
                                       uint64_t retry_ms, uint64_t keepalive_ms,
                                       const char *hosts, const size_t *host_lens,
                                       size_t host_count, const char *tools, size_t tools_len);

/* One request; headers as one byte string of name,value pairs cut by `lens` (2 * count
   entries). The response's views are the server's until its next non-const call. */
typedef struct mcpwgo_http_answer {
    mcpw_result rc;
    mcpw_http_response response;
} mcpwgo_http_answer;

mcpwgo_http_answer mcpwgo_http_handle(mcpw_http_server *server, uint64_t now_ns,
                                      const char *method, size_t method_len,
                                      const char *headers, const size_t *lens, size_t count,
                                      const uint8_t *body, size_t body_len);

mcpwgo_http_answer mcpwgo_http_settle(mcpw_http_server *server, uint64_t stream);

/* The next server event, recorded like mcpwgo_drain's, with its connection's key and view.
   `need` > 0: the arena is too small (the event stays pending in `pending`; come straight
   back with a larger one). */
typedef struct mcpwgo_http_pending {
    mcpw_event event;
    uint64_t key;
    mcpw_conn *conn;
    int has;
} mcpwgo_http_pending;

typedef struct mcpwgo_http_polled {
    mcpw_result rc;
    int empty;
    size_t used;
    size_t need;
    uint64_t key;
    mcpw_conn *conn;
} mcpwgo_http_polled;

mcpwgo_http_polled mcpwgo_http_poll_event(mcpw_http_server *server, mcpwgo_http_pending *p,
                                          mcpwgo_record *record, uint8_t *arena,
                                          size_t arena_cap);

/* mcpwgo_http_handle, then, when the answer is a stream, its first event polled as
   mcpwgo_http_poll_event polls it (`polled.empty` when there is none, or no stream): one
   call where a request took two. */
typedef struct mcpwgo_http_handled {
    mcpwgo_http_answer answer;
    mcpwgo_http_polled polled;
} mcpwgo_http_handled;

mcpwgo_http_handled mcpwgo_http_handle_first(mcpw_http_server *server, uint64_t now_ns,
                                             const char *method, size_t method_len,
                                             const char *headers, const size_t *lens,
                                             size_t count, const uint8_t *body,
                                             size_t body_len, mcpwgo_http_pending *p,
                                             mcpwgo_record *record, uint8_t *arena,
                                             size_t arena_cap);

/* The next event, as mcpwgo_http_poll_event polls it; when there is none (or polling
   failed), `settled`: `stream` settled as mcpwgo_http_settle does, and the server's next
   deadline as mcpwgo_http_poll_timeout reads it. One call where a request took three. */
typedef struct mcpwgo_http_next {
    mcpwgo_http_polled polled;
    int settled;
    mcpwgo_http_answer answer;
    mcpwgo_deadline deadline;
} mcpwgo_http_next;

mcpwgo_http_next mcpwgo_http_next_or_settle(mcpw_http_server *server, uint64_t stream,
                                            mcpwgo_http_pending *p, mcpwgo_record *record,
                                            uint8_t *arena, size_t arena_cap);

typedef struct mcpwgo_http_stream {
    mcpw_result rc;
    const uint8_t *bytes;
    size_t len;
    int finished;
    int open;
} mcpwgo_http_stream;

mcpwgo_http_stream mcpwgo_http_poll_stream(mcpw_http_server *server, uint64_t stream);

typedef struct mcpwgo_http_conn {
    mcpw_result rc;
    mcpw_conn *conn;
} mcpwgo_http_conn;

mcpwgo_http_conn mcpwgo_http_server_conn(mcpw_http_server *server, uint64_t key);

/* Up to `cap` of the streams the engine names as changed (mcpw_http_server_poll_woken), in
   one call; fewer than `cap` means the list is drained. */
size_t mcpwgo_http_take_woken(mcpw_http_server *server, uint64_t *ids, size_t cap);

mcpwgo_deadline mcpwgo_http_poll_timeout(const mcpw_http_server *server);

typedef struct mcpwgo_http_closed {
    mcpw_result rc;
    int closed;
} mcpwgo_http_closed;

mcpwgo_http_closed mcpwgo_http_close_for_polling(mcpw_http_server *server, uint64_t key,
                                                 uint32_t id_kind, int64_t id_int,
                                                 const char *id_str, size_t id_len);

/* ---- Raw JSON (json.go) ---------------------------------------------------------------- */

/* A member of a JSON object as an offset into the text: no pointer into Go memory is
 * stored by C. `has` is 0 when the member is absent. */
typedef struct mcpwgo_member {
    mcpw_result rc;
    int has;
    size_t off;
    size_t len;
} mcpwgo_member;

mcpwgo_member mcpwgo_json_member(const char *json, size_t json_len, const char *key,
                                 size_t key_len);

/* Several members of a JSON object in one pass (mcpw_json_get_each): `keys` holds the `n`
 * keys back to back, `key_lens` their lengths; member i is written as offs[i] and lens[i],
 * with offs[i] = SIZE_MAX when it is absent. At most 64 keys. */
mcpw_result mcpwgo_json_members(const char *json, size_t json_len, const char *keys,
                                const size_t *key_lens, size_t n, size_t *offs, size_t *lens);

/* ---- The HTTP client (http_client.go) -------------------------------------------------- */

typedef struct mcpwgo_http_client_new {
    mcpw_result rc;
    mcpw_http_client *client;
} mcpwgo_http_client_new;

mcpwgo_http_client_new mcpwgo_http_client_create(const mcpw_config *config, uint64_t now_ns,
                                                 uint64_t initial_delay_ms,
                                                 uint64_t max_delay_ms, uint32_t max_attempts,
                                                 int open_get_stream);

/* The client's next event, recorded like mcpwgo_drain's (see mcpwgo_http_poll_event). */
mcpwgo_http_polled mcpwgo_http_client_poll_event(mcpw_http_client *client,
                                                 mcpwgo_http_pending *p, mcpwgo_record *record,
                                                 uint8_t *arena, size_t arena_cap);

typedef struct mcpwgo_http_action {
    mcpw_result rc;
    mcpw_http_action action;
} mcpwgo_http_action;

mcpwgo_http_action mcpwgo_http_client_poll_action(mcpw_http_client *client);

/* A response head; headers as in mcpwgo_http_handle. */
mcpw_result mcpwgo_http_client_response(mcpw_http_client *client, uint64_t now_ns,
                                        uint64_t exchange, uint16_t status,
                                        const char *headers, const size_t *lens, size_t count);

typedef struct mcpwgo_http_client_conn {
    mcpw_result rc;
    mcpw_conn *conn;
} mcpwgo_http_client_conn;

mcpwgo_http_client_conn mcpwgo_http_client_view(mcpw_http_client *client);

mcpwgo_deadline mcpwgo_http_client_deadline(const mcpw_http_client *client);

/* ---- Tasks (tasks.go) ------------------------------------------------------------------ */

typedef struct mcpwgo_tasks_made {
    mcpw_result rc;
    mcpw_tasks *tasks;
} mcpwgo_tasks_made;

/* A table from mcpw_task_config_default() with the non-zero fields replaced; `has_ttl` set
   replaces ttl_ms too (0: no limit). */
mcpwgo_tasks_made mcpwgo_tasks_new(uint64_t now_ns, uint64_t unix_ms, size_t max_tasks,
                                   int has_ttl, uint64_t ttl_ms, uint64_t poll_interval_ms,
                                   size_t max_input_requests, size_t max_payload,
                                   size_t max_tasks_per_owner);

/* A new task with an id from getrandom(2) (mcpwgo_random); the id is the table's view. */
mcpwgo_view mcpwgo_tasks_create(mcpw_tasks *tasks, uint64_t now_ns);

mcpw_result mcpwgo_tasks_respond(mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                 const char *id_str, size_t id_len, const mcpw_tasks *tasks,
                                 const char *task, size_t task_len);

/* A task's status and whether its cancellation was requested, in one crossing. */
typedef struct mcpwgo_task_state {
    mcpw_result rc;
    uint32_t status;
    int cancel_requested;
} mcpwgo_task_state;

mcpwgo_task_state mcpwgo_tasks_state(const mcpw_tasks *tasks, const char *task, size_t task_len);

typedef struct mcpwgo_served {
    mcpw_result rc;
    int served;
} mcpwgo_served;

mcpwgo_served mcpwgo_tasks_serve(mcpw_tasks *tasks, uint64_t now_ns, mcpw_conn *conn,
                                 uint32_t id_kind, int64_t id_int, const char *id_str,
                                 size_t id_len, const char *method, size_t method_len,
                                 const char *params, size_t params_len);

/* A new 2025-11-25 task for `owner`, as mcpwgo_tasks_create. */
mcpwgo_view mcpwgo_tasks_create_legacy(mcpw_tasks *tasks, uint64_t now_ns, uint64_t owner);

mcpwgo_served mcpwgo_tasks_serve_legacy(mcpw_tasks *tasks, uint64_t now_ns, uint64_t owner,
                                        mcpw_conn *conn, uint32_t id_kind, int64_t id_int,
                                        const char *id_str, size_t id_len, const char *method,
                                        size_t method_len, const char *params,
                                        size_t params_len);

/* The next 2025-11-25 tasks/result to answer; its views are the table's until its next
   non-const call. */
typedef struct mcpwgo_task_result_polled {
    mcpw_result rc;
    mcpw_task_result result;
} mcpwgo_task_result_polled;

mcpwgo_task_result_polled mcpwgo_tasks_poll_result(mcpw_tasks *tasks);

/* The next task event; its views are the table's until its next non-const call. */
typedef struct mcpwgo_task_polled {
    mcpw_result rc;
    mcpw_task_event event;
} mcpwgo_task_polled;

mcpwgo_task_polled mcpwgo_tasks_poll_event(mcpw_tasks *tasks);

mcpwgo_deadline mcpwgo_tasks_poll_timeout(const mcpw_tasks *tasks);

/* A non-NULL pointer for text that is present but empty. */
extern const char mcpwgo_empty[1];

/* One message of mcpw_decode with its views as offsets into the frame (len -1: absent), in
 * the order id string, method, params, result, message, data. */
enum { MCPWGO_MSG_VIEWS = 6 };

typedef struct mcpwgo_message {
    uint32_t kind;
    uint32_t id_kind;
    int64_t id_int;
    int64_t code;
    uint64_t offset;
    uint32_t reason;
    uint32_t escaped; /* 1: the method holds escapes; 2: the message does */
    uint64_t off[MCPWGO_MSG_VIEWS];
    int64_t len[MCPWGO_MSG_VIEWS];
} mcpwgo_message;

typedef struct mcpwgo_decoded {
    mcpw_result rc;
    size_t count; /* the frame's messages (written: at most the capacity) */
    int batch;
} mcpwgo_decoded;

mcpwgo_decoded mcpwgo_decode(const uint8_t *frame, size_t len, mcpwgo_message *out, size_t cap);

#endif
