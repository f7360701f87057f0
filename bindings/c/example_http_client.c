/*
 * An MCP client over Streamable HTTP in plain C: the mcpwire engine (mcpw_http_client) decides
 * which HTTP requests to make and reads their answers; libcurl's multi interface (7.66 or later,
 * for curl_multi_poll) makes them. All of it runs on the calling thread, and the only call
 * that waits is curl_multi_poll.
 *
 * The session: connect (the 2026-07-28 server/discover probe, or the initialize handshake),
 * tools/list, call the tool "echo", optionally call a tool that reports progress, then a clean
 * end (a handshake-era session is ended with DELETE). It prints one line per step on stdout and
 * ends with "C_CLIENT_OK <protocol version>" (exit 0). Anything unexpected (an error answer, a
 * failed HTTP exchange, a refused command, no outcome in time) stops it with
 * "C_CLIENT_FAIL <step>: <reason>" on stderr (exit 1), once it has ended the session as a
 * signal does (within 3 s of its own; a signal cuts that short). Usage errors exit 2. SIGINT or SIGTERM
 * ends the session as cleanly as it can (requests in flight are cancelled, a handshake-era
 * session is ended with DELETE; during the handshake it first waits for the handshake's end,
 * up to --timeout, so that the session the server makes is not left behind) and then fails
 * with "C_CLIENT_FAIL interrupted"; a second signal stops at once. A signal that comes after
 * the session ended well changes nothing. A signal ignored at start stays ignored.
 *
 * Usage:
 *   example_http_client [--era auto|legacy|modern] [--echo-arg NAME] [--echo-expect TEXT]
 *                       [--progress-tool NAME] [--progress-args JSON] [--timeout SECS] URL
 *
 *   --era            auto (the default) probes with server/discover and falls back to
 *                    initialize; legacy uses only initialize; modern only 2026-07-28.
 *   --echo-arg       the name of the echo tool's argument (default "text"); the client sends
 *                    "hello from C" in it.
 *   --echo-expect    the text the echo tool must answer (default "hello from C").
 *   --progress-tool  also call this tool, asking for progress, with --progress-args (a JSON
 *                    object, default {}); at least one progress notification must arrive.
 *   --timeout        give up after this many seconds (default 30).
 *
 * Against the reference "everything" server (PORT=3001 node .../dist/index.js streamableHttp):
 *   example_http_client --echo-arg message --echo-expect 'Echo: hello from C' \
 *     --progress-tool trigger-long-running-operation --progress-args '{"duration":1,"steps":3}' \
 *     http://127.0.0.1:3001/mcp
 *
 * Build: make -C bindings/c (target/c-bindings/example_http_client), or by hand from the
 * repository root, after cargo build --release -p mcpwire-ffi:
 *   cc -std=c11 -Wall -Wextra -pedantic -Iinclude $(pkg-config --cflags libcurl) \
 *      bindings/c/example_http_client.c target/release/libmcpwire_ffi.a \
 *      -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc $(pkg-config --libs libcurl) \
 *      -o example_http_client
 *
 * How the pieces fit (the loop in run()):
 *
 *   1. Timers: when the engine's deadline (mcpw_http_client_poll_timeout) has passed, call
 *      mcpw_http_client_handle_timeout (request timeouts, resuming broken SSE streams).
 *   2. Events: drain mcpw_http_client_poll_event; acting on them issues commands through the
 *      connection view of mcpw_http_client_conn (mcpw_conn_request, mcpw_conn_close, ...).
 *   3. Actions: drain mcpw_http_client_poll_action. SEND becomes a curl easy handle added to
 *      the multi handle; ABORT removes that handle and reports nothing more for it.
 *   4. Wait in curl_multi_poll until a socket is ready or the earliest deadline (the engine's,
 *      curl's own, our overall limit), then curl_multi_perform. While it runs, curl calls
 *      on_header (collecting the response headers, reported once with
 *      mcpw_http_client_handle_response when they are complete) and on_body (the body goes
 *      to mcpw_http_client_handle_body at once, so SSE events arrive as they come, in pieces
 *      of mcpw_conn_input_piece bytes with the events handed out between them, so that a
 *      burst of notifications is not dropped from the engine's bounded queue). Each
 *      finished transfer is reported with mcpw_http_client_handle_end, or
 *      mcpw_http_client_handle_error when curl failed.
 *
 *   Once the session is done, the loop goes on while mcpw_http_client_has_unheard says that a
 *   notification that went out (a cancellation) has no response head yet, for up to two
 *   seconds, so that freeing the transfers does not cut it off.
 *
 * Every now_ns is CLOCK_MONOTONIC in nanoseconds. Errors never exit() from deep inside: fail()
 * records the first one, and everything unwinds to main(), which frees every curl and mcpwire
 * handle on every path.
 */
#define _POSIX_C_SOURCE 200809L

#include "mcpwire.h"

#include <curl/curl.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S(lit) (lit), (sizeof(lit) - 1)
#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull
/* How much of an error response's body goes into the failure message. */
#define SNIPPET_MAX 200

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* ---- A growable byte buffer ---------------------------------------------------------------- */

/* Used for JSON we build, response headers, and copies of views. After an allocation failure it
 * ignores further writes and keeps `oom` set: check it once, after building. */
typedef struct {
    char *ptr;
    size_t len, cap;
    int oom;
} buffer;

static void put(buffer *b, const char *text, size_t len) {
    if (b->oom) return;
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *grown;
        while (cap < b->len + len + 1) cap *= 2;
        grown = realloc(b->ptr, cap);
        if (grown == NULL) {
            b->oom = 1;
            return;
        }
        b->ptr = grown;
        b->cap = cap;
    }
    if (len > 0) memcpy(b->ptr + b->len, text, len);
    b->len += len;
    b->ptr[b->len] = '\0';
}

static void put_text(buffer *b, const char *text) { put(b, text, strlen(text)); }
static void put_view(buffer *b, mcpw_str s) { put(b, s.ptr, s.len); }

/* A JSON string literal holding `text` (UTF-8), escaped as JSON requires. */
/* 1 when the JSON string `json` (quotes included) decodes to `text`, 0 when not, -1 when out
   of memory. Compare names and texts as text, not as JSON: a server may escape any character
   (Python's json.dumps writes "é" as "\u00e9"). A match needs room for strlen(text) bytes only: decoding never lengthens, and
   mcpw_json_string writes nothing when the text does not fit. */
static int json_text_is(mcpw_str json, const char *text) {
    size_t n = strlen(text), len = 0;
    char *buf;
    int same;
    if (json.ptr == NULL) return 0;
    buf = malloc(n + 1);
    if (buf == NULL) return -1;
    same = mcpw_json_string(json.ptr, json.len, buf, n + 1, &len) == MCPW_OK && len == n &&
           memcmp(buf, text, n) == 0;
    free(buf);
    return same;
}

