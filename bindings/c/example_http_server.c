/*
 * An MCP server over Streamable HTTP in plain C: mcpwire for the protocol, libmicrohttpd for
 * HTTP, one thread, one event loop that the host owns.
 *
 * It speaks both protocol eras on one endpoint, http://127.0.0.1:PORT/mcp: handshake-era
 * sessions (2024-11-05 ... 2025-11-25, with Mcp-Session-Id, SSE streams, resumption with
 * Last-Event-ID) and stateless 2026-07-28 requests; --legacy serves the handshake era only.
 * It serves what the stdio example serves, plus some tools of the conformance suite:
 *   - tool "echo" {text}: returns the text exactly;
 *   - tool "add" {a, b}: returns the sum of the two numbers as text;
 *   - tool "count": reports progress 1/3, 2/3, 3/3 about 50 ms apart, then answers;
 *   - tool "test_simple_text": a fixed text;
 *   - tool "test_tool_with_progress": progress 0, 50, 100 of 100, 50 ms apart, then answers;
 *   - tool "test_missing_capability": needs the client's sampling capability; without it the
 *     answer is the spec's MissingRequiredClientCapability error (-32021, HTTP 400);
 *   - tools "test_error_handling" (an isError result), "test_logging_tool" (logs at info
 *     where the request asked for logs) and "test_streaming_elicitation" (2026-07-28: asks
 *     for a name with an "input required" answer, then thanks the retry);
 *   - resource "mem://greeting" (text/plain);
 *   - prompt "greet".
 *
 * How the pieces meet:
 *   - libmicrohttpd runs in "external select" mode: each turn of the loop asks it for its file
 *     descriptors and timeout (MHD_get_fdset2, MHD_get_timeout), waits in select() for at
 *     most the earliest of its timeout, the engine's deadline (mcpw_http_server_poll_timeout)
 *     and our own tool timers, then lets it run (MHD_run_from_select). Where libmicrohttpd
 *     has epoll (Linux), it watches its sockets itself and hands the loop one descriptor, so
 *     clients are bounded by the process's descriptor limit (raised to its hard limit, at
 *     most MAX_CONNECTIONS) instead of select()'s FD_SETSIZE (about 1,000).
 *   - Each complete HTTP request goes to mcpw_http_server_handle_request, which says what to
 *     answer. A request that produced MCP events (a JSON-RPC request) is answered at once
 *     where possible; mcpw_http_server_settle then turns an already complete answer into a
 *     plain JSON body, or leaves an SSE stream.
 *   - An SSE stream is a libmicrohttpd "callback" response: its reader copies what
 *     mcpw_http_server_poll_stream lends, and when nothing is ready it suspends the HTTP
 *     connection. After every turn, the streams the engine names (mcpw_http_server_poll_woken)
 *     are resumed, and every stream now and then (a heartbeat). A reader only
 *     runs when the socket can take more, so a slow client slows its own stream down: the
 *     engine keeps its answers (bounded by its output limit) instead of this process
 *     buffering without end.
 *   - A client that goes away before its stream finished is reported with
 *     mcpw_http_server_stream_closed (2026-07-28: that cancels its request). An idle stream
 *     writes nothing that could fail, so at each heartbeat the socket of every suspended
 *     stream is peeked at for the end of its input.
 *   - SIGINT/SIGTERM stop accepting, end 2026-07-28 listen streams, give open answers up to
 *     two seconds (--shutdown-grace-ms) to finish, then exit 0. Meanwhile a kept-alive
 *     connection is closed once it is idle: a request already on its way is still answered
 *     (with Connection: close), others are not waited for. (Below half the connection cap,
 *     one whose request line was not yet whole at the signal looks idle, and its client gets
 *     the closed connection that HTTP clients must expect of idle keep-alive connections:
 *     telling it apart would take the connection's byte count after every request, about 6%
 *     of the throughput, measured.) Past the grace, every request still awaited gets an
 *     error answer (-32603) on its stream, and a second to write it
 *     (mcpw_http_server_abandon_streams): its client learns at once that no answer will
 *     come, instead of waiting for its own time-out.
 *
 * Usage: example_http_server [--port N] [--legacy] [--keepalive-ms N] [--body-timeout-ms N]
 *                            [--min-body-rate N] [--body-rate-grace-ms N]
 *                            [--head-timeout-ms N] [--max-connections N] [--max-output N]
 *                            [--max-body-total N] [--shutdown-grace-ms N]
 *                            [--allow-host NAME]...
 *   --port 0 (the default) picks a free port. --keepalive-ms sets how often a quiet SSE
 *   stream gets a keep-alive comment (default 15000; 0 means never). --body-timeout-ms bounds
 *   the time from a request's head to the end of its body (default 30000): a client that
 *   trickles its body past it, or sends none, is cut off (libmicrohttpd's own timeout
 *   restarts at every byte). --min-body-rate (bytes a second, default 240; 0: none) cuts a
 *   body off sooner: once --body-rate-grace-ms (default 5000) have passed since its head, it
 *   must have come at least that fast on average, as Kestrel's MinRequestBodyDataRate asks
 *   (a connection in a request is never displaced at the cap, so slow bodies could hold
 *   every slot for the whole body timeout). --head-timeout-ms bounds the wait for a whole
 *   request head, on a new connection and between the requests of a kept-alive one (default
 *   10000): a later head, however it trickles, gets its connection closed. --max-connections
 *   caps the clients served at once (default: as many as the descriptor limit allows, at most
 *   MAX_CONNECTIONS); at the cap a new client displaces the connection that has waited
 *   longest for a request head, and waits its turn only when every connection is in a
 *   request. --max-output bounds the bytes one session's (or stateless request's) output may
 *   hold before the engine pushes back with MCPW_ERR_OUTPUT_FULL (default 16 MiB); answers
 *   and progress refused then are given again a little later, never dropped.
 *   --max-body-total bounds the bytes that the request bodies being read hold together
 *   (default 64 MiB, at least MAX_BODY + 1): a body that would go past it gets 503 with
 *   Retry-After: 1 (read and dropped, then the connection closed), where otherwise every
 *   connection could hold MAX_BODY at once. --shutdown-grace-ms sets the time open answers
 *   get to finish after SIGINT/SIGTERM (default 2000). The first line on stdout is
 *   "listening on http://127.0.0.1:PORT/mcp".
 *   --allow-host accepts a Host/Origin besides loopback (DNS rebinding protection refuses
 *   every other one with 403).
 *
 * Build: make -C bindings/c (libmicrohttpd-dev from Debian; see .ci/setup-debian).
 */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#ifdef __linux__
#define _GNU_SOURCE /* POLLRDHUP */
#endif

#include "mcpwire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#ifdef __linux__
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received (Linux 4.1 and later) */
#include <stddef.h>
#endif

#define S(lit) (lit), (sizeof(lit) - 1)
#define STEP_NS (50ull * 1000 * 1000)
#define MAX_BODY (4u * 1024 * 1024)
/* A body over MAX_BODY is still read, and dropped, up to this size, so that a client still
   uploading reads the 413 instead of a reset connection; a larger one is refused at once. */
#define DISCARD_LIMIT (4ull * MAX_BODY)
#define MAX_HEADERS 128
#define MAX_ALLOWED_HOSTS 16
#define SHUTDOWN_GRACE_NS (2000ull * 1000 * 1000)
/* After the grace: the time to write the error answers of the requests given up. */
#define LAST_WRITE_NS (1000ull * 1000 * 1000)
/* Suspended streams are looked at this often: each is asked for bytes, and its socket is
   checked for a client that went away (libmicrohttpd does not watch a suspended connection,
   and an idle stream writes nothing that could fail). */
#define HEARTBEAT_NS (1000ull * 1000 * 1000)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Setup errors end the program; errors of one request or session never do. */
static void die(const char *what, mcpw_result rc) {
    fprintf(stderr, "example_http_server: %s: %s\n", what, mcpw_result_message((int)rc));
    exit(EXIT_FAILURE);
}

static void warn(const char *what, mcpw_result rc) {
    fprintf(stderr, "example_http_server: %s: %s\n", what, mcpw_result_message((int)rc));
}

static void *checked_malloc(size_t size) {
    void *p = malloc(size);
    if (p == NULL) {
        fprintf(stderr, "example_http_server: out of memory\n");
        exit(EXIT_FAILURE);
    }
    return p;
}

/* The engine draws session ids from here: they must be unguessable. */
static void secure_random(void *user, uint8_t *buf, size_t len) {
    size_t done = 0;
    (void)user;
    while (done < len) {
        ssize_t n = getrandom(buf + done, len - done, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("example_http_server: getrandom");
            abort(); /* no secure randomness: session ids would be guessable */
        }
        done += (size_t)n;
    }
}

static mcpw_http_server *server;
static volatile sig_atomic_t stop_requested;
/* The loop has begun to stop: every response queued from then on closes its connection. */
static int stopping;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* ---- Owned ids and delayed tool jobs --------------------------------------------------------- */

/* An event's id is a view that dies with the event: a job that answers later keeps a copy,
   with the key of its connection (the session, or the stateless request). */
typedef struct {
    mcpw_id id;
    char *text; /* owns id.string.ptr for string ids */
} owned_id;

static owned_id own_id(const mcpw_id *id) {
    owned_id o;
    o.id = *id;
    o.text = NULL;
    if (id->kind == MCPW_ID_STRING) {
        o.text = checked_malloc(id->string.len + 1);
        if (id->string.len > 0) memcpy(o.text, id->string.ptr, id->string.len);
        o.id.string.ptr = o.text;
    }
    return o;
}

static int same_id(const mcpw_id *a, const mcpw_id *b) {
    if (a->kind != b->kind) return 0;
    if (a->kind == MCPW_ID_INT) return a->integer == b->integer;
    return a->string.len == b->string.len &&
           (a->string.len == 0 || memcmp(a->string.ptr, b->string.ptr, a->string.len) == 0);
}

