/*
 * An MCP server over stdio in plain C, on the mcpwire engine and poll().
 *
 * It speaks both protocol eras (the initialize handshake and the stateless 2026-07-28), or
 * only the handshake era with --legacy. It serves:
 *   - tool "echo" {text}: returns the text exactly;
 *   - tool "add" {a, b}: returns the sum of the two numbers as text;
 *   - tool "count": reports progress 1/3, 2/3, 3/3 about 50 ms apart, then answers;
 *   - resource "mem://greeting" (text/plain);
 *   - prompt "greet".
 *
 * The run loop is the one every mcpwire host has: wait (poll) until stdin is readable, stdout
 * is writable or the next deadline passes; feed what happened to the engine; then drain its
 * events (answering requests), write what it lends until stdout would block, and re-arm the
 * timer from the earliest of the engine's deadline and our own "count" timers.
 *
 * It never loses an answer:
 *   - backpressure: while output waits for the client to read it, stdin is read only until
 *     HIGH_WATER (1 MiB) of output waits, so a slow client slows the requests down instead of
 *     filling memory (and a client that never reads just stalls, holding at most one read of
 *     input). Reading on below that mark matters: a client that writes its pipelined
 *     requests before it reads the answers (many scripts do) would otherwise be blocked
 *     writing to us while we wait for it to read, and the two would wait for good;
 *   - input is fed to the engine a piece at a time (mcpw_conn_input_piece: 4 KiB, less under
 *     lowered limits), answering as it goes, so thousands of requests in one read are all
 *     answered (the engine bounds requests in flight);
 *   - at end of input every answer already given is written, whole, before the process
 *     exits. Work still running then (a "count" under way) is dropped with the session, as
 *     the engine abandons requests in flight at end of input: the client has gone. The
 *     first SIGINT or SIGTERM ends the input the same way, but first refuses the requests
 *     still running (-32603: a client may still read), and the server then ends by that
 *     signal, at the latest 3 s later (a client that stopped reading keeps nothing running);
 *     a second one ends it at once.
 *
 * Build: make -C bindings/c (see README.md); run: target/c-bindings/example_server
 */
#define _POSIX_C_SOURCE 200809L

#include "mcpwire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S(lit) (lit), (sizeof(lit) - 1)
#define COUNT_STEPS 3
#define COUNT_INTERVAL_NS (50ull * 1000 * 1000)
/* After the first SIGINT or SIGTERM, how long the answers already given may take to leave. */
#define STOP_GRACE_NS (3ull * 1000 * 1000 * 1000)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The flags stdin and stdout had: they are shared with whoever else holds them (a terminal,
   the parent's pipes), so they are put back when the server ends: normally, on an error, or
   on SIGINT or SIGTERM. */
static int stdin_flags = -1, stdout_flags = -1;

static void restore_flags(void) {
    if (stdin_flags >= 0) fcntl(STDIN_FILENO, F_SETFL, stdin_flags);
    if (stdout_flags >= 0) fcntl(STDOUT_FILENO, F_SETFL, stdout_flags);
}

/* The first SIGINT or SIGTERM (Ctrl-C in a terminal): the server stops reading, as at the
   end of input, writes every answer it already gave, and then ends by that signal. A second
   one ends it at once: the flags back, then the default end (fcntl, signal and raise are
   async-signal-safe). */
static volatile sig_atomic_t stop_signal = 0;
/* Written to by the handler, watched by poll(): a signal that comes just before the loop
   waits still wakes it (the self-pipe trick). */
static int wake_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    if (stop_signal == 0) {
        int saved = errno;
        stop_signal = sig;
        if (wake_pipe[1] >= 0) (void)!write(wake_pipe[1], "", 1);
        errno = saved;
        return;
    }
    restore_flags();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Installs on_signal for `sig`, unless the server was started ignoring it (as a background
   job or under nohup: it stays ignored). With sigaction, not signal(): under -std=c11, glibc's
   signal() gives System V semantics, a handler that runs once, so the second signal took the
   default end without the flags put back. */