static void put_json_string(buffer *b, const char *text) {
    put(b, "\"", 1);
    for (; *text; text++) {
        unsigned char c = (unsigned char)*text;
        if (c == '"' || c == '\\') {
            put(b, "\\", 1);
            put(b, text, 1);
        } else if (c < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put_text(b, esc);
        } else {
            put(b, text, 1);
        }
    }
    put(b, "\"", 1);
}

static void buffer_free(buffer *b) {
    free(b->ptr);
    memset(b, 0, sizeof *b);
}

/* ---- Reading JSON views (the library parses; these only hide the error handling) ----------- */

static const mcpw_str NO_VIEW = {NULL, 0};

/* Member `key` of the JSON object `json` as raw JSON text, or an absent view. */
static mcpw_str member(mcpw_str json, const char *key) {
    mcpw_str value = NO_VIEW;
    if (json.ptr == NULL ||
        mcpw_json_get(json.ptr, json.len, key, strlen(key), &value) != MCPW_OK) {
        return NO_VIEW;
    }
    return value;
}

/* How many elements the JSON array `json` has (0 when absent or no array), and views of up
   to `room` of them in `items`, read in one pass (mcpw_json_at would read the whole text again
   for each index). */
static size_t elements(mcpw_str json, mcpw_str *items, size_t room) {
    size_t count = 0;
    if (json.ptr == NULL || mcpw_json_items(json.ptr, json.len, items, room, &count) != MCPW_OK) {
        return 0;
    }
    return count;
}

/* Element `index` of the JSON array `json` as raw JSON text, or an absent view. */
static mcpw_str element(mcpw_str json, size_t index) {
    mcpw_str value = NO_VIEW;
    if (json.ptr == NULL || mcpw_json_at(json.ptr, json.len, index, &value) != MCPW_OK) {
        return NO_VIEW;
    }
    return value;
}

static int has_line_break(mcpw_str s) {
    return s.len > 0 && (memchr(s.ptr, '\n', s.len) != NULL || memchr(s.ptr, '\r', s.len) != NULL);
}

static int view_equals(mcpw_str s, const char *text, size_t len) {
    return s.ptr != NULL && s.len == len && memcmp(s.ptr, text, len) == 0;
}

/* `printf("%.*s")` takes an int length: clamp views for printing. */
static int print_len(mcpw_str s) { return s.ptr == NULL ? 0 : (s.len > 4096 ? 4096 : (int)s.len); }
static const char *print_ptr(mcpw_str s) { return s.ptr == NULL ? "" : s.ptr; }

/* ---- The client's state ---------------------------------------------------------------------- */

/* How many SIGINT/SIGTERM arrived; the loop looks at it between waits. */
static volatile sig_atomic_t signals_seen;

static void on_signal(int sig) {
    (void)sig;
    if (signals_seen < 2) signals_seen = signals_seen + 1;
}

typedef enum {
    WAIT_READY,    /* the probe / handshake is under way */
    WAIT_TOOLS,    /* tools/list sent */
    WAIT_ECHO,     /* tools/call echo sent */
    WAIT_PROGRESS, /* tools/call of the progress tool sent */
    WAIT_CLOSED,   /* mcpw_conn_close called */
    WAIT_DELETE,   /* the DELETE that ends the session is under way */
    DONE
} phase;

typedef struct {
    const char *url;
    uint32_t era;
    const char *echo_arg;
    const char *echo_expect;
    const char *progress_tool; /* NULL: no progress step */
    const char *progress_args;
    unsigned long timeout_s;
} options;

typedef struct transfer transfer;

typedef struct {
    options opts;
    mcpw_http_client *client;
    size_t piece; /* how much of a body goes to the engine at a time (mcpw_conn_input_piece) */
    CURLM *multi;
    transfer *transfers; /* every easy handle in the multi handle */

    phase phase;
    const char *step;     /* what the session is doing, for messages */
    int64_t pending;      /* the request whose answer moves the session on */
    int progress_seen;    /* progress notifications for the progress tool's call */
    int delete_expected;  /* the next SEND should be the session's DELETE */
    uint64_t delete_exchange;
    uint64_t drain_until; /* once DONE: how long to wait for what is still unheard (0: unset) */
    int ending_after_failure; /* end_after_failure is ending the session: fail() is quiet */

    uint32_t rng; /* xorshift32 state, for the reconnection jitter */
    int interrupted; /* a signal asked us to stop: the session is being ended */

    int failed;
    char error[1024];  /* the first failure */
    char problem[512]; /* the last thing that went wrong on the HTTP level, for context */
    uint64_t problem_exchange; /* the exchange whose status it was (0: none) */
} app;

static void fail(app *a, const char *fmt, ...) {
    va_list args;
    /* Keep the first, real, error (also while the session ends after it: see
     * end_after_failure, whose own bound ends that). */
    if (a->failed || a->ending_after_failure) return;
    a->failed = 1;
    va_start(args, fmt);
    vsnprintf(a->error, sizeof a->error, fmt, args);
    va_end(args);
    /* The message may quote the server's text (an error's message, a close's reason): one
     * line, and no control character reaches the terminal. */
    for (char *c = a->error; *c != '\0'; c++) {
        if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f) *c = ' ';
    }
}

/* Records the last HTTP-level problem; failure messages quote it. */
static void note_problem(app *a, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(a->problem, sizeof a->problem, fmt, args);
    va_end(args);
}

/* Checks an mcpwire call: any result but MCPW_OK fails the session. Returns 1 when it was OK. */
static int ok(app *a, mcpw_result rc, const char *what) {
    if (rc == MCPW_OK) return 1;
    fail(a, "%s: %s (mcpw_result %d)", what, mcpw_result_message((int)rc), (int)rc);
    return 0;
}

static uint32_t jitter(app *a) {
    /* xorshift32: plenty for spreading reconnections out; it needs no cryptographic quality. */
    uint32_t x = a->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    a->rng = x;
    return x;
}

/* ---- One HTTP exchange as a curl easy handle ------------------------------------------------- */

/* Where a response header sits in `transfer.header_text` (offsets, as the buffer may move). */
typedef struct {
    size_t name_at, name_len, value_at, value_len;
} header_span;

struct transfer {
    transfer *next;
    app *app;
    uint64_t exchange;     /* the engine's name for this exchange */
    CURL *easy;
    struct curl_slist *request_headers;
    char method[8];        /* POST, GET or DELETE */
    char what[64];         /* the JSON-RPC method in the body (for messages), or "" */
    char curl_error[CURL_ERROR_SIZE];

    /* The response. */
    buffer header_text;
    header_span *headers;
    size_t headers_len, headers_cap;
    long status;
    int reported;          /* mcpw_http_client_handle_response was called */
    buffer snippet;        /* the start of an error response's body */
};