/* JOB_ANSWER: an answer the engine refused with MCPW_ERR_OUTPUT_FULL (the client is not
   reading what its session already has to say), given again a little later. */
typedef enum { JOB_COUNT, JOB_PROGRESS_100, JOB_ANSWER } job_kind;

/* How a JOB_ANSWER answers: a result, an error (`code` and `answer` as its message), or an
   "input required" result (2026-07-28). */
typedef enum { ANSWER_RESULT, ANSWER_ERROR, ANSWER_INPUT } answer_kind;

typedef struct job {
    uint64_t key;
    owned_id request;
    job_kind kind;
    int step;
    uint64_t due_ns;
    /* JOB_ANSWER: what to give, copied (`data`: an error's data, or NULL). */
    answer_kind how;
    int64_t code;
    char *answer;
    size_t answer_len;
    char *data;
    size_t data_len;
    struct job *next;
} job;

static job *jobs;

static void job_free(job *j) {
    free(j->request.text);
    free(j->answer);
    free(j->data);
    free(j);
}

static job *start_job(uint64_t key, const mcpw_id *id, job_kind kind, uint64_t now) {
    job *j = checked_malloc(sizeof *j);
    j->key = key;
    j->request = own_id(id);
    j->kind = kind;
    j->step = 0;
    j->due_ns = now + STEP_NS;
    j->how = ANSWER_RESULT;
    j->code = 0;
    j->answer = NULL;
    j->answer_len = 0;
    j->data = NULL;
    j->data_len = 0;
    j->next = jobs;
    jobs = j;
    return j;
}

/* The connection whose request on_mcp_request is answering, for an answer refused for now
   (respond queues it as a JOB_ANSWER of that connection). */
static uint64_t answering_key;

/* Gives an answer: a result, an error (with `data`, if not NULL) or an "input required"
   result. */
static mcpw_result give(mcpw_conn *conn, const mcpw_id *id, answer_kind how, int64_t code,
                        const char *text, size_t len, const char *data, size_t data_len) {
    switch (how) {
    case ANSWER_ERROR:
        return mcpw_conn_respond_error(conn, id, code, text, len, data, data_len);
    case ANSWER_INPUT:
        return mcpw_conn_respond_input_required(conn, id, text, len, NULL, 0);
    default:
        return mcpw_conn_respond(conn, id, text, len);
    }
}

/* Gives an answer now, or, when the client is not reading what its session already has to
   say (MCPW_ERR_OUTPUT_FULL), again a little later: never dropped. Returns the engine's
   verdict (MCPW_OK for an answer queued). */
static mcpw_result give_or_queue(mcpw_conn *conn, const mcpw_id *id, answer_kind how,
                                 int64_t code, const char *text, size_t len, const char *data,
                                 size_t data_len) {
    mcpw_result rc = give(conn, id, how, code, text, len, data, data_len);
    if (rc == MCPW_ERR_OUTPUT_FULL) {
        job *j = start_job(answering_key, id, JOB_ANSWER, now_ns());
        j->how = how;
        j->code = code;
        j->answer = checked_malloc(len + 1);
        if (len > 0) memcpy(j->answer, text, len);
        j->answer_len = len;
        if (data != NULL) {
            j->data = checked_malloc(data_len + 1);
            if (data_len > 0) memcpy(j->data, data, data_len);
            j->data_len = data_len;
        }
        return MCPW_OK;
    }
    return rc;
}

static void cancel_job(uint64_t key, const mcpw_id *id) {
    job **at = &jobs;
    while (*at != NULL) {
        if ((*at)->key == key && same_id(&(*at)->request.id, id)) {
            job *gone = *at;
            *at = gone->next;
            job_free(gone);
            return;
        }
        at = &(*at)->next;
    }
}

/* One step of a job: 1 when it is finished (answered, or its request is gone). */
static int job_step(job *j, mcpw_conn *conn, uint64_t now) {
    double progress, total;
    const char *answer;
    size_t answer_len;
    mcpw_result rc;
    if (j->kind == JOB_ANSWER) {
        rc = give(conn, &j->request.id, j->how, j->code, j->answer, j->answer_len, j->data,
                  j->data_len);
        if (rc == MCPW_ERR_OUTPUT_FULL) {
            /* Backpressure: the answer is tried again a little later, never dropped. */
            j->due_ns = now + STEP_NS;
            return 0;
        }
        if (rc != MCPW_OK && rc != MCPW_ERR_UNKNOWN_REQUEST && rc != MCPW_ERR_CLOSED) {
            warn("respond", rc);
        }
        return 1;
    }
    if (j->kind == JOB_COUNT) {
        progress = (double)(j->step + 1);
        total = 3;
        answer = "{\"content\":[{\"type\":\"text\",\"text\":\"counted to 3\"}],\"isError\":false}";
    } else {
        progress = 50.0 * (double)j->step;
        total = 100;
        answer = "{\"content\":[{\"type\":\"text\",\"text\":\"Progress test completed\"}],"
                 "\"isError\":false}";
    }
    rc = mcpw_conn_progress(conn, &j->request.id, progress, total, true, NULL, 0);
    if (rc == MCPW_ERR_OUTPUT_FULL) {
        /* The client is not reading its stream: try this step again a little later. */
        j->due_ns = now + STEP_NS;
        return 0;
    }
    /* No progress token: the client did not ask for progress, which is fine. Anything
       else means the request is gone (cancelled, or its connection closed). */
    if (rc != MCPW_OK && rc != MCPW_ERR_NO_PROGRESS_TOKEN) return 1;
    j->step++;
    if (progress < total) {
        j->due_ns = now + STEP_NS;
        return 0;
    }
    /* Every step is out: the job becomes its answer, given now (or, with the output full,
       again later, as any answer refused for now). */
    answer_len = strlen(answer);
    j->kind = JOB_ANSWER;
    j->answer = checked_malloc(answer_len + 1);
    memcpy(j->answer, answer, answer_len);
    j->answer_len = answer_len;
    return job_step(j, conn, now);
}

static void run_jobs(uint64_t now) {
    job **at = &jobs;
    while (*at != NULL) {
        job *j = *at;
        mcpw_conn *conn;
        mcpw_result rc;
        if (j->due_ns > now) {
            at = &j->next;
            continue;
        }
        rc = mcpw_http_server_conn(server, j->key, &conn);
        if (rc != MCPW_OK || job_step(j, conn, now)) {
            *at = j->next; /* done, or its session / request is gone */
            job_free(j);
            continue;
        }
        at = &j->next;
    }
}

static uint64_t earliest_job(void) {
    uint64_t earliest = UINT64_MAX;
    const job *j;
    for (j = jobs; j != NULL; j = j->next) {
        if (j->due_ns < earliest) earliest = j->due_ns;
    }
    return earliest;
}

/* ---- The MCP application ------------------------------------------------------------------ */

static const char TOOLS[] =
    "{\"tools\":["
    "{\"name\":\"echo\",\"description\":\"Returns its text argument\",\"inputSchema\":"
    "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]}},"
    "{\"name\":\"add\",\"description\":\"Adds two numbers\",\"inputSchema\":"
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"}},"
    "\"required\":[\"a\",\"b\"]}},"
    "{\"name\":\"count\",\"description\":\"Counts to three, reporting progress\",\"inputSchema\":"
    "{\"type\":\"object\",\"properties\":{}}},"
    "{\"name\":\"test_simple_text\",\"description\":\"Returns a simple text response\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{}}},"
    "{\"name\":\"test_tool_with_progress\",\"description\":\"Reports progress, then answers\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{}}},"
    "{\"name\":\"test_missing_capability\",\"description\":\"Needs the client's sampling "
    "capability\",\"inputSchema\":{\"type\":\"object\",\"properties\":{}}},"
    "{\"name\":\"test_error_handling\",\"description\":\"Always fails with an isError result\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{}}},"
    "{\"name\":\"test_logging_tool\",\"description\":\"Logs at info while it runs\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{}}},"
    "{\"name\":\"test_streaming_elicitation\",\"description\":\"Asks the user for input "
    "(2026-07-28: an input-required answer)\",\"inputSchema\":{\"type\":\"object\","
    "\"properties\":{}}}]}";
static const char RESOURCES[] =
    "{\"resources\":[{\"uri\":\"mem://greeting\",\"name\":\"greeting\",\"mimeType\":\"text/plain\"}]}";
static const char GREETING[] =
    "{\"contents\":[{\"uri\":\"mem://greeting\",\"mimeType\":\"text/plain\","
    "\"text\":\"Hello from mcpwire, in C\"}]}";
static const char PROMPTS[] =
    "{\"prompts\":[{\"name\":\"greet\",\"description\":\"Say hello\"}]}";
static const char PROMPT[] =
    "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"text\",\"text\":\"Say hello to "
    "mcpwire.\"}}]}";
static const char SIMPLE_TEXT[] =
    "{\"content\":[{\"type\":\"text\",\"text\":\"This is a simple text response for testing.\"}],"
    "\"isError\":false}";

static int str_is(mcpw_str s, const char *text) {
    size_t n = strlen(text);
    return s.ptr != NULL && s.len == n && memcmp(s.ptr, text, n) == 0;
}

/* The text of a short JSON string (a tool's name, a URI), escapes decoded; `len` is SIZE_MAX
   when it is absent, no string, or longer than 128 bytes. Compare names as text, not as
   JSON: a client may escape any character ("ech\u006f" is "echo"). */
typedef struct {
    char text[128];
    size_t len;
} short_text;

static short_text json_text(mcpw_str json) {
    short_text t;
    if (json.ptr == NULL ||
        mcpw_json_string(json.ptr, json.len, t.text, sizeof t.text, &t.len) != MCPW_OK ||
        t.len > sizeof t.text) {
        t.len = SIZE_MAX;
    }
    return t;
}