static void handle_signal(int sig) {
    struct sigaction action, old;
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN) return;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0; /* (no SA_RESTART: a blocked call returns, and the loop looks) */
    sigaction(sig, &action, NULL);
}

static void die(const char *what, mcpw_result rc) {
    restore_flags();
    fprintf(stderr, "example_server: %s: %s\n", what, mcpw_result_message((int)rc));
    exit(EXIT_FAILURE);
}

static void *checked_malloc(size_t size) {
    void *p = malloc(size);
    if (p == NULL) {
        restore_flags();
        fprintf(stderr, "example_server: out of memory\n");
        exit(EXIT_FAILURE);
    }
    return p;
}

/* ---- Owned ids ----------------------------------------------------------------------------- */

/* An event's id is a view that dies with the event: a job that answers later keeps a copy. */
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

/* ---- The "count" tool's jobs ------------------------------------------------------------- */

typedef struct job {
    owned_id request;
    int step;
    uint64_t due_ns;
    /* An answer the engine refused for now (MCPW_ERR_OUTPUT_FULL), given again later: its
       result, or its error's message (`code` non-zero); NULL for a "count" still counting. */
    char *answer;
    size_t answer_len;
    int64_t code;
    struct job *next;
} job;

static job *jobs;
/* How many answers wait in jobs: no more input is read meanwhile (see the loop). */
static size_t answers_waiting;

static void job_free(job *j) {
    if (j->answer != NULL) answers_waiting--;
    free(j->request.text);
    free(j->answer);
    free(j);
}

static job *start_job(const mcpw_id *id, uint64_t now) {
    job *j = checked_malloc(sizeof *j);
    j->request = own_id(id);
    j->step = 0;
    j->due_ns = now + COUNT_INTERVAL_NS;
    j->answer = NULL;
    j->answer_len = 0;
    j->code = 0;
    j->next = jobs;
    jobs = j;
    return j;
}

static void start_count(const mcpw_id *id, uint64_t now) { (void)start_job(id, now); }

/* Keeps an answer the engine refused for now, to give it again later. The output is not
   full of what the client is slow to read (the loop writes ahead of every event, below
   HIGH_WATER), but of the answers collected for 2025-03-26 batches still open: they leave
   once their last member is answered. */
static void answer_later(const mcpw_id *id, int64_t code, const char *text, size_t len) {
    job *j = start_job(id, now_ns());
    j->step = COUNT_STEPS; /* (nothing left to count: the answer is all) */
    j->answer = checked_malloc(len + 1);
    if (len > 0) memcpy(j->answer, text, len);
    j->answer_len = len;
    j->code = code;
    answers_waiting++;
}

static void cancel_job(const mcpw_id *id) {
    job **at = &jobs;
    while (*at != NULL) {
        if (same_id(&(*at)->request.id, id)) {
            job *gone = *at;
            *at = gone->next;
            job_free(gone);
            return;
        }
        at = &(*at)->next;
    }
}