static void transfer_free(app *a, transfer *t) {
    transfer **link;
    for (link = &a->transfers; *link != NULL; link = &(*link)->next) {
        if (*link == t) {
            *link = t->next;
            break;
        }
    }
    if (t->easy != NULL) {
        curl_multi_remove_handle(a->multi, t->easy);
        curl_easy_cleanup(t->easy);
    }
    curl_slist_free_all(t->request_headers);
    buffer_free(&t->header_text);
    buffer_free(&t->snippet);
    free(t->headers);
    free(t);
}

static transfer *find_transfer(app *a, uint64_t exchange) {
    transfer *t;
    for (t = a->transfers; t != NULL; t = t->next) {
        if (t->exchange == exchange) return t;
    }
    return NULL;
}

/* A transfer's method and JSON-RPC method, for messages: "POST tools/call", "DELETE". */
static void describe(const transfer *t, char *out, size_t size) {
    if (t->what[0] != '\0') {
        snprintf(out, size, "%s %s", t->method, t->what);
    } else {
        snprintf(out, size, "%s", t->method);
    }
}

/* Hands the complete response head to the engine, once. */
static int report_response(transfer *t) {
    app *a = t->app;
    mcpw_http_header *list = NULL;
    uint16_t status = (uint16_t)(t->status > 0 && t->status < 1000 ? t->status : 0);
    size_t i;
    int good;
    if (t->reported) return 1;
    t->reported = 1;
    if (t->header_text.oom) {
        fail(a, "out of memory");
        return 0;
    }
    if (t->headers_len > 0) {
        list = calloc(t->headers_len, sizeof *list);
        if (list == NULL) {
            fail(a, "out of memory");
            return 0;
        }
    }
    for (i = 0; i < t->headers_len; i++) {
        list[i].name.ptr = t->header_text.ptr + t->headers[i].name_at;
        list[i].name.len = t->headers[i].name_len;
        list[i].value.ptr = t->header_text.ptr + t->headers[i].value_at;
        list[i].value.len = t->headers[i].value_len;
    }
    if (t->status < 200 || t->status > 299) {
        char who[96];
        describe(t, who, sizeof who);
        note_problem(a, "%s was answered with HTTP %ld", who, t->status);
        a->problem_exchange = t->exchange;
    } else if (t->exchange == a->problem_exchange) {
        /* The exchange that had the problem (a refusal for now, sent again) went through: its
         * problem explains nothing any more. */
        a->problem[0] = '\0';
    }
    good = ok(a,
              mcpw_http_client_handle_response(a->client, now_ns(), t->exchange, status, list,
                                               t->headers_len),
              "mcpw_http_client_handle_response");
    free(list);
    return good;
}

/* curl's header callback: one line per call, the status line and the final empty line included.
 * Returning anything but size * nitems stops the transfer. */
static size_t on_header(char *data, size_t size, size_t nitems, void *user) {
    transfer *t = user;
    size_t len = size * nitems, name_len, value_at;
    header_span *span;

    if (t->app->failed) return 0;
    if (t->reported) return len; /* trailers after the body: not needed */
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r')) len--;

    if (len >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        /* A status line starts a response (after a 1xx interim one, it starts again). */
        t->header_text.len = 0;
        t->headers_len = 0;
        return size * nitems;
    }
    if (len == 0) {
        /* The end of a head. 1xx heads (100 Continue) are followed by the real one, except
         * 101, which libcurl takes as the final one when it did not ask to switch (the
         * engine then fails the exchange's requests and asks for an abort). */
        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
        if (t->status >= 100 && t->status < 200 && t->status != 101) return size * nitems;
        return report_response(t) ? size * nitems : 0;
    }

    /* "Name: value" */
    for (name_len = 0; name_len < len && data[name_len] != ':'; name_len++) {
    }
    if (name_len == len || name_len == 0) return size * nitems; /* not a header line: skip it */
    /* A head of more than 256 lines or 64 KiB is no MCP server's (libcurl before 8.3.0 sets
     * no bound of its own): the exchange fails, its memory bounded. */
    if (t->headers_len >= 256 || t->header_text.len + len > 64 * 1024) {
        char who[96];
        describe(t, who, sizeof who);
        fail(t->app, "the response head to %s is over 256 lines or 64 KiB", who);
        return 0;
    }
    value_at = name_len + 1;
    while (value_at < len && (data[value_at] == ' ' || data[value_at] == '\t')) value_at++;
    while (len > value_at && (data[len - 1] == ' ' || data[len - 1] == '\t')) len--;

    if (t->headers_len == t->headers_cap) {
        size_t cap = t->headers_cap ? t->headers_cap * 2 : 16;
        header_span *grown = realloc(t->headers, cap * sizeof *grown);
        if (grown == NULL) {
            fail(t->app, "out of memory");
            return 0;
        }
        t->headers = grown;
        t->headers_cap = cap;
    }
    span = &t->headers[t->headers_len++];
    span->name_at = t->header_text.len;
    span->name_len = name_len;
    put(&t->header_text, data, name_len);
    span->value_at = t->header_text.len;
    span->value_len = len - value_at;
    put(&t->header_text, data + value_at, len - value_at);
    return size * nitems;
}

static void drain_events(app *a);

/* curl's write callback: body bytes, fed to the engine at once (SSE events are decoded across
 * any chunking, so a progress notification arrives as soon as its bytes do), a piece at a time
 * with the events of each handed out before the next. curl may bring megabytes in one
 * curl_multi_perform, and the engine keeps at most max_queued_events events waiting: past
 * that it drops the server's notifications (counted in dropped_events). Events only: curl
 * allows no multi call from inside its callback, so the HTTP requests they make wait for the
 * loop. */
static size_t on_body(char *data, size_t size, size_t nmemb, void *user) {
    transfer *t = user;
    size_t len = size * nmemb, done = 0;
    if (t->app->failed) return 0;
    if (!t->reported) {
        /* Defensive: curl always delivers the head first, but never feed a body unannounced. */
        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
        if (!report_response(t)) return 0;
    }
    if ((t->status < 200 || t->status > 299) && t->snippet.len < SNIPPET_MAX) {
        size_t room = SNIPPET_MAX - t->snippet.len;
        put(&t->snippet, data, len < room ? len : room);
    }
    while (done < len) {
        size_t n = len - done < t->app->piece ? len - done : t->app->piece;
        if (!ok(t->app,
                mcpw_http_client_handle_body(t->app->client, now_ns(), t->exchange,
                                             (const uint8_t *)data + done, n),
                "mcpw_http_client_handle_body")) {
            return 0;
        }
        done += n;
        drain_events(t->app);
        /* A failure (of this request or another) ends the run: the rest is not fed, but the
           transfer is not cut for it either (its end or error is reported as it comes). */
        if (t->app->failed) break;
    }
    return len;
}

/* Starts the HTTP request of a SEND action. The action's views die at the next call on the
 * client; curl copies everything it is given here (COPYPOSTFIELDS, the header list is ours). */