static int text_is(const short_text *t, const char *text) {
    size_t n = strlen(text);
    return t->len == n && memcmp(t->text, text, n) == 0;
}

static int json_text_is(mcpw_str json, const char *text) {
    short_text t = json_text(json);
    return text_is(&t, text);
}

/* The member `key` of the JSON object `json` (absent when `json` is absent or no object). */
static mcpw_str member(mcpw_str json, const char *key) {
    mcpw_str value = {NULL, 0};
    if (json.ptr == NULL || mcpw_json_get(json.ptr, json.len, key, strlen(key), &value) != MCPW_OK) {
        value.ptr = NULL;
        value.len = 0;
    }
    return value;
}

/* The members `k1` and `k2` of the JSON object `json` in one pass (mcpw_json_get_each reads
   the text once, where two mcpw_json_get calls would read it twice); both absent when `json`
   is absent or no object. */
static void member_pair(mcpw_str json, const char *k1, const char *k2, mcpw_str out[2]) {
    mcpw_str keys[2] = {{k1, strlen(k1)}, {k2, strlen(k2)}};
    if (json.ptr == NULL || mcpw_json_get_each(json.ptr, json.len, keys, 2, out) != MCPW_OK) {
        out[0].ptr = out[1].ptr = NULL;
        out[0].len = out[1].len = 0;
    }
}

/* Answers are refused only when the request is already gone (cancelled, client away):
   worth a line on stderr, never the end of the server. One refused because the client does
   not read (output full) is given again later (give_or_queue). */
static void respond(mcpw_conn *conn, const mcpw_id *id, const char *json, size_t len) {
    mcpw_result rc = give_or_queue(conn, id, ANSWER_RESULT, 0, json, len, NULL, 0);
    if (rc != MCPW_OK) warn("respond", rc);
}

static void respond_error(mcpw_conn *conn, const mcpw_id *id, int64_t code, const char *message) {
    mcpw_result rc =
        give_or_queue(conn, id, ANSWER_ERROR, code, message, strlen(message), NULL, 0);
    if (rc != MCPW_OK) warn("respond_error", rc);
}

/* echo: the text comes back exactly, copied as the raw JSON string it arrived as. */
static void call_echo(mcpw_conn *conn, const mcpw_id *id, mcpw_str arguments) {
    static const char head[] = "{\"content\":[{\"type\":\"text\",\"text\":";
    static const char tail[] = "}],\"isError\":false}";
    mcpw_str text = member(arguments, "text");
    char *result;
    size_t len;
    if (text.ptr == NULL || text.len == 0 || text.ptr[0] != '"') {
        respond(conn, id, S("{\"content\":[{\"type\":\"text\",\"text\":\"echo needs a string "
                            "argument 'text'\"}],\"isError\":true}"));
        return;
    }
    len = sizeof head - 1 + text.len + sizeof tail - 1;
    result = checked_malloc(len);
    memcpy(result, head, sizeof head - 1);
    memcpy(result + sizeof head - 1, text.ptr, text.len);
    memcpy(result + sizeof head - 1 + text.len, tail, sizeof tail - 1);
    respond(conn, id, result, len);
    free(result);
}

/* A JSON number argument as a double: 0 when `raw` is absent, not a number, or beyond a
   double's range. mcpw_json_number reads it as JSON does, whatever the C locale's decimal
   point (strtod would read "2.5" as 2 under a locale that writes "2,5"). */
static int number_arg(mcpw_str raw, double *out) {
    return raw.ptr != NULL && mcpw_json_number(raw.ptr, raw.len, out) == MCPW_OK;
}

/* add: the sum of the numbers a and b, as text ("5" for 2 + 3: whole sums print without a
   fraction). */
static void call_add(mcpw_conn *conn, const mcpw_id *id, mcpw_str arguments) {
    char result[128];
    double a, b, sum;
    int len;
    mcpw_str ab[2];
    member_pair(arguments, "a", "b", ab);
    if (!number_arg(ab[0], &a) || !number_arg(ab[1], &b)) {
        respond(conn, id, S("{\"content\":[{\"type\":\"text\",\"text\":\"add needs numbers "
                            "'a' and 'b'\"}],\"isError\":true}"));
        return;
    }
    sum = a + b;
    if (sum == floor(sum) && fabs(sum) < 1e15) {
        len = snprintf(result, sizeof result,
                       "{\"content\":[{\"type\":\"text\",\"text\":\"%.0f\"}],\"isError\":false}", sum);
    } else {
        len = snprintf(result, sizeof result,
                       "{\"content\":[{\"type\":\"text\",\"text\":\"%.17g\"}],\"isError\":false}", sum);
    }
    respond(conn, id, result, (size_t)len);
}

/* Whether the client declared `sampling`: per request in 2026-07-28 (the request's own
   declaration), per session in the handshake era. */
static int client_can_sample(const mcpw_conn *conn, const mcpw_id *id) {
    mcpw_request_context context;
    mcpw_str caps;
    if (mcpw_conn_request_context(conn, id, &context) == MCPW_OK && context.known) {
        return (context.client_capabilities & MCPW_CAP_SAMPLING) != 0;
    }
    if (mcpw_conn_peer_capabilities(conn, &caps) != MCPW_OK) return 0;
    return member(caps, "sampling").ptr != NULL;
}

static void call_needs_sampling(mcpw_conn *conn, const mcpw_id *id) {
    static const char data[] = "{\"requiredCapabilities\":{\"sampling\":{}}}";
    static const char message[] = "Missing required client capability: sampling";
    mcpw_result rc;
    if (client_can_sample(conn, id)) {
        respond(conn, id, S("{\"content\":[{\"type\":\"text\",\"text\":\"The client declared "
                            "sampling\"}],\"isError\":false}"));
        return;
    }
    rc = give_or_queue(conn, id, ANSWER_ERROR, -32021, S(message), S(data));
    if (rc == MCPW_ERR_CODE_NOT_IN_VERSION) {
        /* -32021 is a 2026-07-28 code: a session gets a tool error instead. */
        respond(conn, id, S("{\"content\":[{\"type\":\"text\",\"text\":\"This tool needs the "
                            "client's sampling capability\"}],\"isError\":true}"));
    } else if (rc != MCPW_OK) {
        warn("respond_error", rc);
    }
}

/* test_streaming_elicitation, 2026-07-28: the question goes back as an "input required"
   answer (on the request's own stream, never as a request of ours), and the client's retry
   carries the answer in inputResponses. A session (or a client that cannot elicit) gets a
   tool error instead. */
static void call_streaming_elicitation(mcpw_conn *conn, const mcpw_id *id, mcpw_str params) {
    static const char ask[] =
        "{\"input\":{\"method\":\"elicitation/create\",\"params\":{\"mode\":\"form\","
        "\"message\":\"Please provide your name\",\"requestedSchema\":{\"type\":\"object\","
        "\"properties\":{\"name\":{\"type\":\"string\"}},\"required\":[\"name\"]}}}}";
    mcpw_result rc;
    if (member(params, "inputResponses").ptr != NULL) {
        respond(conn, id, S("{\"content\":[{\"type\":\"text\",\"text\":\"Thank you for "
                            "your input\"}],\"isError\":false}"));
        return;
    }
    rc = give_or_queue(conn, id, ANSWER_INPUT, 0, S(ask), NULL, 0);
    if (rc != MCPW_OK) {
        respond(conn, id, S("{\"content\":[{\"type\":\"text\",\"text\":\"This tool needs a "
                            "2026-07-28 client that can elicit\"}],\"isError\":true}"));
    }
}