/* Advances every job that is due: one progress notification per step, then the answer. */
static void run_jobs(mcpw_conn *conn, uint64_t now) {
    job **at = &jobs;
    while (*at != NULL) {
        job *j = *at;
        if (j->due_ns > now) {
            at = &j->next;
            continue;
        }
        mcpw_result rc;
        if (j->step < COUNT_STEPS) {
            j->step++;
            /* Progress only reaches a client that asked for it; without a token the engine
               says MCPW_ERR_NO_PROGRESS_TOKEN, which is fine: we just count silently. */
            rc = mcpw_conn_progress(conn, &j->request.id, (double)j->step, COUNT_STEPS, true,
                                    S("counting"));
            if (rc == MCPW_ERR_OUTPUT_FULL) {
                /* The client is behind in reading: this step again later, nothing dropped. */
                j->step--;
                j->due_ns = now + COUNT_INTERVAL_NS;
                at = &j->next;
                continue;
            }
            if (rc != MCPW_OK && rc != MCPW_ERR_NO_PROGRESS_TOKEN) {
                /* Cancelled meanwhile, or the connection closed: drop the job. */
                *at = j->next;
                job_free(j);
                continue;
            }
            if (j->step < COUNT_STEPS) {
                j->due_ns = now + COUNT_INTERVAL_NS;
                at = &j->next;
                continue;
            }
        }
        /* Every step reported: the answer. After a full output only the answer is tried
           again (a step reported twice would not increase, and the engine refuses that). */
        if (j->answer != NULL && j->code != 0) {
            rc = mcpw_conn_respond_error(conn, &j->request.id, j->code, j->answer,
                                         j->answer_len, NULL, 0);
        } else if (j->answer != NULL) {
            rc = mcpw_conn_respond(conn, &j->request.id, j->answer, j->answer_len);
        } else {
            rc = mcpw_conn_respond(conn, &j->request.id,
                                   S("{\"content\":[{\"type\":\"text\",\"text\":\"counted "
                                     "to 3\"}],\"isError\":false}"));
        }
        if (rc == MCPW_ERR_OUTPUT_FULL) {
            j->due_ns = now + COUNT_INTERVAL_NS;
            at = &j->next;
            continue;
        }
        if (rc != MCPW_OK && rc != MCPW_ERR_CLOSED && rc != MCPW_ERR_UNKNOWN_REQUEST) {
            die("respond", rc);
        }
        *at = j->next;
        job_free(j);
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

/* ---- Requests ---------------------------------------------------------------------------- */

static const char TOOLS[] =
    "{\"tools\":["
    "{\"name\":\"echo\",\"description\":\"Returns its text argument\",\"inputSchema\":"
    "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]}},"
    "{\"name\":\"add\",\"description\":\"Adds two numbers\",\"inputSchema\":"
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"}},"
    "\"required\":[\"a\",\"b\"]}},"
    "{\"name\":\"count\",\"description\":\"Counts to three, reporting progress\",\"inputSchema\":"
    "{\"type\":\"object\",\"properties\":{}}}]}";
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

/* MCPW_ERR_CLOSED: the connection closed (the client's input ended) before this answer; there
   is no one left to answer, which is not an error of this server. MCPW_ERR_OUTPUT_FULL: given
   again a little later (answer_later), never dropped. */
static void respond(mcpw_conn *conn, const mcpw_id *id, const char *json, size_t len) {
    mcpw_result rc = mcpw_conn_respond(conn, id, json, len);
    if (rc == MCPW_ERR_OUTPUT_FULL) {
        answer_later(id, 0, json, len);
    } else if (rc != MCPW_OK && rc != MCPW_ERR_CLOSED) {
        die("respond", rc);
    }
}

static void respond_error(mcpw_conn *conn, const mcpw_id *id, int64_t code, const char *message) {
    mcpw_result rc = mcpw_conn_respond_error(conn, id, code, message, strlen(message), NULL, 0);
    if (rc == MCPW_ERR_OUTPUT_FULL) {
        answer_later(id, code, message, strlen(message));
    } else if (rc != MCPW_OK && rc != MCPW_ERR_CLOSED) {
        die("respond_error", rc);
    }
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

static void on_request(mcpw_conn *conn, const mcpw_event *ev, uint64_t now) {
    /* The event's views die at the next call that changes the connection (mcpwire.h), and an
       answer is such a call: when the engine refuses it for now (MCPW_ERR_OUTPUT_FULL), the
       id it needs again later must not point into the event any more. So the id is copied
       first (only a string id allocates; numbers, the usual kind, do not). The method and
       params are read before any call. */
    owned_id own = own_id(&ev->id);
    const mcpw_id *id = &own.id;
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
            start_count(id, now); /* answered by run_jobs */
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

/* Output the loop lets build up before it writes ahead of the next event, so that every
   event's answers find room in the engine's output (16 MiB by default). */
#define HIGH_WATER (1u << 20)

/* The bytes the engine has for stdout. */
static size_t pending_bytes(mcpw_conn *conn) {
    const uint8_t *bytes;
    size_t len = 0;
    uint64_t stream;
    if (mcpw_conn_transmit(conn, &bytes, &len, &stream) != MCPW_OK) return 0;
    return len;
}

/* Drains the events; returns 0 once the connection has closed, 2 when it stopped with events
   left because the output passed HIGH_WATER (write it, then call again), 1 otherwise. */
static int drain_events(mcpw_conn *conn, uint64_t now) {
    for (;;) {
        mcpw_event ev;
        mcpw_result rc;
        if (pending_bytes(conn) >= HIGH_WATER) return 2;
        rc = mcpw_conn_poll_event(conn, &ev);
        if (rc != MCPW_OK) die("poll_event", rc);
        switch (ev.kind) {
        case MCPW_EVENT_NONE:
            return 1;
        case MCPW_EVENT_REQUEST:
            on_request(conn, &ev, now);
            break;
        case MCPW_EVENT_PEER_CANCELLED:
            cancel_job(&ev.id);
            break;
        case MCPW_EVENT_CLOSED:
            return 0;
        default:
            break; /* ready, notifications, the peer's mistakes: nothing to do */
        }
    }
}

/* Writes what the engine lends until stdout would block. Returns 1 when output is left. */
static int flush_output(mcpw_conn *conn, int *stdout_open) {
    for (;;) {
        const uint8_t *bytes;
        size_t len;
        uint64_t stream;
        ssize_t n;
        mcpw_result rc = mcpw_conn_transmit(conn, &bytes, &len, &stream);
        if (rc != MCPW_OK) die("transmit", rc);
        if (len == 0) return 0;
        if (!*stdout_open) {
            rc = mcpw_conn_consume(conn, len); /* nobody to write to: discard */
            if (rc != MCPW_OK) die("consume", rc);
            continue;
        }
        n = write(STDOUT_FILENO, bytes, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 1;
            *stdout_open = 0; /* EPIPE: the client went away */
            continue;
        }
        rc = mcpw_conn_consume(conn, (size_t)n); /* partial writes are fine */
        if (rc != MCPW_OK) die("consume", rc);
    }
}

/* Writes everything left: the last answers before exiting. It waits for a client that reads
   however long it takes; once SIGINT or SIGTERM has come (before, at `stop_at`, or during
   this wait), for STOP_GRACE_NS from then at most: a client that stopped reading does not
   keep the server running. */
static void drain_output(mcpw_conn *conn, int *stdout_open, uint64_t stop_at) {
    while (*stdout_open && flush_output(conn, stdout_open) && *stdout_open) {
        struct pollfd fds[2] = {{.fd = STDOUT_FILENO, .events = POLLOUT},
                                {.fd = wake_pipe[0], .events = POLLIN}};
        int timeout_ms = -1;
        uint64_t now = now_ns();
        if (stop_signal != 0) {
            if (stop_at == 0) stop_at = now + STOP_GRACE_NS;
            if (now >= stop_at) return;
            timeout_ms = (int)((stop_at - now + 999999) / 1000000);
        }
        if (poll(fds, wake_pipe[0] >= 0 ? 2 : 1, timeout_ms) < 0 && errno != EINTR) return;
        if (fds[1].revents & POLLIN) { /* the signal's wake-up, heard: stop_signal says it */
            char sink[16];
            while (read(wake_pipe[0], sink, sizeof sink) > 0) {
            }
        }
    }
}

int main(int argc, char **argv) {
    mcpw_config *config = NULL;
    mcpw_conn *conn = NULL;
    mcpw_result rc;
    int fd, stdin_open = 1, stdout_open = 1, running = 1;
    uint64_t stop_at = 0; /* after a signal: when the answers stop being waited for */
    uint8_t buf[64 * 1024];
    size_t buf_len = 0, buf_fed = 0; /* the last read, and how much the engine has had */

    if (argc > 2 || (argc == 2 && strcmp(argv[1], "--legacy") != 0)) {
        fprintf(stderr, "usage: %s [--legacy]\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    /* Descriptors 0-2 are open (on /dev/null if we were started without them) before the
       wake-up pipe is made: else the pipe could land on 0 or 1, and the server would read
       its own pipe as stdin, which never ends, or write its answers into it. A closed stdin
       then reads as the end of input at once. */
    for (fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int null = open("/dev/null", O_RDWR);
            if (null < 0) {
                perror("example_server: open /dev/null");
                return EXIT_FAILURE;
            }
            if (null != fd) {
                fprintf(stderr, "example_server: descriptor %d is closed and cannot be "
                        "reopened\n", fd);
                return EXIT_FAILURE;
            }
        }
    }
    if (pipe(wake_pipe) == 0) {
        fcntl(wake_pipe[0], F_SETFL, O_NONBLOCK);
        fcntl(wake_pipe[1], F_SETFL, O_NONBLOCK);
    }
    stdin_flags = fcntl(STDIN_FILENO, F_GETFL);
    stdout_flags = fcntl(STDOUT_FILENO, F_GETFL);
    handle_signal(SIGINT);
    handle_signal(SIGTERM);
    fcntl(STDIN_FILENO, F_SETFL, stdin_flags | O_NONBLOCK);
    fcntl(STDOUT_FILENO, F_SETFL, stdout_flags | O_NONBLOCK);

    rc = mcpw_config_new(MCPW_ROLE_SERVER, S("mcpwire-c-example"), S(MCPWIRE_VERSION), &config);
    if (rc != MCPW_OK) die("config", rc);
    rc = mcpw_config_set_capabilities(config, S("{\"tools\":{},\"resources\":{},\"prompts\":{}}"));
    if (rc != MCPW_OK) die("capabilities", rc);
    rc = mcpw_config_set_instructions(config, S("Try the echo and count tools."));
    if (rc != MCPW_OK) die("instructions", rc);
    if (argc > 1 && strcmp(argv[1], "--legacy") == 0) {
        static const mcpw_str legacy[] = {{"2024-11-05", 10}, {"2025-03-26", 10},
                                          {"2025-06-18", 10}, {"2025-11-25", 10}};
        rc = mcpw_config_set_versions(config, legacy, sizeof legacy / sizeof legacy[0]);
        if (rc != MCPW_OK) die("versions", rc);
    }
    rc = mcpw_conn_new(config, now_ns(), &conn);
    mcpw_config_free(config);
    if (rc != MCPW_OK) die("conn", rc);
    /* How much input the engine gets between drains: fewer complete requests than it holds
       in flight fit in a piece (4 KiB, less under lowered limits). */
    size_t feed;
    rc = mcpw_conn_input_piece(conn, &feed);
    if (rc != MCPW_OK) die("input piece", rc);

    while (running) {
        struct pollfd fds[3];
        nfds_t nfds = 0;
        int drained, pending_output, timeout_ms = -1;
        bool has_deadline;
        uint64_t deadline, wake, now = now_ns();

        /* Stopped by a signal: as at the end of input (what was read and not yet fed goes
           unanswered, as requests the client had not yet sent would). The answers given
           then get STOP_GRACE_NS to reach a client that reads; one that has stopped reading
           does not keep the server running. */
        if (stop_signal != 0 && stop_at == 0) {
            stop_at = now + STOP_GRACE_NS;
            if (stdin_open) {
                stdin_open = 0;
                buf_fed = buf_len;
                /* Unlike a real end of input, the client may still read: the requests still
                   running (a "count") are refused (-32603) rather than dropped unanswered. */
                rc = mcpw_conn_refuse_peer_requests(conn, S("the server is stopping"), NULL);
                if (rc != MCPW_OK && rc != MCPW_ERR_CLOSED) die("refuse_peer_requests", rc);
                rc = mcpw_conn_handle_eof(conn, now);
                if (rc != MCPW_OK) die("handle_eof", rc);
            }
        }
        /* (Also when the input had ended before the signal, and the last answers wait for a
           client that does not read them.) */
        if (stop_at != 0 && now >= stop_at) break;

        /* Drain after every mutation: events (which may answer), then bytes. */
        drained = drain_events(conn, now);
        running = drained != 0;
        pending_output = flush_output(conn, &stdout_open);
        if (!running && (!pending_output || !stdout_open)) break;
        /* Input goes in while no output waits, or while what waits is under HIGH_WATER (the
           client may be blocked writing to us, and read only once it is done). */
        int room = (!pending_output || !stdout_open || pending_bytes(conn) < HIGH_WATER) &&
                   answers_waiting == 0;
        /* Events wait behind the output: once it is back under HIGH_WATER they come first,
           before any more input is read (until then the wait below is for stdout alone).
           Reading on would meet the end of the input with requests still queued, and
           handle_eof would close the connection before they were answered. */
        if (drained == 2 && room) continue;
        /* The rest of the last read, a piece at a time, before anything else is read. */
        if (running && drained != 2 && room && buf_fed < buf_len) {
            size_t piece = buf_len - buf_fed < feed ? buf_len - buf_fed : feed;
            rc = mcpw_conn_handle_input(conn, now, buf + buf_fed, piece);
            if (rc != MCPW_OK) die("handle_input", rc);
            buf_fed += piece;
            continue;
        }

        /* Re-arm the timer: the engine's deadline or our next "count" step. */
        rc = mcpw_conn_poll_timeout(conn, &has_deadline, &deadline);
        if (rc != MCPW_OK) die("poll_timeout", rc);
        wake = earliest_job();
        if (has_deadline && deadline < wake) wake = deadline;
        if (stop_at != 0 && stop_at < wake) wake = stop_at;
        if (wake != UINT64_MAX) {
            uint64_t wait_ns = wake > now ? wake - now : 0;
            uint64_t ms = (wait_ns + 999999) / 1000000;
            timeout_ms = ms > INT_MAX ? INT_MAX : (int)ms;
        }

        /* Backpressure: no new input while HIGH_WATER of output waits for the client. */
        int want_input = stdin_open && running && room && drained != 2 && buf_fed == buf_len;
        if (want_input) {
            fds[nfds].fd = STDIN_FILENO;
            fds[nfds].events = POLLIN;
            nfds++;
        }
        if (pending_output && stdout_open) {
            fds[nfds].fd = STDOUT_FILENO;
            fds[nfds].events = POLLOUT;
            nfds++;
        }
        if (nfds == 0 && timeout_ms < 0) break; /* nothing can ever happen again */
        if (stop_at == 0 && wake_pipe[0] >= 0) { /* (until a stop is acted on, at the top) */
            fds[nfds].fd = wake_pipe[0];
            fds[nfds].events = POLLIN;
            nfds++;
        }
        if (poll(fds, nfds, timeout_ms) < 0 && errno != EINTR) {
            perror("example_server: poll");
            break;
        }

        now = now_ns();
        if (want_input) {
            ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
            if (n > 0) {
                buf_len = (size_t)n; /* fed a piece at a time from the top of the loop */
                buf_fed = 0;
            } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                stdin_open = 0;
                rc = mcpw_conn_handle_eof(conn, now);
                if (rc != MCPW_OK) die("handle_eof", rc);
            }
        }
        rc = mcpw_conn_handle_timeout(conn, now); /* early calls do nothing */
        if (rc != MCPW_OK) die("handle_timeout", rc);
        run_jobs(conn, now);
    }

    /* Every answer already given leaves, whole, before we exit; after a signal, within its
       grace (a client that stopped reading does not keep the server running). */
    drain_output(conn, &stdout_open, stop_at);
    while (jobs != NULL) {
        job *j = jobs;
        jobs = j->next;
        job_free(j);
    }
    mcpw_conn_free(conn);
    restore_flags();
    if (stop_signal != 0) { /* the signal's own end, now that the answers are out */
        signal(stop_signal, SIG_DFL);
        raise(stop_signal);
    }
    return EXIT_SUCCESS;
}