static void start_transfer(app *a, const mcpw_http_action *action) {
    transfer *t;
    size_t i;
    CURLMcode mc;
    CURLcode setopt_error = CURLE_OK;

    /* An exchange is only resent (a GET resuming its stream) after its transfer ended; should
     * an old one linger anyway, it has nothing more to say. */
    t = find_transfer(a, action->exchange);
    if (t != NULL) transfer_free(a, t);

    t = calloc(1, sizeof *t);
    if (t == NULL) {
        fail(a, "out of memory");
        return;
    }
    t->app = a;
    t->exchange = action->exchange;
    t->next = a->transfers;
    a->transfers = t;

    if (action->method.len == 0 || action->method.len >= sizeof t->method) {
        fail(a, "the engine asked for an unknown HTTP method");
        return;
    }
    memcpy(t->method, action->method.ptr, action->method.len);
    t->method[action->method.len] = '\0';

    /* For messages: the JSON-RPC method the body carries ("tools/call"), if any. */
    if (action->body_len > 0) {
        mcpw_str body = {(const char *)action->body, action->body_len};
        mcpw_str method = member(body, "method");
        if (method.ptr != NULL && method.len >= 2 && method.len - 2 < sizeof t->what) {
            memcpy(t->what, method.ptr + 1, method.len - 2);
            t->what[method.len - 2] = '\0';
        } else if (method.ptr == NULL) {
            snprintf(t->what, sizeof t->what, "%s", "(a response)");
        }
    }

    for (i = 0; i < action->headers_len; i++) {
        const mcpw_http_header *h = &action->headers[i];
        buffer line = {NULL, 0, 0, 0};
        struct curl_slist *grown;
        /* The engine writes header-safe values; refuse anything that could split a header. */
        if (has_line_break(h->name) || has_line_break(h->value)) {
            fail(a, "refusing a request header with a line break");
            return;
        }
        put_view(&line, h->name);
        put_text(&line, ": ");
        put_view(&line, h->value);
        grown = line.oom ? NULL : curl_slist_append(t->request_headers, line.ptr);
        buffer_free(&line);
        if (grown == NULL) {
            fail(a, "out of memory");
            return;
        }
        t->request_headers = grown;
    }
    {
        /* No "Expect: 100-continue" round trip for larger bodies. */
        struct curl_slist *grown = curl_slist_append(t->request_headers, "Expect:");
        if (grown == NULL) {
            fail(a, "out of memory");
            return;
        }
        t->request_headers = grown;
    }

    t->easy = curl_easy_init();
    if (t->easy == NULL) {
        fail(a, "curl_easy_init failed");
        return;
    }
    /* Keeps the first curl_easy_setopt failure (out of memory, an option this libcurl lacks). */
#define SETOPT(option, value)                                                                   \
    do {                                                                                        \
        CURLcode rc_ = curl_easy_setopt(t->easy, option, value);                                \
        if (rc_ != CURLE_OK && setopt_error == CURLE_OK) setopt_error = rc_;                    \
    } while (0)
    SETOPT(CURLOPT_URL, a->opts.url);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85.0 */
    SETOPT(CURLOPT_PROTOCOLS_STR, "http,https"); /* never another scheme */
#endif
    SETOPT(CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075700
    /* An abort or the exit does not wait for a host name lookup still under way. */
    SETOPT(CURLOPT_QUICK_EXIT, 1L);
#endif
    SETOPT(CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    SETOPT(CURLOPT_HTTPHEADER, t->request_headers);
    /* Through a proxy (HTTPS_PROXY), its answer to CONNECT is not the server's head: kept out
       of on_header, which would report it (status 0) as the response. */
    SETOPT(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    SETOPT(CURLOPT_HEADERFUNCTION, on_header);
    SETOPT(CURLOPT_HEADERDATA, t);
    SETOPT(CURLOPT_WRITEFUNCTION, on_body);
    SETOPT(CURLOPT_WRITEDATA, t);
    SETOPT(CURLOPT_PRIVATE, t);
    SETOPT(CURLOPT_ERRORBUFFER, t->curl_error);
    if (strcmp(t->method, "GET") == 0) {
        SETOPT(CURLOPT_HTTPGET, 1L);
    } else {
        if (strcmp(t->method, "POST") == 0 || action->body_len > 0) {
            /* The size first: COPYPOSTFIELDS copies that many bytes (the body may hold NULs). */
            SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)action->body_len);
            SETOPT(CURLOPT_COPYPOSTFIELDS, action->body_len > 0 ? (const char *)action->body : "");
        }
        if (strcmp(t->method, "POST") != 0) {
            SETOPT(CURLOPT_CUSTOMREQUEST, t->method); /* DELETE */
        }
    }
#undef SETOPT
    if (setopt_error != CURLE_OK) {
        fail(a, "curl_easy_setopt: %s", curl_easy_strerror(setopt_error));
        return;
    }

    if (a->delete_expected && strcmp(t->method, "DELETE") == 0) {
        a->delete_expected = 0;
        a->delete_exchange = t->exchange;
    }

    mc = curl_multi_add_handle(a->multi, t->easy);
    if (mc != CURLM_OK) {
        curl_easy_cleanup(t->easy);
        t->easy = NULL;
        fail(a, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
    }
}

/* Reports a finished transfer to the engine, then frees it. */
static void finish_transfer(app *a, transfer *t, CURLcode result) {
    char who[96];
    uint64_t now = now_ns();
    describe(t, who, sizeof who);

    if (result == CURLE_OK) {
        if (!t->reported) {
            curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
            if (!report_response(t)) return;
        }
        if (t->snippet.len > 0 && !t->snippet.oom) {
            /* Quote the start of the error body, flattened to one line. */
            size_t i;
            for (i = 0; i < t->snippet.len; i++) {
                if ((unsigned char)t->snippet.ptr[i] < 0x20) t->snippet.ptr[i] = ' ';
            }
            note_problem(a, "%s was answered with HTTP %ld: %s", who, t->status, t->snippet.ptr);
        }
        ok(a, mcpw_http_client_handle_end(a->client, now, t->exchange, jitter(a)),
           "mcpw_http_client_handle_end");
    } else {
        note_problem(a, "%s failed: %s%s%s", who, curl_easy_strerror(result),
                     t->curl_error[0] ? ": " : "", t->curl_error);
        ok(a, mcpw_http_client_handle_error(a->client, now, t->exchange, jitter(a)),
           "mcpw_http_client_handle_error");
    }

    if (t->exchange == a->delete_exchange && a->phase == WAIT_DELETE) {
        /* The DELETE that ends the session. 404: already gone; 405: the server keeps sessions
         * until they expire. Both are fine; anything else is a failure. */
        if (result != CURLE_OK) {
            fail(a, "%s", a->problem);
        } else if (t->status >= 200 && t->status <= 299) {
            printf("session: ended with DELETE (HTTP %ld)\n", t->status);
            a->phase = DONE;
        } else if (t->status == 404) {
            printf("session: already gone (DELETE answered 404)\n");
            a->phase = DONE;
        } else if (t->status == 405) {
            printf("session: the server ends sessions only by expiry (DELETE answered 405)\n");
            a->phase = DONE;
        } else {
            fail(a, "%s", a->problem);
        }
    }
    transfer_free(a, t);
}

/* ---- The session: what to do with each event ------------------------------------------------ */

/* The connection view, for commands. It stays valid until the next other call on the client,
 * so ask for it each time it is needed. */
static mcpw_conn *conn_of(app *a) {
    mcpw_conn *conn = NULL;
    if (!ok(a, mcpw_http_client_conn(a->client, &conn), "mcpw_http_client_conn")) return NULL;
    return conn;
}

static void send_request(app *a, const char *method, const buffer *params, int with_progress) {
    mcpw_request_options options;
    mcpw_conn *conn;
    memset(&options, 0, sizeof options);
    options.progress = with_progress ? 1 : 0; /* the engine adds _meta.progressToken */
    if (params != NULL && params->oom) {
        fail(a, "out of memory");
        return;
    }
    conn = conn_of(a);
    if (conn == NULL) return;
    ok(a,
       mcpw_conn_request(conn, now_ns(), method, strlen(method), params ? params->ptr : NULL,
                         params ? params->len : 0, &options, &a->pending),
       method);
}

static void close_connection(app *a) {
    mcpw_conn *conn = conn_of(a);
    a->step = "close";
    if (conn == NULL) return;
    /* Nothing is in flight (but after a signal): the engine closes at once, with
     * MCPW_EVENT_CLOSED. Requests still in flight get a second, then are cancelled. */
    if (ok(a, mcpw_conn_close(conn, now_ns(), 1000), "mcpw_conn_close")) a->phase = WAIT_CLOSED;
}

/* The first text block of a tools/call result, as JSON text; fails on isError results. */
static mcpw_str tool_text(app *a, mcpw_str result, const char *tool) {
    mcpw_str text = member(element(member(result, "content"), 0), "text");
    if (view_equals(member(result, "isError"), S("true"))) {
        fail(a, "the tool %s reported an error: %.*s", tool, print_len(text), print_ptr(text));
    }
    return text;
}

static void on_result(app *a, mcpw_str result) {
    buffer params = {NULL, 0, 0, 0};
    switch (a->phase) {
    case WAIT_TOOLS: {
        /* The first page only: a server with many tools may page them (nextCursor). */
        mcpw_str tools = member(result, "tools"), *tool;
        int has_echo = 0, has_progress = 0, oom = 0;
        size_t count = elements(tools, NULL, 0), i;
        tool = calloc(count > 0 ? count : 1, sizeof *tool);
        if (tool == NULL) {
            fail(a, "out of memory");
            break;
        }
        count = elements(tools, tool, count);
        for (i = 0; i < count; i++) {
            mcpw_str name = member(tool[i], "name");
            int is = json_text_is(name, "echo");
            if (is > 0) has_echo = 1;
            if (a->opts.progress_tool != NULL && is == 0) {
                is = json_text_is(name, a->opts.progress_tool);
                if (is > 0) has_progress = 1;
            }
            if (is < 0) oom = 1;
        }
        free(tool);
        if (oom) {
            fail(a, "out of memory");
            break;
        }
        if (!has_echo) {
            fail(a, "no tool named echo among the %zu tools listed", count);
            break;
        }
        if (a->opts.progress_tool != NULL && !has_progress) {
            fail(a, "no tool named %s among the %zu tools listed", a->opts.progress_tool, count);
            break;
        }
        printf("tools: %zu tools listed\n", count);
        a->step = "echo";
        put_text(&params, "{\"name\":\"echo\",\"arguments\":{");
        put_json_string(&params, a->opts.echo_arg);
        put_text(&params, ":\"hello from C\"}}");
        send_request(a, "tools/call", &params, 0);
        a->phase = WAIT_ECHO;
        break;
    }
    case WAIT_ECHO: {
        mcpw_str text = tool_text(a, result, "echo");
        int same = a->failed ? 1 : json_text_is(text, a->opts.echo_expect);
        if (same < 0) {
            fail(a, "out of memory");
        } else if (!same) {
            fail(a, "echo returned %.*s, expected \"%s\"", print_len(text), print_ptr(text),
                 a->opts.echo_expect);
        }
        if (a->failed) break;
        printf("echo: %.*s\n", print_len(text), print_ptr(text));
        if (a->opts.progress_tool == NULL) {
            printf("progress: skipped (no --progress-tool)\n");
            close_connection(a);
            break;
        }
        a->step = "progress";
        put_text(&params, "{\"name\":");
        put_json_string(&params, a->opts.progress_tool);
        put_text(&params, ",\"arguments\":");
        put_text(&params, a->opts.progress_args);
        put_text(&params, "}");
        send_request(a, "tools/call", &params, 1);
        a->phase = WAIT_PROGRESS;
        break;
    }
    case WAIT_PROGRESS:
        tool_text(a, result, a->opts.progress_tool);
        if (a->failed) break;
        if (a->progress_seen == 0) {
            fail(a, "the tool %s answered without any progress notification",
                 a->opts.progress_tool);
            break;
        }
        printf("progress: %d notifications, then the result\n", a->progress_seen);
        close_connection(a);
        break;
    default:
        fail(a, "a result arrived in an unexpected phase (%d)", (int)a->phase);
    }
    buffer_free(&params);
}

static const char *close_reason_text(mcpw_close_reason reason) {
    switch (reason) {
    case MCPW_CLOSE_LOCAL: return "closed locally";
    case MCPW_CLOSE_EOF: return "the transport ended";
    case MCPW_CLOSE_UNSUPPORTED_VERSION:
        return "the server chose a protocol version we do not speak";
    case MCPW_CLOSE_INITIALIZE_REJECTED: return "the server rejected the handshake";
    case MCPW_CLOSE_INVALID_INITIALIZE_RESULT:
        return "the server's initialize result was malformed";
    case MCPW_CLOSE_INITIALIZE_TIMED_OUT: return "no answer to the handshake in time";
    case MCPW_CLOSE_PEER_NOT_READING: return "the server stopped reading";
    case MCPW_CLOSE_TRANSPORT_FAILED: return "HTTP could not carry the handshake";
    default: return "for a reason this program does not know";
    }
}

/* " (<the last HTTP problem>)" for failure messages, or "" when there was none. */
static void problem_suffix(const app *a, char *out, size_t size) {
    if (a->problem[0] != '\0') {
        snprintf(out, size, " (%s)", a->problem);
    } else {
        out[0] = '\0';
    }
}

static void on_event(app *a, const mcpw_event *ev) {
    char why[600];
    problem_suffix(a, why, sizeof why);
    /* Interrupted: the session's steps are over; only the handshake's end (then the close),
     * the close, and the server's requests matter now (what our requests in flight come to
     * no longer does). A request is still answered: the close waits for our answers to the
     * server's requests too, and would otherwise wait out its grace. */
    if (a->interrupted && ev->kind != MCPW_EVENT_CLOSED && ev->kind != MCPW_EVENT_READY &&
        ev->kind != MCPW_EVENT_REQUEST)
        return;
    switch (ev->kind) {
    case MCPW_EVENT_READY: {
        mcpw_conn *conn = conn_of(a);
        if (a->interrupted) {
            /* The signal came during the handshake: now that the session exists, end it. */
            close_connection(a);
            break;
        }
        mcpw_str info = NO_VIEW;
        if (conn == NULL || !ok(a, mcpw_conn_peer_info(conn, &info), "mcpw_conn_peer_info")) break;
        printf("connect: protocolVersion=%.*s server=%.*s\n", print_len(ev->version),
               print_ptr(ev->version), print_len(info), print_ptr(info));
        a->problem[0] = '\0'; /* an auto-era probe refused by a legacy server is behind us */
        a->step = "tools";
        send_request(a, "tools/list", NULL, 0);
        a->phase = WAIT_TOOLS;
        break;
    }
    case MCPW_EVENT_RESPONSE:
        if (ev->request == a->pending) on_result(a, ev->result);
        break;
    case MCPW_EVENT_PROGRESS:
        if (ev->request == a->pending && a->phase == WAIT_PROGRESS) a->progress_seen++;
        break;
    case MCPW_EVENT_ERROR:
        fail(a, "the server answered with error %lld: %.*s%s%.*s", (long long)ev->code,
             print_len(ev->message), print_ptr(ev->message), ev->data.ptr ? " data: " : "",
             print_len(ev->data), print_ptr(ev->data));
        break;
    case MCPW_EVENT_TIMED_OUT:
        fail(a, "request %lld got no answer within %lu s%s", (long long)ev->request,
             a->opts.timeout_s, why);
        break;
    case MCPW_EVENT_ABANDONED:
        fail(a, "request %lld was abandoned: the connection ended%s", (long long)ev->request, why);
        break;
    case MCPW_EVENT_INVALID_RESPONSE:
        fail(a, "the server answered request %lld with something invalid", (long long)ev->request);
        break;
    case MCPW_EVENT_FAILED:
        /* The HTTP exchange carrying the request failed: an error status without a JSON-RPC
         * answer (code is the status), a broken connection, a stream that ended early and could
         * not be resumed (code 0). The message says which; `why` adds curl's or the body's
         * words. */
        fail(a, "request %lld failed: %.*s%s", (long long)ev->request, print_len(ev->message),
             print_ptr(ev->message), why);
        break;
    case MCPW_EVENT_INPUT_REQUIRED:
        fail(a, "the server needs input (elicitation, sampling, roots) this client does not give");
        break;
    case MCPW_EVENT_URL_ELICITATION_REQUIRED:
        /* The server answered -32042: the user must visit a URL first. That ends the request. */
        fail(a, "request %lld: the server needs the user to visit a URL first (error -32042): %.*s",
             (long long)ev->request, print_len(ev->data), print_ptr(ev->data));
        break;
    case MCPW_EVENT_TASK_CREATED:
        /* Only when the request asked for a task, which this client never does. */
        fail(a, "request %lld: the server answered with a task, which this client does not follow",
             (long long)ev->request);
        break;
    case MCPW_EVENT_REQUEST: {
        /* We declared no capabilities, so there is nothing to offer the server. */
        mcpw_conn *conn = conn_of(a);
        mcpw_result rc;
        if (conn == NULL) break;
        rc = mcpw_conn_respond_error(conn, &ev->id, MCPW_JSONRPC_METHOD_NOT_FOUND,
                                     S("not supported by this client"), NULL, 0);
        /* A request read after a close ended the connection (one with no grace, after a
         * failure, or one whose grace ran out: MCPW_ERR_CLOSED) was answered by the engine as
         * it closed (-32603, "the connection is closing"): nothing is left to do. Anything
         * else is a real failure. */
        if (rc != MCPW_ERR_CLOSED) {
            ok(a, rc, "mcpw_conn_respond_error");
        }
        break;
    }
    case MCPW_EVENT_CLOSED:
        if (a->phase == WAIT_CLOSED && ev->close_reason == MCPW_CLOSE_LOCAL) {
            bool queued = false;
            /* Handshake era: DELETE frees the session on the server at once. */
            if (!ok(a, mcpw_http_client_end_session(a->client, &queued),
                    "mcpw_http_client_end_session")) {
                break;
            }
            if (queued) {
                a->step = "end session";
                a->delete_expected = 1;
                a->phase = WAIT_DELETE;
            } else {
                printf("session: none to end (the server keeps no session)\n");
                a->phase = DONE;
            }
            break;
        }
        if (ev->close_reason == MCPW_CLOSE_INITIALIZE_REJECTED) {
            /* `version` holds the server's message (or, for -32022, the versions it supports). */
            fail(a, "the connection closed: %s (error %lld: %.*s)%s",
                 close_reason_text(ev->close_reason), (long long)ev->code,
                 print_len(ev->version), print_ptr(ev->version), why);
        } else if (ev->close_reason == MCPW_CLOSE_TRANSPORT_FAILED) {
            /* `version` holds the reason, `code` the HTTP status (or 0). */
            fail(a, "the connection closed: %s: %.*s%s", close_reason_text(ev->close_reason),
                 print_len(ev->version), print_ptr(ev->version), why);
        } else if (ev->close_reason == MCPW_CLOSE_INITIALIZE_TIMED_OUT) {
            fail(a, "the connection closed: no answer to the handshake within %lu s%s",
                 a->opts.timeout_s, why);
        } else if (ev->close_reason == MCPW_CLOSE_UNSUPPORTED_VERSION) {
            fail(a, "the connection closed: %s (%.*s)", close_reason_text(ev->close_reason),
                 print_len(ev->version), print_ptr(ev->version));
        } else {
            fail(a, "the connection closed: %s (reason %d)%s", close_reason_text(ev->close_reason),
                 (int)ev->close_reason, why);
        }
        break;
    case MCPW_EVENT_VIOLATION:
        /* The engine already answered as the spec says; worth a word, not the end. */
        fprintf(stderr,
                "example_http_client: warning: the server broke a protocol rule (violation %d)\n",
                (int)ev->violation);
        break;
    default:
        /* Notifications (list changes, log messages), cancellations, and kinds newer than
         * this program (MCPW_EVENT_OTHER): nothing to do. */
        break;
    }
}

/* ---- The loop -------------------------------------------------------------------------------- */

static void drain_events(app *a) {
    while (!a->failed) {
        mcpw_event ev;
        if (!ok(a, mcpw_http_client_poll_event(a->client, &ev), "mcpw_http_client_poll_event")) {
            return;
        }
        if (ev.kind == MCPW_EVENT_NONE) return;
        on_event(a, &ev);
    }
}

static void drain_actions(app *a) {
    while (!a->failed) {
        mcpw_http_action action;
        if (!ok(a, mcpw_http_client_poll_action(a->client, &action),
                "mcpw_http_client_poll_action")) {
            return;
        }
        if (action.kind == MCPW_HTTP_ACTION_NONE) return;
        if (action.kind == MCPW_HTTP_ACTION_SEND) {
            start_transfer(a, &action);
        } else if (action.kind == MCPW_HTTP_ACTION_ABORT) {
            /* Close the response and say nothing more about it (2026-07-28: a cancel). */
            transfer *t = find_transfer(a, action.exchange);
            if (t != NULL) transfer_free(a, t);
            if (action.exchange == a->delete_exchange && a->phase == WAIT_DELETE) {
                /* The engine gave up on the DELETE (no answer in time, or one that never
                 * ended): the work is done; if the DELETE did not arrive, the server frees the
                 * session at its own timeout. */
                printf("session: the DELETE got no complete answer; the server may keep the "
                       "session until it expires there\n");
                a->phase = DONE;
            }
        }
    }
}

/* Once DONE, whether to go on: a notification that went out (the close's cancellation of a call
 * in flight) may have no response head yet, and freeing its transfer now could cut it off. With
 * a session the DELETE waited for it; a server without sessions has no DELETE, so wait here, for
 * up to two seconds. */
static int still_draining(app *a, uint64_t now) {
    bool unheard = false;
    if (!ok(a, mcpw_http_client_has_unheard(a->client, &unheard), "mcpw_http_client_has_unheard")) {
        return 0;
    }
    if (!unheard) return 0;
    if (a->drain_until == 0) a->drain_until = now + 2 * NS_PER_S;
    return now < a->drain_until;
}

static void run(app *a, uint64_t give_up_at) {
    for (;;) {
        uint64_t now = now_ns(), wait_until = give_up_at, deadline = 0;
        bool has_deadline = false;
        CURLMcode mc;
        CURLMsg *msg;
        int running, left, timeout_ms;

        /* 1. Timers. */
        if (!ok(a, mcpw_http_client_poll_timeout(a->client, &has_deadline, &deadline),
                "mcpw_http_client_poll_timeout")) {
            return;
        }
        if (has_deadline && deadline <= now &&
            !ok(a, mcpw_http_client_handle_timeout(a->client, now),
                "mcpw_http_client_handle_timeout")) {
            return;
        }
        /* A signal: end the session as a normal close would (its requests in flight are
         * cancelled, then the DELETE), unless it is ending already; a second one stops. A
         * session that was over before the first signal is not failed by it: the short wait
         * for late notifications (still_draining) just ends as it would. */
        if (a->phase == DONE && !a->interrupted) {
            /* (nothing: see above) */
        } else if (signals_seen > 1) {
            fail(a, "interrupted twice: stopped without ending the session");
            return;
        } else if (signals_seen > 0 && !a->interrupted) {
            a->interrupted = 1;
            /* During the handshake, the close waits for its end (MCPW_EVENT_READY): closed
             * before the server's answer, the session that answer creates would stay there. */
            if (a->phase > WAIT_READY && a->phase < WAIT_CLOSED) close_connection(a);
        }

        /* 2. Events, which may issue commands; 3. the HTTP requests those produced. */
        drain_events(a);
        drain_actions(a);
        if (a->failed) return;
        if (a->phase == WAIT_DELETE) {
            /* The DELETE waits for the close's cancellations to reach the server; when one of
             * them finds the session gone (404), the engine drops the DELETE unsent, and no
             * SEND or ABORT of it ever comes. */
            bool ending = true;
            if (!ok(a, mcpw_http_client_is_ending_session(a->client, &ending),
                    "mcpw_http_client_is_ending_session")) {
                return;
            }
            if (!ending) {
                printf("session: already gone (the server answered 404 before the DELETE)\n");
                a->phase = DONE;
            }
        }
        if (a->phase == DONE) {
            if (!still_draining(a, now)) return;
            wait_until = a->drain_until;
        } else if (now >= give_up_at) {
            char why[600];
            problem_suffix(a, why, sizeof why);
            fail(a, "no outcome within %lu s%s", a->opts.timeout_s, why);
            return;
        }

        /* 4. Wait for a socket, the engine's deadline or our limit (curl_multi_poll also wakes
         * for curl's own timers), then let curl work; its callbacks feed the engine. */
        if (!ok(a, mcpw_http_client_poll_timeout(a->client, &has_deadline, &deadline),
                "mcpw_http_client_poll_timeout")) {
            return;
        }
        if (has_deadline && deadline < wait_until) wait_until = deadline;
        /* A signal ends curl_multi_poll's wait early; the bound is for a libcurl that waits on
         * after one. */
        if (wait_until > now + 250 * NS_PER_MS) wait_until = now + 250 * NS_PER_MS;
        timeout_ms = 0;
        if (wait_until > now) {
            uint64_t ms = (wait_until - now + NS_PER_MS - 1) / NS_PER_MS;
            timeout_ms = ms > INT_MAX ? INT_MAX : (int)ms;
        }
        mc = curl_multi_poll(a->multi, NULL, 0, timeout_ms, NULL);
        if (mc != CURLM_OK) {
            fail(a, "curl_multi_poll: %s", curl_multi_strerror(mc));
            return;
        }
        mc = curl_multi_perform(a->multi, &running);
        if (mc != CURLM_OK) {
            fail(a, "curl_multi_perform: %s", curl_multi_strerror(mc));
            return;
        }
        if (a->failed) return; /* a callback failed */

        /* 5. Finished transfers. */
        while ((msg = curl_multi_info_read(a->multi, &left)) != NULL && !a->failed) {
            char *private_data = NULL;
            if (msg->msg != CURLMSG_DONE) continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &private_data);
            if (private_data != NULL) {
                finish_transfer(a, (transfer *)private_data, msg->data.result);
            }
        }
    }
}

/* After a failure once the session was ready (an error answer, a call that timed out, an
 * answer that is not the one expected): what a signal does, within 3 s of its own, so that the
 * server is not left running the calls in flight (they are cancelled) or keeping the session
 * (the DELETE) until its own timeouts. The first error stays the one reported. Not after a
 * refusal by the engine itself, when the connection closed already, or after a signal. */
static void end_after_failure(app *a) {
    char error[sizeof a->error];
    const char *step = a->step;
    mcpw_conn *conn;
    mcpw_state state = MCPW_STATE_CLOSED;
    if (!a->failed || a->phase == WAIT_READY || a->phase >= WAIT_CLOSED || signals_seen > 0) {
        return;
    }
    conn = conn_of(a);
    if (conn == NULL || mcpw_conn_state(conn, &state) != MCPW_OK || state == MCPW_STATE_CLOSED) {
        return;
    }
    memcpy(error, a->error, sizeof error);
    a->failed = 0;
    a->ending_after_failure = 1;
    /* No grace: the calls still out are cancelled now, and the close's event starts the
     * DELETE (see MCPW_EVENT_CLOSED). */
    if (mcpw_conn_close(conn, now_ns(), 0) == MCPW_OK) {
        a->phase = WAIT_CLOSED;
        run(a, now_ns() + 3 * NS_PER_S);
    }
    a->ending_after_failure = 0;
    a->failed = 1;
    a->step = step;
    memcpy(a->error, error, sizeof error);
}

static int usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [--era auto|legacy|modern] [--echo-arg NAME] [--echo-expect TEXT]\n"
            "       [--progress-tool NAME] [--progress-args JSON] [--timeout SECS] URL\n",
            argv0);
    return 2;
}