static void on_mcp_request(mcpw_conn *conn, uint64_t key, const mcpw_event *ev, uint64_t now) {
    /* The event's views die at the next command on the connection (mcpwire.h), and a
       handler may give more than one (a progress update, then the answer): the id is copied
       first. The params are read before any command. */
    owned_id own = own_id(&ev->id);
    const mcpw_id *id = &own.id;
    answering_key = key;
    /* Every list fits on one page: a cursor is one this server never gave (the spec's
       pagination page: -32602). */
    if ((str_is(ev->method, "tools/list") || str_is(ev->method, "resources/list") ||
         str_is(ev->method, "resources/templates/list") || str_is(ev->method, "prompts/list")) &&
        member(ev->params, "cursor").ptr != NULL) {
        respond_error(conn, id, MCPW_JSONRPC_INVALID_PARAMS, "Invalid params: unknown cursor");
    } else if (str_is(ev->method, "tools/list")) {
        respond(conn, id, TOOLS, sizeof TOOLS - 1);
    } else if (str_is(ev->method, "tools/call")) {
        mcpw_str call[2]; /* name, arguments */
        member_pair(ev->params, "name", "arguments", call);
        short_text name = json_text(call[0]);
        if (text_is(&name, "echo")) {
            call_echo(conn, id, call[1]);
        } else if (text_is(&name, "add")) {
            call_add(conn, id, call[1]);
        } else if (text_is(&name, "count")) {
            start_job(key, id, JOB_COUNT, now); /* answered by run_jobs */
        } else if (text_is(&name, "test_simple_text")) {
            respond(conn, id, SIMPLE_TEXT, sizeof SIMPLE_TEXT - 1);
        } else if (text_is(&name, "test_tool_with_progress")) {
            mcpw_result rc = mcpw_conn_progress(conn, id, 0, 100, true, NULL, 0);
            /* (A request the client cancelled meanwhile, MCPW_ERR_UNKNOWN_REQUEST, is no news:
               a 2025-03-26 batch can carry the call and its cancellation.) */
            if (rc != MCPW_OK && rc != MCPW_ERR_NO_PROGRESS_TOKEN && rc != MCPW_ERR_OUTPUT_FULL &&
                rc != MCPW_ERR_UNKNOWN_REQUEST) {
                warn("progress", rc);
            }
            /* The job reports 50 and 100, then answers; and 0 first when that report found
               the output full (given again a little later, never dropped). */
            start_job(key, id, JOB_PROGRESS_100, now)->step = rc == MCPW_ERR_OUTPUT_FULL ? 0 : 1;
        } else if (text_is(&name, "test_missing_capability")) {
            call_needs_sampling(conn, id);
        } else if (text_is(&name, "test_error_handling")) {
            respond(conn, id, S("{\"content\":[{\"type\":\"text\",\"text\":\"This tool "
                                "intentionally returns an error for testing\"}],\"isError\":true}"));
        } else if (text_is(&name, "test_logging_tool")) {
            /* Sent in a session, and in 2026-07-28 only where the request asked for logs
               (its logLevel): either way the server must declare logging, as this one does. */
            bool sent = false;
            mcpw_result rc = mcpw_conn_log(conn, id, MCPW_LOG_INFO, S("test_logging_tool"),
                                           S("\"test_logging_tool ran\""), &sent);
            /* A log is advisory and the answer is what matters: one refused for a full output
               (MCPW_ERR_OUTPUT_FULL) is skipped, not given again, and so is one for a request
               the client cancelled meanwhile (MCPW_ERR_UNKNOWN_REQUEST: a 2025-03-26 batch can
               carry the call and its cancellation). Any other refusal is reported, as the
               other calls here are. */
            if (rc != MCPW_OK && rc != MCPW_ERR_OUTPUT_FULL && rc != MCPW_ERR_UNKNOWN_REQUEST)
                warn("log", rc);
            respond(conn, id, S("{\"content\":[{\"type\":\"text\",\"text\":\"Logging tool "
                                "completed\"}],\"isError\":false}"));
        } else if (text_is(&name, "test_streaming_elicitation")) {
            call_streaming_elicitation(conn, id, ev->params);
        } else {
            /* An unknown tool is a protocol error, as the spec's tools page shows. */
            respond_error(conn, id, MCPW_JSONRPC_INVALID_PARAMS, "Unknown tool");
        }
    } else if (str_is(ev->method, "resources/list")) {
        respond(conn, id, RESOURCES, sizeof RESOURCES - 1);
    } else if (str_is(ev->method, "resources/templates/list")) {
        respond(conn, id, S("{\"resourceTemplates\":[]}"));
    } else if (str_is(ev->method, "resources/read")) {
        if (json_text_is(member(ev->params, "uri"), "mem://greeting")) {
            respond(conn, id, GREETING, sizeof GREETING - 1);
        } else {
            respond_error(conn, id, MCPW_MCP_RESOURCE_NOT_FOUND, "Resource not found");
        }
    } else if (str_is(ev->method, "prompts/list")) {
        respond(conn, id, PROMPTS, sizeof PROMPTS - 1);
    } else if (str_is(ev->method, "logging/setLevel")) {
        /* A session's level (handshake era): every level is sent here, so nothing to keep. */
        respond(conn, id, S("{}"));
    } else if (str_is(ev->method, "prompts/get")) {
        if (json_text_is(member(ev->params, "name"), "greet")) {
            respond(conn, id, PROMPT, sizeof PROMPT - 1);
        } else {
            respond_error(conn, id, MCPW_JSONRPC_INVALID_PARAMS, "Unknown prompt");
        }
    } else {
        respond_error(conn, id, MCPW_JSONRPC_METHOD_NOT_FOUND, "Method not found");
    }
    free(own.text);
}

/* Drains every event of every connection, answering what can be answered now. */
static void serve_events(uint64_t now) {
    for (;;) {
        mcpw_event ev;
        uint64_t key;
        mcpw_conn *conn;
        mcpw_result rc = mcpw_http_server_poll_event(server, &ev, &key, &conn);
        if (rc != MCPW_OK) die("poll_event", rc);
        if (ev.kind == MCPW_EVENT_NONE) return;
        if (ev.kind == MCPW_EVENT_REQUEST) {
            on_mcp_request(conn, key, &ev, now);
        } else if (ev.kind == MCPW_EVENT_PEER_CANCELLED) {
            cancel_job(key, &ev.id);
        }
        /* Ready, notifications, closes, the peer's mistakes: nothing to do here. */
    }
}

/* ---- HTTP requests and their SSE streams ------------------------------------------------------ */

/* One HTTP request, from its first callback until libmicrohttpd is done with it and with its
   response. Live requests are kept in a list, to resume their suspended streams. */
typedef struct request {
    struct MHD_Connection *connection;
    uint64_t started; /* when its head was in (now_ns) */
    char *body;
    size_t body_len, body_cap;
    unsigned long long received; /* body bytes that came, kept or not */
    int counted; /* its connection's bytes received counted once it was whole */
    int busy;    /* its body did not fit in max_body_total: dropped, and answered 503 */
    int settled; /* its body is whole (the final call came), or it was answered before it */
    int has_stream;
    uint64_t stream;
    int ended;     /* the stream finished normally */
    int suspended; /* the reader suspended the connection, waiting for bytes */
    int gone;      /* its client closed or reset the connection while it was suspended */
    int refs;      /* the request itself, and the response reader while it exists */
    struct request *prev, *next;
} request;

static request *live;

/* How long a request's body may take to arrive, from its head (--body-timeout-ms). */
static uint64_t body_timeout_ns = 30000ull * 1000 * 1000;

/* The least average rate, in bytes a second, at which a body must come once its grace since
   the head is over (--min-body-rate, 0: none; --body-rate-grace-ms), as Kestrel's
   MinRequestBodyDataRate. A connection in a request is never displaced at the cap, so
   without it a client could hold a slot a body timeout at a time with a byte now and then.
   The grace lets a client get going; the average runs from the head, so a pause made up for
   is forgiven. At most UINT64_MAX / 1e9, so that body_too_slow multiplies without overflow. */
static uint64_t min_body_rate = 240;
static uint64_t body_rate_grace_ns = 5000ull * 1000 * 1000;

/* Set when on_http cut a body (too slow, or far too large), for the main loop, as
   cut_slow_bodies tells it: a client waiting at the cap gets the slot at once. */
static int slow_body_cut;

/* How long a client may take to send a whole request head, from the moment its connection
   waits for one: once accepted, and after each response (--head-timeout-ms). So it is also
   the idle keep-alive timeout. libmicrohttpd's own timeout restarts at every byte, so a head
   sent a line at a time held its slot for good. */
static uint64_t head_timeout_ns = 10000ull * 1000 * 1000;

/* One TCP connection, from libmicrohttpd's notice that it started to the one that it closed:
   whether it waits for a request head, and since when. */
typedef struct watched {
    int fd;
    int cut;        /* shut down: libmicrohttpd closes it at its next run */
    int waiting;    /* in the waiting list below */
    uint64_t since; /* when it began waiting for a head */
    uint64_t consumed; /* bytes received when its last request was whole (or UNCOUNTED) */
    uint64_t arriving; /* when more were first seen received (0: not yet) */
    int line_in;       /* its next request's first line is in: a head has begun */
    struct watched *prev, *next;
} watched;

/* The connections that wait for a request head (accepted, or between two requests) and are
   not cut, the one waiting longest first: connections in a request are not in it. So the late
   heads are found from the front, and the connection to displace is the first. */
static watched *waiting_first, *waiting_last;

static void stop_waiting(watched *w) {
    if (!w->waiting) return;
    if (w->prev != NULL) w->prev->next = w->next;
    else waiting_first = w->next;
    if (w->next != NULL) w->next->prev = w->prev;
    else waiting_last = w->prev;
    w->prev = w->next = NULL;
    w->waiting = 0;
}

/* The bytes a TCP connection has received in all, read by libmicrohttpd or still in the
   kernel; UINT64_MAX where the kernel cannot tell. */
static uint64_t bytes_received(int fd) {
#ifdef __linux__
    struct tcp_info info;
    socklen_t len = sizeof info;
    memset(&info, 0, sizeof info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
        len >= offsetof(struct tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received)
        return info.tcpi_bytes_received;
#else
    (void)fd;
#endif
    return UINT64_MAX;
}

/* `watched.consumed` when it was not measured (below half the cap, a request is not worth a
   system call for it): to_displace takes what came by its first look as the count. */
#define UNCOUNTED UINT64_MAX

/* How long a request head that has begun to arrive protects its connection from being
   displaced: a client's head comes in one round trip or a few; one that takes longer is slow
   (trickled, perhaps on purpose), and its connection may go. */
#define HEAD_GRACE_NS (1000ull * 1000 * 1000)

/* It waits for a head from now on (at the back of the list). */
static void start_waiting(watched *w) {
    stop_waiting(w);
    if (w->cut || w->fd < 0) return;
    w->since = now_ns();
    w->arriving = 0;
    w->line_in = 0;
    w->prev = waiting_last;
    w->next = NULL;
    if (waiting_last != NULL) waiting_last->next = w;
    else waiting_first = w;
    waiting_last = w;
    w->waiting = 1;
}

/* Connections open (libmicrohttpd's notices), and how many of them are cut but not closed
   yet: libmicrohttpd accepts a new client only once one of those has gone. */
static unsigned open_connections, cut_connections;

/* The most clients at once (--max-connections; at most connection_limit()). */
static unsigned max_connections;

/* Shuts a connection down; libmicrohttpd reads the end of its input and closes it at its
   next run. The descriptor stays libmicrohttpd's (shut down, not closed), so it cannot be
   reused under it. */
static void cut(watched *w) {
    stop_waiting(w);
    shutdown(w->fd, SHUT_RDWR);
    w->cut = 1;
    cut_connections++;
}

/* The connection to displace, NULL when none waits: the one waiting longest whose next
   request has not begun to arrive, or began over HEAD_GRACE_NS ago (a slow head); when every
   waiting connection has a request arriving, the one waiting longest all the same, so that
   heads kept arriving cannot lock new clients out. A head has begun when libmicrohttpd has
   its first line (on_request_line), or when the connection received more bytes than it had
   when its last request was whole: read in part by libmicrohttpd (which keeps the connection
   waiting until the head is whole), or still on the socket. (Measured then, not when the
   request ends: libmicrohttpd may tell of that end only once the next request's first bytes
   wake it.) */
static watched *to_displace(void) {
    uint64_t now = now_ns();
    watched *w;
    for (w = waiting_first; w != NULL; w = w->next) {
        uint64_t received = bytes_received(w->fd);
        char byte;
        if (w->consumed == UNCOUNTED) w->consumed = received;
        if (w->line_in || (received != UINT64_MAX && received > w->consumed)) {
            if (w->arriving == 0) w->arriving = now;
            if (now - w->arriving < HEAD_GRACE_NS) continue;
            return w;
        }
        if (recv(w->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) return w;
    }
    return waiting_first;
}

/* At the cap, libmicrohttpd stops accepting and new clients wait in the kernel's queue:
   behind a cap's worth of silent connections, until --head-timeout-ms. So while the cap is
   reached and some connection waits idle for a head, the loop watches the listening socket
   too; a client knocking there displaces the connection idle longest (as a kept-alive
   connection may be closed between requests). When every connection is in a request, new
   clients wait their turn. */
static bool may_displace(void) {
    return open_connections - cut_connections >= max_connections && to_displace() != NULL;
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    watched *w = *socket_context;
    (void)cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        w = checked_malloc(sizeof *w);
        memset(w, 0, sizeof *w);
        w->fd = info != NULL ? info->connect_fd : -1;
        start_waiting(w);
        *socket_context = w;
        open_connections++;
        return;
    }
    if (w == NULL) return;
    open_connections--;
    if (w->cut) cut_connections--;
    stop_waiting(w);
    free(w);
    *socket_context = NULL;
}

/* The connection's watch, or NULL. */
static watched *watch_of(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info != NULL ? info->socket_context : NULL;
}

/* libmicrohttpd has the first line of a request (its headers may still be arriving): a head
   has begun on this connection, though the bytes that brought it were read already. Without
   this, a head split across segments was seen only from the bytes still unread, or counted
   (which costs a system call per request, made only near the cap): at shutdown, a connection
   below half the cap whose next head had begun to arrive was closed as idle. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *connection) {
    watched *w = watch_of(connection);
    (void)cls;
    (void)uri;
    if (w != NULL) {
        w->line_in = 1;
        if (w->arriving == 0) w->arriving = now_ns();
    }
    return NULL; /* the access handler's first call still finds no request of ours */
}

/* Cuts every connection whose request head is late (at the heartbeat): they are at the
   front of the waiting list. */
static void cut_late_heads(uint64_t now) {
    while (waiting_first != NULL && now - waiting_first->since > head_timeout_ns) {
        cut(waiting_first);
    }
}

#define NS_PER_S 1000000000ull

/* Whether a request whose body is still arriving took too long: past the body timeout, or,
   its grace over, below the minimum rate on average since its head. That is
   received * 1e9 < rate * elapsed, worked out without overflow: the rate times the whole
   seconds, then what is left over compared with the rate times the rest. */
static int body_too_slow(const request *r, uint64_t now) {
    uint64_t elapsed = now > r->started ? now - r->started : 0;
    uint64_t received = (uint64_t)r->received, secs, due, extra;
    if (elapsed > body_timeout_ns) return 1;
    if (min_body_rate == 0 || elapsed <= body_rate_grace_ns) return 0;
    secs = elapsed / NS_PER_S;
    if (secs > 0 && min_body_rate > UINT64_MAX / secs) return 1; /* more than can ever come */
    due = min_body_rate * secs;
    if (received < due) return 1;
    extra = received - due;
    /* The part second asks for fewer than `rate` bytes: `rate` more are always enough, and
       fewer, times 1e9, fit in 64 bits (the rate is bounded for it). */
    if (extra >= min_body_rate) return 0;
    return extra * NS_PER_S < min_body_rate * (elapsed % NS_PER_S);
}

/* Cuts the connection of every request whose body is too slow (at the heartbeat). The check
   in on_http runs only when a piece of the body comes: a client that sends a head and then
   nothing, or stops halfway, would keep its connection until libmicrohttpd's own timeout.
   Requests settled (their body whole, or answered) are left alone: answers and streams take
   as long as they take. Returns how many were cut. */
static int cut_slow_bodies(uint64_t now) {
    request *r;
    int cuts = 0;
    for (r = live; r != NULL; r = r->next) {
        watched *w;
        if (r->settled || !body_too_slow(r, now)) continue;
        w = watch_of(r->connection);
        if (w == NULL || w->cut || w->fd < 0) continue; /* cut already, closed at next run */
        cut(w);
        cuts++;
    }
    return cuts;
}

/* The bytes the bodies being read hold together (their buffers' sizes), and their bound
   (--max-body-total). */
static size_t bodies_held;
static size_t max_body_total = 64u * 1024 * 1024;

/* Frees a request's body buffer, and gives its bytes back to max_body_total. */
static void drop_body(request *r) {
    bodies_held -= r->body_cap;
    free(r->body);
    r->body = NULL;
    r->body_len = r->body_cap = 0;
}

static void release(request *r) {
    if (--r->refs > 0) return;
    drop_body(r);
    free(r);
}