int main(int argc, char **argv) {
    app a;
    mcpw_config *config = NULL;
    mcpw_http_client_options client_options;
    uint64_t start;
    uint64_t timeout_ms;
    int i, status = EXIT_FAILURE;
    CURLcode cc;

    /* Line by line, also into a pipe: what was printed survives however the process ends. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    memset(&a, 0, sizeof a);
    a.step = "connect";
    a.opts.era = MCPW_CLIENT_ERA_AUTO;
    a.opts.echo_arg = "text";
    a.opts.echo_expect = "hello from C";
    a.opts.progress_args = "{}";
    a.opts.timeout_s = 30;
    for (i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (i + 1 < argc && strcmp(arg, "--era") == 0) {
            const char *era = argv[++i];
            if (strcmp(era, "auto") == 0) {
                a.opts.era = MCPW_CLIENT_ERA_AUTO;
            } else if (strcmp(era, "legacy") == 0) {
                a.opts.era = MCPW_CLIENT_ERA_LEGACY;
            } else if (strcmp(era, "modern") == 0) {
                a.opts.era = MCPW_CLIENT_ERA_MODERN;
            } else {
                return usage(argv[0]);
            }
        } else if (i + 1 < argc && strcmp(arg, "--echo-arg") == 0) {
            a.opts.echo_arg = argv[++i];
        } else if (i + 1 < argc && strcmp(arg, "--echo-expect") == 0) {
            a.opts.echo_expect = argv[++i];
        } else if (i + 1 < argc && strcmp(arg, "--progress-tool") == 0) {
            a.opts.progress_tool = argv[++i];
        } else if (i + 1 < argc && strcmp(arg, "--progress-args") == 0) {
            a.opts.progress_args = argv[++i];
        } else if (i + 1 < argc && strcmp(arg, "--timeout") == 0) {
            char *end = NULL;
            errno = 0;
            a.opts.timeout_s = strtoul(argv[++i], &end, 10);
            if (errno != 0 || end == argv[i] || *end != '\0' || a.opts.timeout_s == 0 ||
                a.opts.timeout_s > 86400) {
                return usage(argv[0]);
            }
        } else if (arg[0] != '-' && a.opts.url == NULL) {
            a.opts.url = arg;
        } else {
            return usage(argv[0]);
        }
    }
    if (a.opts.url == NULL ||
        (strncmp(a.opts.url, "http://", 7) != 0 && strncmp(a.opts.url, "https://", 8) != 0)) {
        return usage(argv[0]);
    }
    {
        /* --progress-args must be a JSON object: the library checks it for us. */
        mcpw_str none = NO_VIEW;
        mcpw_result rc =
            mcpw_json_get(a.opts.progress_args, strlen(a.opts.progress_args), S("x"), &none);
        if (rc != MCPW_OK) {
            fprintf(stderr, "example_http_client: --progress-args: %s\n",
                    mcpw_result_message((int)rc));
            return 2;
        }
    }

    /* With CURLOPT_NOSIGNAL, a write to a closed socket must not kill us. */
    signal(SIGPIPE, SIG_IGN);
    {
        /* poll() is never restarted after a signal, so the wait in curl_multi_poll ends;
         * SA_RESTART keeps the signal from failing a write to stdout.
         * A signal ignored when we were started (nohup, a shell's background job) stays
         * ignored, as a program that ends on it would expect. */
        static const int stops[] = {SIGINT, SIGTERM};
        struct sigaction sa, old;
        size_t k;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        for (k = 0; k < sizeof stops / sizeof stops[0]; k++) {
            if (sigaction(stops[k], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
            sigaction(stops[k], &sa, NULL);
        }
    }

    start = now_ns();
    a.rng = (uint32_t)(start ^ (start >> 32) ^ ((uint64_t)getpid() << 16)) | 1u;
    timeout_ms = (uint64_t)a.opts.timeout_s * 1000;

    cc = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (cc != CURLE_OK) {
        fprintf(stderr, "C_CLIENT_FAIL setup: curl_global_init: %s\n", curl_easy_strerror(cc));
        return EXIT_FAILURE;
    }
    a.multi = curl_multi_init();
    if (a.multi == NULL) {
        fail(&a, "curl_multi_init failed");
        goto cleanup;
    }

    if (!ok(&a,
            mcpw_config_new(MCPW_ROLE_CLIENT, S("mcpwire-c-http-client"), S(MCPWIRE_VERSION),
                            &config),
            "mcpw_config_new") ||
        /* Each request may take as long as the whole run; the run's limit is the real bound. */
        !ok(&a, mcpw_config_set_timeouts(config, timeout_ms, timeout_ms),
            "mcpw_config_set_timeouts") ||
        !ok(&a, mcpw_config_set_client_era(config, a.opts.era), "mcpw_config_set_client_era")) {
        goto cleanup;
    }
    memset(&client_options, 0, sizeof client_options); /* the defaults; no standalone GET stream */
    if (!ok(&a, mcpw_http_client_new(config, start, &client_options, &a.client),
            "mcpw_http_client_new")) {
        goto cleanup;
    }
    mcpw_config_free(config); /* the client keeps its own copy */
    config = NULL;
    {
        mcpw_conn *conn = conn_of(&a);
        if (conn == NULL ||
            !ok(&a, mcpw_conn_input_piece(conn, &a.piece), "mcpw_conn_input_piece")) {
            goto cleanup;
        }
    }

    run(&a, start + timeout_ms * NS_PER_MS);
    end_after_failure(&a);
    if (!a.failed && a.interrupted) {
        a.step = "interrupted";
        fail(&a, "stopped by a signal, after closing the connection cleanly");
    }
    if (!a.failed) {
        mcpw_conn *conn = conn_of(&a);
        mcpw_str version = NO_VIEW;
        if (conn != NULL &&
            ok(&a, mcpw_conn_protocol_version(conn, &version), "mcpw_conn_protocol_version")) {
            printf("C_CLIENT_OK %.*s\n", print_len(version), version.ptr ? version.ptr : "?");
            status = EXIT_SUCCESS;
        }
    }

cleanup:
    if (a.failed) {
        fflush(stdout);
        fprintf(stderr, "C_CLIENT_FAIL %s: %s\n", a.step, a.error);
    }
    while (a.transfers != NULL) transfer_free(&a, a.transfers);
    if (a.multi != NULL) curl_multi_cleanup(a.multi);
    mcpw_http_client_free(a.client);
    mcpw_config_free(config);
    curl_global_cleanup();
    return status;
}