static void unlink_request(request *r) {
    if (r->prev != NULL) r->prev->next = r->next;
    else if (live == r) live = r->next;
    if (r->next != NULL) r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

/* Keeps at most MAX_BODY + 1 bytes: one more than the engine accepts, so that it answers 413
   for a larger body without this process holding it. A body whose buffer would take the
   bodies being read past max_body_total is dropped, as is the rest of it (busy: 503). */
static void append_body(request *r, const char *data, size_t len) {
    size_t room = MAX_BODY + 1 - r->body_len;
    if (len > room) len = room;
    if (len == 0 || r->busy) return;
    if (r->body_len + len > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 4096;
        char *grown;
        while (cap < r->body_len + len) cap *= 2;
        if (cap > MAX_BODY + 1) cap = MAX_BODY + 1;
        if (cap - r->body_cap > max_body_total - bodies_held) {
            r->busy = 1;
            drop_body(r);
            return;
        }
        grown = realloc(r->body, cap);
        if (grown == NULL) {
            fprintf(stderr, "example_http_server: out of memory\n");
            exit(EXIT_FAILURE);
        }
        r->body = grown;
        bodies_held += cap - r->body_cap;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, len);
    r->body_len += len;
}

/* The SSE body: copies what the engine lends; with nothing ready, suspends the connection
   until resume_streams() sees bytes for it. */
static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max) {
    request *r = cls;
    const uint8_t *bytes;
    size_t len, n;
    bool finished, open;
    mcpw_result rc;
    (void)pos;
    /* libmicrohttpd closes the connection, and on_completed tells the engine. */
    if (r->gone) return MHD_CONTENT_READER_END_WITH_ERROR;
    rc = mcpw_http_server_poll_stream(server, r->stream, &bytes, &len, &finished, &open);
    if (rc != MCPW_OK) {
        warn("poll_stream", rc);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (!open) {
        /* Finished and drained earlier, closed for polling, or taken over by the client's
           Last-Event-ID GET (which got a stream id of its own): the response ends here. */
        r->ended = 1;
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (len > 0) {
        n = len < max ? len : max;
        memcpy(buf, bytes, n);
        rc = mcpw_http_server_consume_stream(server, r->stream, n);
        if (rc != MCPW_OK) {
            /* Not taken: the next poll would lend the same bytes again, and the client would
               read them twice. The response ends instead (on_completed tells the engine), and
               the client resumes the stream with Last-Event-ID. */
            warn("consume_stream", rc);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        return (ssize_t)n;
    }
    if (finished) {
        r->ended = 1;
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    MHD_suspend_connection(r->connection);
    r->suspended = 1;
    return 0;
}

static void release_stream(void *cls) {
    release(cls);
}

/* Whether the client of a suspended stream went away: the end of its input (it closed the
   connection) or an error (it was reset). On Linux, poll's POLLRDHUP tells of the end even
   behind bytes not read yet (a request it sent before it left); elsewhere a peek at the socket
   sees the end only when nothing precedes it, and such a client is noticed when a keep-alive
   comment fails. */
static int client_gone(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == NULL) return 0;
#ifdef POLLRDHUP
    {
        struct pollfd p;
        p.fd = info->connect_fd;
        p.events = POLLRDHUP;
        p.revents = 0;
        return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
    }
#else
    {
        char byte;
        ssize_t n = recv(info->connect_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0) return 1;
        return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    }
#endif
}

/* The most clients served at once with epoll. Each costs a descriptor and libmicrohttpd's
   per-connection memory pool (32 KiB by default): near 320 MiB for all. On top of that, a
   request holds its body while it arrives (up to MAX_BODY + 1 bytes, freed once the engine
   has read it; all of them together at most --max-body-total), and a JSON answer is held
   until it is written: lower --max-connections where many clients read slowly. Raise it
   with the descriptor limit for more. */
#define MAX_CONNECTIONS 10000u

static int have_epoll(void) { return MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES; }

static unsigned daemon_flags(void) {
    unsigned flags = MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    /* With epoll, MHD_get_fdset2 gives the loop only libmicrohttpd's epoll descriptor. */
    if (have_epoll()) flags |= MHD_USE_EPOLL;
    return flags;
}

/* How many clients libmicrohttpd accepts at once: select() handles FD_SETSIZE descriptors;
   with epoll the process's descriptor limit counts, raised to the hard limit first (as Go and
   most servers do). Room is kept for the listener, stdio and the tools' own files. */
static unsigned connection_limit(void) {
    struct rlimit limit;
    rlim_t usable;
    if (!have_epoll()) return (unsigned)(FD_SETSIZE - 16);
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return (unsigned)(FD_SETSIZE - 16);
    if (limit.rlim_cur < limit.rlim_max) {
        rlim_t want = limit.rlim_max == RLIM_INFINITY ? MAX_CONNECTIONS + 64 : limit.rlim_max;
        if (want > MAX_CONNECTIONS + 64) want = MAX_CONNECTIONS + 64;
        if (want > limit.rlim_cur) {
            struct rlimit raised = {want, limit.rlim_max};
            if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit.rlim_cur = want;
        }
    }
    usable = limit.rlim_cur == RLIM_INFINITY ? MAX_CONNECTIONS + 64 : limit.rlim_cur;
    if (usable < 128) return 64;
    usable -= 64;
    return usable > MAX_CONNECTIONS ? MAX_CONNECTIONS : (unsigned)usable;
}

static int compare_ids(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Resumes the suspended streams the engine names as changed since the last turn
   (mcpw_http_server_poll_woken), or all of them for the heartbeat, which also marks those
   whose client went away (their reader then ends them). Asking each suspended
   stream instead would cost every turn a poll per open stream: with many clients listening on
   their GET streams, most of each request's cost. Returns how many were resumed. */
static int resume_streams(int all) {
    static uint64_t *named;
    static size_t cap;
    size_t count = 0;
    int resumed = 0;
    request *r;
    for (;;) {
        bool has = false;
        uint64_t stream = 0;
        mcpw_result rc = mcpw_http_server_poll_woken(server, &has, &stream);
        if (rc != MCPW_OK) die("poll_woken", rc);
        if (!has) break;
        if (count == cap) {
            size_t grown_cap = cap ? cap * 2 : 64;
            uint64_t *grown = realloc(named, grown_cap * sizeof *grown);
            if (grown == NULL) {
                fprintf(stderr, "example_http_server: out of memory\n");
                exit(EXIT_FAILURE);
            }
            named = grown;
            cap = grown_cap;
        }
        named[count++] = stream;
    }
    if (count == 0 && !all) return 0;
    if (count > 1) qsort(named, count, sizeof *named, compare_ids);
    for (r = live; r != NULL; r = r->next) {
        if (!r->suspended) continue;
        /* (qsort and bsearch take no NULL array, even an empty one.) */
        if (!all && bsearch(&r->stream, named, count, sizeof *named, compare_ids) == NULL) {
            continue;
        }
        if (all && client_gone(r->connection)) r->gone = 1;
        r->suspended = 0;
        MHD_resume_connection(r->connection);
        resumed++;
    }
    return resumed;
}

/* Collects the request's headers as views into libmicrohttpd's memory (valid during the
   request's callback). */
typedef struct {
    mcpw_http_header items[MAX_HEADERS];
    size_t len;
} header_list;

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      size_t key_size, const char *value, size_t value_size) {
    header_list *h = cls;
    (void)kind;
    if (h->len == MAX_HEADERS) return MHD_NO; /* (more are refused before this runs) */
    h->items[h->len].name.ptr = key;
    h->items[h->len].name.len = key_size;
    h->items[h->len].value.ptr = value != NULL ? value : "";
    h->items[h->len].value.len = value != NULL ? value_size : 0;
    h->len++;
    return MHD_YES;
}

/* libmicrohttpd wants NUL-terminated header strings. */
static void add_header(struct MHD_Response *response, mcpw_http_header h) {
    char *name = checked_malloc(h.name.len + 1);
    char *value = checked_malloc(h.value.len + 1);
    memcpy(name, h.name.ptr, h.name.len);
    name[h.name.len] = '\0';
    if (h.value.len > 0) memcpy(value, h.value.ptr, h.value.len);
    value[h.value.len] = '\0';
    if (MHD_add_response_header(response, name, value) != MHD_YES) {
        fprintf(stderr, "example_http_server: header %s refused\n", name);
    }
    free(name);
    free(value);
}

/* Counts a request's Content-Length fields and notes whether their values differ. */
typedef struct {
    unsigned count;
    const char *first;
    int differ;
} lengths;

static enum MHD_Result count_length(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value) {
    lengths *l = cls;
    (void)kind;
    if (key == NULL || strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0) return MHD_YES;
    if (l->count++ == 0) {
        l->first = value;
    } else if (value == NULL || l->first == NULL || strcmp(value, l->first) != 0) {
        l->differ = 1;
    }
    return MHD_YES;
}

/* Counts a request's Transfer-Encoding fields. */
static enum MHD_Result count_coding(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value) {
    unsigned *n = cls;
    (void)kind;
    (void)value;
    if (key != NULL && strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) (*n)++;
    return MHD_YES;
}

/* The first call, before the body: framing two parsers could read two ways (a proxy in front
   and this server, say) is refused and the connection closed, so that nothing after it on the
   connection is ever read as a request (RFC 9112 §6.1, §6.3). Content-Length fields that
   differ get 400, as does Content-Length beside Transfer-Encoding, and more than one
   Transfer-Encoding field (together they list a coding after chunked, or chunked twice);
   a transfer coding other than chunked gets 501 (libmicrohttpd 0.9.75 read the first of two
   lengths, framed the body by the first of two Transfer-Encoding fields, and left "gzip,
   chunked" unanswered). Returns 1 with *queued set when it answered. */
static int refuse_bad_framing(struct MHD_Connection *connection, enum MHD_Result *queued) {
    static const char bad[] = "ambiguous request framing\n";
    static const char coding[] = "transfer coding not supported\n";
    lengths l = {0, NULL, 0};
    const char *te = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_TRANSFER_ENCODING);
    struct MHD_Response *response;
    unsigned status = 0, codings = 0;
    MHD_get_connection_values(connection, MHD_HEADER_KIND, count_length, &l);
    MHD_get_connection_values(connection, MHD_HEADER_KIND, count_coding, &codings);
    if (l.differ || (te != NULL && l.count > 0) || codings > 1) {
        status = 400;
    } else if (te != NULL && strcasecmp(te, "chunked") != 0) {
        status = 501;
    }
    if (status == 0) return 0;
    response = status == 400
                   ? MHD_create_response_from_buffer(sizeof bad - 1, (void *)bad,
                                                     MHD_RESPMEM_PERSISTENT)
                   : MHD_create_response_from_buffer(sizeof coding - 1, (void *)coding,
                                                     MHD_RESPMEM_PERSISTENT);
    if (response == NULL) {
        *queued = MHD_NO;
        return 1;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    *queued = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return 1;
}

/* The first call, before the body: a Content-Length over DISCARD_LIMIT gets 413 now, and the
   connection is closed, rather than this process reading (and dropping) all of it. A body
   within it is read, what is over MAX_BODY dropped in append_body, and the engine answers
   413 once the body is in (the client, done sending, then reads it). Returns 1 with *queued
   set when it answered. */
static int refuse_declared_oversize(struct MHD_Connection *connection, enum MHD_Result *queued) {
    static const char too_large[] = "body too large\n";
    const char *declared =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    struct MHD_Response *response;
    unsigned long long length;
    char *end;
    if (declared == NULL) return 0;
    errno = 0;
    length = strtoull(declared, &end, 10);
    /* A malformed length is libmicrohttpd's to refuse; an overflowing one is over the limit. */
    if (end == declared || *end != '\0' || *declared == '-') return 0;
    if (errno != ERANGE && length <= DISCARD_LIMIT) return 0;
    response = MHD_create_response_from_buffer(sizeof too_large - 1, (void *)too_large,
                                               MHD_RESPMEM_PERSISTENT);
    if (response == NULL) {
        *queued = MHD_NO;
        return 1;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    *queued = MHD_queue_response(connection, 413, response);
    MHD_destroy_response(response);
    return 1;
}

static enum MHD_Result on_http(void *cls, struct MHD_Connection *connection, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **req_cls) {
    request *r = *req_cls;
    header_list headers;
    mcpw_http_response answer;
    struct MHD_Response *response;
    enum MHD_Result queued;
    uint64_t now;
    mcpw_result rc;
    size_t i;
    (void)cls;
    (void)version;

    if (r == NULL) { /* the first call: headers are in, the body is not */
        watched *w = watch_of(connection);
        if (w != NULL) stop_waiting(w); /* in a request now */
        r = checked_malloc(sizeof *r);
        memset(r, 0, sizeof *r);
        r->connection = connection;
        r->started = now_ns();
        r->refs = 1;
        r->next = live;
        if (live != NULL) live->prev = r;
        live = r;
        *req_cls = r;
        if (refuse_bad_framing(connection, &queued) ||
            refuse_declared_oversize(connection, &queued)) {
            r->settled = 1; /* answered: libmicrohttpd sends it and closes the connection */
            return queued;
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) { /* a piece of the body */
        r->received += *upload_data_size;
        if (body_too_slow(r, now_ns())) {
            slow_body_cut = 1; /* the main loop turns quickly for a client at the cap */
            return MHD_NO;     /* past its time, or too slow: the connection is closed */
        }
        if (r->received > DISCARD_LIMIT) { /* far over the limit: closed */
            slow_body_cut = 1;
            return MHD_NO;
        }
        append_body(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }

    r->settled = 1;
    /* The whole request is in. Until the client sends its next one, the bytes its
       connection received are the ones its requests took (see to_displace): counted when
       the server is at half its cap or more, where making room may come. */
    now = now_ns();
    if (stopping || 2 * (open_connections - cut_connections) >= max_connections) {
        watched *w = watch_of(connection);
        if (w != NULL) {
            w->consumed = bytes_received(w->fd);
            r->counted = 1;
        }
    }
    if (r->busy) {
        /* Too many bodies at once: the client may try again in a second. Unless the body
           was over MAX_BODY anyway: then the 413 the engine would have given, or its client
           would send it again for nothing. */
        static const char busy[] = "too many request bodies being read\n";
        static const char too_large[] = "body too large\n";
        int over = r->received > MAX_BODY;
        response = over ? MHD_create_response_from_buffer(sizeof too_large - 1,
                                                          (void *)too_large,
                                                          MHD_RESPMEM_PERSISTENT)
                        : MHD_create_response_from_buffer(sizeof busy - 1, (void *)busy,
                                                          MHD_RESPMEM_PERSISTENT);
        if (response == NULL) return MHD_NO;
        if (!over) MHD_add_response_header(response, "Retry-After", "1");
        MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
        queued = MHD_queue_response(connection, over ? 413 : 503, response);
        MHD_destroy_response(response);
        return queued;
    }
    if (MHD_get_connection_values_n(connection, MHD_HEADER_KIND, NULL, NULL) > MAX_HEADERS) {
        /* Rather than judge the request on some of its headers (a repeated MCP header
           past the cut would go unseen), refuse it whole. */
        static const char too_many[] = "too many header fields\n";
        response = MHD_create_response_from_buffer(sizeof too_many - 1, (void *)too_many,
                                                   MHD_RESPMEM_PERSISTENT);
        if (response == NULL) return MHD_NO;
        if (stopping) MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
        queued = MHD_queue_response(connection, 431, response);
        MHD_destroy_response(response);
        return queued;
    }
    headers.len = 0;
    MHD_get_connection_values_n(connection, MHD_HEADER_KIND, collect_header, &headers);
    rc = mcpw_http_server_handle_request(server, now, method, strlen(method), url, strlen(url),
                                         headers.items, headers.len, (const uint8_t *)r->body,
                                         r->body_len, &answer);
    /* The engine has read the body (it copies what it keeps): a response written slowly
       must not hold it too. */
    drop_body(r);
    if (rc != MCPW_OK) {
        warn("handle_request", rc);
        return MHD_NO; /* libmicrohttpd closes the connection */
    }
    if (answer.has_stream) {
        /* Answer what can be answered at once, then see whether the whole answer is there. */
        uint64_t stream = answer.stream;
        serve_events(now);
        rc = mcpw_http_server_settle(server, stream, &answer);
        if (rc != MCPW_OK) die("settle", rc);
    }
    if (answer.has_stream) {
        r->has_stream = 1;
        r->stream = answer.stream;
        response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, read_stream, r,
                                                     release_stream);
        if (response != NULL) r->refs++;
    } else {
        response = MHD_create_response_from_buffer(answer.body_len, (void *)answer.body,
                                                   MHD_RESPMEM_MUST_COPY);
    }
    if (response == NULL) return MHD_NO;
    for (i = 0; i < answer.headers_len; i++) add_header(response, answer.headers[i]);
    if (stopping) MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    queued = MHD_queue_response(connection, answer.status, response);
    MHD_destroy_response(response);
    return queued;
}

/* libmicrohttpd is done with a request: a stream that did not finish lost its client. */
static void on_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                         enum MHD_RequestTerminationCode toe) {
    request *r = *req_cls;
    watched *w = watch_of(connection);
    (void)cls;
    (void)toe;
    if (w != NULL) { /* it waits for the next request's head now */
        if (r == NULL || !r->counted) w->consumed = UNCOUNTED;
        start_waiting(w);
    }
    if (r == NULL) return;
    if (r->has_stream && !r->ended) {
        mcpw_result rc = mcpw_http_server_stream_closed(server, now_ns(), r->stream);
        if (rc != MCPW_OK) warn("stream_closed", rc);
    }
    unlink_request(r);
    r->suspended = 0;
    *req_cls = NULL;
    release(r);
}

/* ---- The loop ------------------------------------------------------------------------------ */

/* Whether a request is still in progress: its body arriving, its answer being made, or
   libmicrohttpd still sending it (a request leaves `live` when libmicrohttpd reports it
   complete, last chunk and all). Shutdown waits for none to be left, within its grace. */
static int requests_in_progress(void) { return live != NULL; }

/* While stopping, at each turn: closes every connection that waits for a request head with
   nothing of one in sight, and says whether some other one has a request on its way (bytes on
   its socket, or a head begun since its last request), which is still served, and its
   connection then closed. A client that sends on a connection as it is closed gets an error,
   as with any server that closes an idle kept-alive connection; what arrived is not dropped. */
static int close_idle_connections(void) {
    watched *w, *next;
    int arriving = 0;
    for (w = waiting_first; w != NULL; w = next) {
        uint64_t received = bytes_received(w->fd);
        char byte;
        next = w->next;
        if (w->line_in ||
            (w->consumed != UNCOUNTED && received != UINT64_MAX && received > w->consumed) ||
            recv(w->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
            arriving = 1;
        } else {
            cut(w);
        }
    }
    return arriving;
}

/* Reads a flag's value: decimal digits only (no sign, space or suffix), from least to most;
   else says which flag was bad and returns 0. */
static int flag_number(const char *text, uint64_t least, uint64_t most, const char *what,
                       uint64_t *out) {
    char *end;
    unsigned long long value;
    errno = 0;
    value = strtoull(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno == ERANGE || value < least ||
        value > most) {
        fprintf(stderr, "example_http_server: bad %s %s\n", what, text);
        return 0;
    }
    *out = (uint64_t)value;
    return 1;
}

int main(int argc, char **argv) {
    mcpw_config *config = NULL;
    mcpw_http_server_options options;
    mcpw_str allowed[MAX_ALLOWED_HOSTS];
    size_t allowed_len = 0;
    struct MHD_Daemon *daemon;
    const union MHD_DaemonInfo *info;
    MHD_socket listener;
    int quick_turns;
    struct sockaddr_in addr;
    struct sigaction sa;
    unsigned port = 0;
    uint64_t keepalive_ms = 0; /* the engine's default, 15 s */
    size_t max_output = 0;     /* 0: the engine's default */
    int legacy = 0, i;
    uint64_t stop_deadline = 0, last_heartbeat, n, shutdown_grace_ns = SHUTDOWN_GRACE_NS;
    int abandoned = 0;
    mcpw_result rc;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--legacy") == 0) {
            legacy = 1;
        } else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            if (!flag_number(argv[++i], 0, 65535, "port", &n)) return 2;
            port = (unsigned)n;
        } else if (strcmp(argv[i], "--keepalive-ms") == 0 && i + 1 < argc) {
            char *end;
            unsigned long long ms = strtoull(argv[++i], &end, 10);
            if (*end != '\0' || argv[i][0] == '-' || argv[i][0] == '\0') {
                fprintf(stderr, "example_http_server: bad keep-alive period %s\n", argv[i]);
                return 2;
            }
            keepalive_ms = ms == 0 ? UINT64_MAX : (uint64_t)ms; /* 0 on the command line: never */
        } else if (strcmp(argv[i], "--body-timeout-ms") == 0 && i + 1 < argc) {
            if (!flag_number(argv[++i], 1, UINT64_MAX / 1000000ull, "body timeout", &n)) return 2;
            body_timeout_ns = n * 1000000ull;
        } else if (strcmp(argv[i], "--min-body-rate") == 0 && i + 1 < argc) {
            if (!flag_number(argv[++i], 0, UINT64_MAX / NS_PER_S, "minimum body rate", &n)) {
                return 2;
            }
            min_body_rate = n; /* 0: no minimum */
        } else if (strcmp(argv[i], "--body-rate-grace-ms") == 0 && i + 1 < argc) {
            if (!flag_number(argv[++i], 0, UINT64_MAX / 1000000ull, "body rate grace", &n)) {
                return 2;
            }
            body_rate_grace_ns = n * 1000000ull;
        } else if (strcmp(argv[i], "--head-timeout-ms") == 0 && i + 1 < argc) {
            if (!flag_number(argv[++i], 1, UINT64_MAX / 1000000ull, "head timeout", &n)) return 2;
            head_timeout_ns = n * 1000000ull;
        } else if (strcmp(argv[i], "--max-connections") == 0 && i + 1 < argc) {
            char *end;
            unsigned long n = strtoul(argv[++i], &end, 10);
            if (*end != '\0' || argv[i][0] == '-' || argv[i][0] == '\0' || n == 0 ||
                n > MAX_CONNECTIONS) {
                fprintf(stderr, "example_http_server: bad connection cap %s\n", argv[i]);
                return 2;
            }
            max_connections = (unsigned)n;
        } else if (strcmp(argv[i], "--max-output") == 0 && i + 1 < argc) {
            if (!flag_number(argv[++i], 1, SIZE_MAX, "output bound", &n)) return 2;
            max_output = (size_t)n;
        } else if (strcmp(argv[i], "--max-body-total") == 0 && i + 1 < argc) {
            if (!flag_number(argv[++i], MAX_BODY + 1, SIZE_MAX, "body total", &n)) return 2;
            max_body_total = (size_t)n;
        } else if (strcmp(argv[i], "--shutdown-grace-ms") == 0 && i + 1 < argc) {
            if (!flag_number(argv[++i], 0, UINT64_MAX / 1000000ull, "shutdown grace", &n)) {
                return 2;
            }
            shutdown_grace_ns = n * 1000000ull;
        } else if (strcmp(argv[i], "--allow-host") == 0 && i + 1 < argc &&
                   allowed_len < MAX_ALLOWED_HOSTS) {
            allowed[allowed_len].ptr = argv[++i];
            allowed[allowed_len].len = strlen(argv[i]);
            allowed_len++;
        } else {
            fprintf(stderr,
                    "usage: example_http_server [--port N] [--legacy] [--keepalive-ms N] "
                    "[--body-timeout-ms N] [--min-body-rate N] [--body-rate-grace-ms N] "
                    "[--head-timeout-ms N] [--max-connections N] [--max-output N] "
                    "[--max-body-total N] [--shutdown-grace-ms N] "
                    "[--allow-host NAME]...\n");
            return 2;
        }
    }

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    {
        /* A signal the server was started ignoring (a background job of a non-interactive
           shell ignores SIGINT) stays ignored. */
        const int stops[] = {SIGINT, SIGTERM};
        struct sigaction old;
        size_t k;
        for (k = 0; k < sizeof stops / sizeof stops[0]; k++) {
            if (sigaction(stops[k], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
            sigaction(stops[k], &sa, NULL);
        }
    }
    signal(SIGPIPE, SIG_IGN);

    rc = mcpw_config_new(MCPW_ROLE_SERVER, S("mcpwire-c-http-example"), S(MCPWIRE_VERSION),
                         &config);
    if (rc != MCPW_OK) die("config", rc);
    rc = mcpw_config_set_capabilities(config,
                                      S("{\"tools\":{},\"resources\":{},\"prompts\":{},\"logging\":{}}"));
    if (rc != MCPW_OK) die("capabilities", rc);
    rc = mcpw_config_set_instructions(config, S("Try the echo and count tools."));
    if (rc != MCPW_OK) die("instructions", rc);
    if (max_output > 0) {
        mcpw_limits limits;
        rc = mcpw_config_get_limits(config, &limits);
        if (rc != MCPW_OK) die("limits", rc);
        limits.max_buffered_output = max_output;
        rc = mcpw_config_set_limits(config, &limits);
        if (rc != MCPW_OK) die("limits", rc);
    }
    if (legacy) {
        static const mcpw_str versions[] = {{"2024-11-05", 10}, {"2025-03-26", 10},
                                            {"2025-06-18", 10}, {"2025-11-25", 10}};
        rc = mcpw_config_set_versions(config, versions, sizeof versions / sizeof versions[0]);
        if (rc != MCPW_OK) die("versions", rc);
    }
    memset(&options, 0, sizeof options);
    options.random = secure_random;
    options.endpoint.ptr = "/mcp";
    options.endpoint.len = 4;
    options.allowed_hosts = allowed_len > 0 ? allowed : NULL;
    options.allowed_hosts_len = allowed_len;
    options.max_body = MAX_BODY;
    options.keepalive_ms = keepalive_ms;
    options.tools.ptr = TOOLS;
    options.tools.len = sizeof TOOLS - 1;
    rc = mcpw_http_server_new(config, &options, &server);
    mcpw_config_free(config);
    if (rc != MCPW_OK) die("http server", rc);

    {
        unsigned usable = connection_limit();
        if (max_connections == 0 || max_connections > usable) max_connections = usable;
    }

    /* Loopback only: a local MCP server must not listen on every interface. */
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    daemon = MHD_start_daemon(
        daemon_flags(), (uint16_t)port, NULL, NULL, on_http, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, on_request_line, NULL,
        MHD_OPTION_CONNECTION_LIMIT, max_connections,
        /* Strict HTTP/1.1: a request without Host, or with a space in a header's name
           ("Content-Length : 5", which a proxy in front may read differently: request
           smuggling), is refused with 400. */
        MHD_OPTION_STRICT_FOR_CLIENT, 1,
        /* Silent connections are dropped after 30 s (suspended SSE streams do not time
           out); a head must be complete within --head-timeout-ms, however it trickles. */
        MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    if (daemon == NULL) {
        fprintf(stderr, "example_http_server: cannot listen on port %u\n", port);
        mcpw_http_server_free(server);
        return EXIT_FAILURE;
    }
    info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_LISTEN_FD);
    listener = info != NULL ? info->listen_fd : MHD_INVALID_SOCKET;
    info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on http://127.0.0.1:%u/mcp\n", info != NULL ? (unsigned)info->port : port);
    fflush(stdout);

    last_heartbeat = now_ns();
    /* Turns left after a displacement that wait at most 1 ms: libmicrohttpd closes the cut
       connection in one run and takes its listener back (and the new client) in the next,
       and until then the listener is in no descriptor set that would wake the loop. */
    quick_turns = 0;
    for (;;) {
        fd_set rs, ws, es;
        MHD_socket max_fd = 0;
        MHD_UNSIGNED_LONG_LONG mhd_timeout;
        struct timeval tv, *tvp = NULL;
        uint64_t now = now_ns(), wake = UINT64_MAX, deadline;
        bool has_deadline;
        int resumed, knock = 0;

        if (stop_requested && !stopping) {
            size_t ended = 0;
            MHD_socket quiesced = MHD_quiesce_daemon(daemon); /* accept no more clients */
            if (quiesced != MHD_INVALID_SOCKET) close(quiesced);
            listener = MHD_INVALID_SOCKET;
            rc = mcpw_http_server_end_listen_streams(server, &ended);
            if (rc != MCPW_OK) warn("end_listen_streams", rc);
            stopping = 1;
            /* (Saturated: a grace meant as "as long as it takes" does not wrap to none.) */
            stop_deadline = shutdown_grace_ns > UINT64_MAX - now ? UINT64_MAX
                                                                 : now + shutdown_grace_ns;
        }
        if (stopping) {
            int arriving = close_idle_connections();
            if (!requests_in_progress() && !arriving) break;
            if (now >= stop_deadline) {
                size_t answered = 0;
                if (abandoned) break;
                /* The grace is over: the requests still awaited get an error answer on their
                   streams (the streams that then have bytes are woken), with a last second
                   to write them. */
                abandoned = 1;
                rc = mcpw_http_server_abandon_streams(server, &answered);
                if (rc != MCPW_OK) warn("abandon_streams", rc);
                if (answered == 0) break;
                stop_deadline = now + LAST_WRITE_NS;
            }
        }

        /* The engine's timers and ours, then whatever they produced. */
        rc = mcpw_http_server_handle_timeout(server, now);
        if (rc != MCPW_OK) die("handle_timeout", rc);
        run_jobs(now);
        serve_events(now);
        resumed = resume_streams(now - last_heartbeat >= HEARTBEAT_NS);
        if (now - last_heartbeat >= HEARTBEAT_NS) {
            cut_late_heads(now);
            /* Slow bodies are cut here even when no byte comes (the wake below is at most a
               heartbeat away, so a cut is at most a second late). At the cap, the client
               waiting to take the freed slot is accepted only two runs later: turn quickly. */
            if (cut_slow_bodies(now) > 0) quick_turns = 4;
            last_heartbeat = now;
        }
        if (slow_body_cut) {
            slow_body_cut = 0;
            quick_turns = 4;
        }

        /* Sleep until libmicrohttpd, the engine or a job has work. */
        FD_ZERO(&rs);
        FD_ZERO(&ws);
        FD_ZERO(&es);
        if (MHD_get_fdset2(daemon, &rs, &ws, &es, &max_fd, FD_SETSIZE) != MHD_YES) {
            fprintf(stderr, "example_http_server: MHD_get_fdset2 failed\n");
            break;
        }
        if (listener != MHD_INVALID_SOCKET && listener < FD_SETSIZE && may_displace()) {
            FD_SET(listener, &rs);
            if (listener > max_fd) max_fd = listener;
            knock = 1;
        }
        rc = mcpw_http_server_poll_timeout(server, &has_deadline, &deadline);
        if (rc != MCPW_OK) die("poll_timeout", rc);
        if (has_deadline) wake = deadline;
        if (earliest_job() < wake) wake = earliest_job();
        if (last_heartbeat + HEARTBEAT_NS < wake) wake = last_heartbeat + HEARTBEAT_NS;
        if (stopping && stop_deadline < wake) wake = stop_deadline;
        if (resumed > 0) wake = now; /* resumed streams are served by the next run */
        if (quick_turns > 0) {
            quick_turns--;
            if (now + 1000000ull < wake) wake = now + 1000000ull;
        }
        if (MHD_get_timeout(daemon, &mhd_timeout) == MHD_YES) {
            uint64_t at = now + (uint64_t)mhd_timeout * 1000000ull;
            if (at < wake) wake = at;
        }
        if (wake != UINT64_MAX) {
            uint64_t wait_us = ((wake > now ? wake - now : 0) + 999) / 1000;
            tv.tv_sec = (time_t)(wait_us / 1000000ull);
            tv.tv_usec = (suseconds_t)(wait_us % 1000000ull); /* below a second, as select wants */
            tvp = &tv;
        }
        if (select((int)max_fd + 1, &rs, &ws, &es, tvp) < 0) {
            if (errno != EINTR) {
                perror("example_http_server: select");
                break;
            }
            FD_ZERO(&rs);
            FD_ZERO(&ws);
            FD_ZERO(&es);
        }
        if (knock && FD_ISSET(listener, &rs)) {
            /* A client waits to connect: the connection idle longest makes room. The
               listener is ours to watch here, not libmicrohttpd's to accept from (at the cap
               it would close the new client at once). */
            watched *w = to_displace();
            FD_CLR(listener, &rs);
            if (w != NULL) {
                cut(w);
                quick_turns = 4;
            }
        }
        MHD_run_from_select(daemon, &rs, &ws, &es);
    }

    /* libmicrohttpd must not stop with suspended connections. */
    {
        request *r;
        for (r = live; r != NULL; r = r->next) {
            if (r->suspended) {
                r->suspended = 0;
                MHD_resume_connection(r->connection);
            }
        }
    }
    MHD_stop_daemon(daemon);
    while (jobs != NULL) {
        job *j = jobs;
        jobs = j->next;
        job_free(j);
    }
    mcpw_http_server_free(server);
    return EXIT_SUCCESS;
}
