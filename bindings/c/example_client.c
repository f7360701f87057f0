/*
 * An MCP client in plain C, on the mcpwire engine and poll(): it starts a server command with
 * its stdin and stdout on pipes and runs a session against it: initialize, tools/list, the
 * echo tool, a tool with progress, resources/list + resources/read, prompts/list +
 * prompts/get, ping (the handshake era has it), and a graceful close. It prints one line per step and ends with
 * "C_CLIENT_OK <protocol version>" (exit 0), or "C_CLIENT_FAIL <step>: <reason>" (exit 1).
 *
 * Usage:
 *   example_client [--era auto|legacy|modern] [--echo-arg NAME] [--echo-expect TEXT]
 *                  [--progress-tool NAME] [--progress-args JSON] -- SERVER-COMMAND [ARGS...]
 *
 * The era is chosen as the engine's default does (auto: probe with server/discover, fall back
 * to initialize) unless --era says otherwise.
 *
 * Against the C example server (defaults: echo {text}, progress tool "count"):
 *   example_client -- target/c-bindings/example_server
 * Against the reference "everything" server:
 *   example_client --echo-arg message --echo-expect 'Echo: hello from C' \
 *     --progress-tool trigger-long-running-operation --progress-args '{"duration":1,"steps":3}' \
 *     -- node tests/peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio
 */
#define _POSIX_C_SOURCE 200809L

#include "mcpwire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S(lit) (lit), (sizeof(lit) - 1)
#define SESSION_LIMIT_NS (60ull * 1000 * 1000 * 1000)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *step = "connect";
static pid_t child = -1;
/* A SIGINT, SIGTERM or SIGHUP received (0: none): the session ends with it at the next turn
   of the loop, and the server is stopped as on any failure (told what we gave up on, its stdin
   closed, then signals). */
static volatile sig_atomic_t got_signal = 0;

static void on_signal(int sig) { got_signal = sig; }

/* The connection, for the way out of a failure. */
static mcpw_conn *the_conn = NULL;

/* Our ends of the server's stdin and stdout. */
static int to_server = -1, from_server = -1;

/* Stops the server as the spec's stdio shutdown says: its stdin closed first, then, if it has
   not exited within a second, SIGTERM, and SIGKILL two seconds later. Its stdout is closed
   too (we read no more of it): a server that writes its last answers as its input ends, as
   a server that drains before exiting does, gets EPIPE and ends, where it would block on a
   full pipe until killed. */
static void stop_child(void) {
    int status, waited;
    if (child <= 0) return;
    if (from_server >= 0) {
        close(from_server);
        from_server = -1;
    }
    if (to_server >= 0) {
        close(to_server);
        to_server = -1;
        for (waited = 0; waited < 100 && waitpid(child, &status, WNOHANG) == 0; waited++) {
            struct timespec pause = {0, 10 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
        if (waited < 100) {
            child = -1;
            return;
        }
    }
    kill(child, SIGTERM);
    for (waited = 0; waited < 200 && waitpid(child, &status, WNOHANG) == 0; waited++) {
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    if (waited == 200) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
    }
    child = -1;
}

/* Before the server is stopped: our requests still in flight are cancelled (the engine queues
   a notifications/cancelled for each, as the spec asks of a client that stops waiting), and
   everything the engine holds for the server is written, for up to a second. Return codes
   are not checked: this runs on the way out of a failure, which may be the engine's own. */
/* Writes out what the connection still holds, waiting for a server that reads slowly until
   `until` at most; stops early when the server is gone. */
static void write_out_before(uint64_t until) {
    if (the_conn == NULL || to_server < 0) return;
    for (;;) {
        const uint8_t *bytes;
        size_t len;
        uint64_t stream;
        ssize_t n;
        if (mcpw_conn_transmit(the_conn, &bytes, &len, &stream) != MCPW_OK || len == 0) return;
        n = write(to_server, bytes, len);
        if (n > 0) {
            (void)mcpw_conn_consume(the_conn, (size_t)n);
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && now_ns() < until) {
            struct pollfd p;
            p.fd = to_server;
            p.events = POLLOUT;
            (void)poll(&p, 1, 100);
        } else if (!(n < 0 && errno == EINTR)) {
            return; /* the server is gone, or stopped reading */
        }
    }
}

static void tell_server_before_stopping(void) {
    uint64_t now;
    if (the_conn == NULL || to_server < 0) return;
    now = now_ns();
    (void)mcpw_conn_close(the_conn, now, 0);
    (void)mcpw_conn_handle_timeout(the_conn, now);
    write_out_before(now + 1000000000ull);
}

static void fail(const char *fmt, ...) {
    va_list args;
    char text[1024];
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    /* The message may quote the server's text (an error's message, a version): one line, and
     * no control character (an escape sequence) reaches the terminal. */
    for (char *c = text; *c != '\0'; c++) {
        if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f) *c = ' ';
    }
    printf("C_CLIENT_FAIL %s: %s", step, text);
    printf("\n");
    fflush(stdout);
    tell_server_before_stopping();
    stop_child();
    exit(EXIT_FAILURE);
}

/* Why the connection closed, in words. */
static const char *close_reason_text(uint32_t reason) {
    switch (reason) {
    case MCPW_CLOSE_LOCAL: return "closed here";
    case MCPW_CLOSE_EOF: return "the server closed its output (it exited, or never started)";
    case MCPW_CLOSE_UNSUPPORTED_VERSION: return "the server chose a protocol version not offered";
    case MCPW_CLOSE_INITIALIZE_REJECTED: return "the server refused the handshake";
    case MCPW_CLOSE_INVALID_INITIALIZE_RESULT: return "the server's handshake answer is malformed";
    case MCPW_CLOSE_INITIALIZE_TIMED_OUT: return "no answer to the handshake in time";
    case MCPW_CLOSE_PEER_NOT_READING: return "the server stopped reading";
    case MCPW_CLOSE_TRANSPORT_FAILED: return "the transport failed";
    default: return "another reason";
    }
}

static void check(mcpw_result rc, const char *what) {
    if (rc != MCPW_OK) fail("%s: %s", what, mcpw_result_message((int)rc));
}

/* ---- A growable text buffer, for building JSON and keeping copies of views --------------- */

typedef struct {
    char *ptr;
    size_t len, cap;
} buffer;

static void put(buffer *b, const char *text, size_t len) {
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + len + 1) cap *= 2;
        char *grown = realloc(b->ptr, cap);
        if (grown == NULL) fail("out of memory"); /* (b->ptr is still ours to free) */
        b->ptr = grown;
        b->cap = cap;
    }
    if (len > 0) memcpy(b->ptr + b->len, text, len);
    b->len += len;
    b->ptr[b->len] = '\0';
}

static void puts_(buffer *b, const char *text) { put(b, text, strlen(text)); }
static void put_view(buffer *b, mcpw_str s) { put(b, s.ptr, s.len); }

/* A JSON string literal for `text` (UTF-8): '"', '\' and control characters escaped. */
/* Whether the JSON string `json` (quotes included) decodes to `text`. Compare names and texts
   as text, not as JSON: a server may escape any character (Python's json.dumps writes "é" as
   "\u00e9"). A match needs room for strlen(text) bytes only: decoding never lengthens, and
   mcpw_json_string writes nothing when the text does not fit. */
static int json_text_is(mcpw_str json, const char *text) {
    size_t n = strlen(text), len = 0;
    char *buf;
    int same;
    if (json.ptr == NULL) return 0;
    buf = malloc(n + 1);
    if (buf == NULL) fail("out of memory");
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
            /* A control character is not allowed raw in a JSON string. */
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(b, esc, 6);
        } else {
            put(b, text, 1);
        }
    }
    put(b, "\"", 1);
}

static mcpw_str view(const buffer *b) {
    mcpw_str s;
    s.ptr = b->ptr;
    s.len = b->len;
    return s;
}

static mcpw_str member(mcpw_str json, const char *key) {
    mcpw_str value = {NULL, 0};
    if (json.ptr == NULL || mcpw_json_get(json.ptr, json.len, key, strlen(key), &value) != MCPW_OK) {
        value.ptr = NULL;
        value.len = 0;
    }
    return value;
}

/* Every element of the JSON array `json`, read in one pass (mcpw_json_at would read the whole
   text again for each index); *count is 0 when it is absent or no array. Free the result. */
static mcpw_str *elements(mcpw_str json, size_t *count) {
    mcpw_str *all;
    *count = 0;
    if (json.ptr == NULL || mcpw_json_items(json.ptr, json.len, NULL, 0, count) != MCPW_OK ||
        *count == 0) {
        *count = 0;
        return NULL;
    }
    all = calloc(*count, sizeof *all);
    if (all == NULL) fail("out of memory");
    if (mcpw_json_items(json.ptr, json.len, all, *count, count) != MCPW_OK) *count = 0;
    return all;
}

/* How many elements the JSON array `json` has (0 when absent or no array). */
static size_t count_of(mcpw_str json) {
    size_t count = 0;
    if (json.ptr == NULL || mcpw_json_items(json.ptr, json.len, NULL, 0, &count) != MCPW_OK) {
        return 0;
    }
    return count;
}

static mcpw_str element(mcpw_str json, size_t index) {
    mcpw_str value = {NULL, 0};
    if (json.ptr == NULL || mcpw_json_at(json.ptr, json.len, index, &value) != MCPW_OK) {
        value.ptr = NULL;
        value.len = 0;
    }
    return value;
}

static int view_is(mcpw_str s, const char *text) {
    size_t n = strlen(text);
    return s.ptr != NULL && s.len == n && memcmp(s.ptr, text, n) == 0;
}

/* ---- The transport: a child process on two pipes ------------------------------------------ */


static void spawn(char **argv) {
    int in[2], out[2], fd;
    /* Descriptors 0-2 are open (on /dev/null if we were started without them) before the
       pipes are made: else a pipe end could land on 0 or 1, and the dup2 and close below
       would take the server's stdin or stdout away. */
    for (fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int null = open("/dev/null", O_RDWR);
            if (null < 0) fail("open /dev/null: %s", strerror(errno));
            if (null != fd) fail("descriptor %d is closed and cannot be reopened", fd);
        }
    }
    if (pipe(in) < 0 || pipe(out) < 0) fail("pipe: %s", strerror(errno));
    child = fork();
    if (child < 0) fail("fork: %s", strerror(errno));
    if (child == 0) {
        /* We ignore SIGPIPE; the server gets the default back (an ignored signal stays
           ignored across exec), so one that relies on it still ends when its reader goes. */
        signal(SIGPIPE, SIG_DFL);
        dup2(in[0], STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execvp(argv[0], argv);
        fprintf(stderr, "example_client: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_server = in[1];
    from_server = out[0];
    fcntl(to_server, F_SETFL, fcntl(to_server, F_GETFL) | O_NONBLOCK);
    fcntl(from_server, F_SETFL, fcntl(from_server, F_GETFL) | O_NONBLOCK);
}

/* ---- The session ------------------------------------------------------------------------- */

typedef struct {
    uint32_t era;
    const char *echo_arg;
    const char *echo_expect;
    const char *progress_tool;
    const char *progress_args;
} options;

typedef enum {
    WAIT_READY,
    WAIT_TOOLS,
    WAIT_ECHO,
    WAIT_PROGRESS_TOOL,
    WAIT_RESOURCES,
    WAIT_READ,
    WAIT_PROMPTS,
    WAIT_PROMPT,
    WAIT_PING,
    WAIT_CLOSED,
    DONE
} phase;

typedef struct {
    mcpw_conn *conn;
    options opts;
    phase phase;
    int64_t pending; /* the request whose answer moves the session on */
    int has_progress_tool;
    int progress_seen;
    buffer version;
} session;

/* How much output the engine holds, not yet written. */
static size_t pending_bytes(mcpw_conn *conn) {
    const uint8_t *bytes;
    size_t len = 0;
    uint64_t stream;
    if (mcpw_conn_transmit(conn, &bytes, &len, &stream) != MCPW_OK) return 0;
    return len;
}

static void send_request(session *s, uint64_t now, const char *method, mcpw_str params,
                         int with_progress) {
    mcpw_request_options options = {0, 0, MCPW_PROGRESS_RESET_DEFAULT};
    options.progress = with_progress ? 1 : 0;
    check(mcpw_conn_request(s->conn, now, method, strlen(method), params.ptr, params.len, &options,
                            &s->pending),
          method);
}

static const mcpw_str NO_PARAMS = {NULL, 0};

/* Moves the session on with the result of the request it waited for. */
static void on_result(session *s, mcpw_str result, uint64_t now) {
    buffer params = {NULL, 0, 0};
    size_t i;
    switch (s->phase) {
    case WAIT_TOOLS: {
        size_t count = 0;
        mcpw_str *tools = elements(member(result, "tools"), &count);
        int has_echo = 0;
        for (i = 0; i < count; i++) {
            mcpw_str name = member(tools[i], "name");
            if (json_text_is(name, "echo")) has_echo = 1;
            if (s->opts.progress_tool != NULL && json_text_is(name, s->opts.progress_tool)) {
                s->has_progress_tool = 1;
            }
        }
        free(tools);
        if (!has_echo) fail("no tool named echo among %zu tools", count);
        printf("tools: %zu tools listed\n", count);
        step = "echo";
        puts_(&params, "{\"name\":\"echo\",\"arguments\":{");
        put_json_string(&params, s->opts.echo_arg);
        puts_(&params, ":\"hello from C\"}}");
        send_request(s, now, "tools/call", view(&params), 0);
        s->phase = WAIT_ECHO;
        break;
    }
    case WAIT_ECHO: {
        mcpw_str text = member(element(member(result, "content"), 0), "text");
        if (!json_text_is(text, s->opts.echo_expect)) {
            fail("echo returned %.*s, expected \"%s\"", (int)text.len, text.ptr ? text.ptr : "",
                 s->opts.echo_expect);
        }
        printf("echo: %.*s\n", (int)text.len, text.ptr);
        if (s->has_progress_tool) {
            step = "progress";
            puts_(&params, "{\"name\":");
            put_json_string(&params, s->opts.progress_tool);
            puts_(&params, ",\"arguments\":");
            puts_(&params, s->opts.progress_args);
            puts_(&params, "}");
            send_request(s, now, "tools/call", view(&params), 1);
            s->phase = WAIT_PROGRESS_TOOL;
            break;
        }
        printf("progress: skipped (no tool named %s)\n",
               s->opts.progress_tool ? s->opts.progress_tool : "(none)");
    }
        /* fall through */
    case WAIT_PROGRESS_TOOL:
        if (s->phase == WAIT_PROGRESS_TOOL) {
            if (s->progress_seen == 0) fail("no progress notifications arrived");
            printf("progress: %d notifications, then the result\n", s->progress_seen);
        }
        step = "resources";
        send_request(s, now, "resources/list", NO_PARAMS, 0);
        s->phase = WAIT_RESOURCES;
        break;
    case WAIT_RESOURCES: {
        mcpw_str first = element(member(result, "resources"), 0);
        mcpw_str uri = member(first, "uri");
        if (uri.ptr == NULL) fail("resources/list returned no resources");
        printf("resources: first is %.*s\n", (int)uri.len, uri.ptr);
        puts_(&params, "{\"uri\":");
        put_view(&params, uri);
        puts_(&params, "}");
        send_request(s, now, "resources/read", view(&params), 0);
        s->phase = WAIT_READ;
        break;
    }
    case WAIT_READ: {
        i = count_of(member(result, "contents"));
        if (i == 0) fail("resources/read returned no contents");
        printf("resources: read %zu content item(s)\n", i);
        step = "prompts";
        send_request(s, now, "prompts/list", NO_PARAMS, 0);
        s->phase = WAIT_PROMPTS;
        break;
    }
    case WAIT_PROMPTS: {
        mcpw_str prompt = element(member(result, "prompts"), 0), *arguments;
        mcpw_str name = member(prompt, "name");
        size_t count;
        int first = 1;
        if (name.ptr == NULL) fail("prompts/list returned no prompts");
        puts_(&params, "{\"name\":");
        put_view(&params, name);
        puts_(&params, ",\"arguments\":{");
        /* Fill every required argument with "x", as the SDK test clients do. */
        arguments = elements(member(prompt, "arguments"), &count);
        for (i = 0; i < count; i++) {
            if (!view_is(member(arguments[i], "required"), "true")) continue;
            if (!first) puts_(&params, ",");
            put_view(&params, member(arguments[i], "name"));
            puts_(&params, ":\"x\"");
            first = 0;
        }
        free(arguments);
        puts_(&params, "}}");
        printf("prompts: getting %.*s\n", (int)name.len, name.ptr);
        send_request(s, now, "prompts/get", view(&params), 0);
        s->phase = WAIT_PROMPT;
        break;
    }
    case WAIT_PROMPT: {
        mcpw_era era = MCPW_ERA_UNDECIDED;
        i = count_of(member(result, "messages"));
        if (i == 0) fail("prompts/get returned no messages");
        printf("prompts: %zu message(s)\n", i);
        check(mcpw_conn_era(s->conn, &era), "era");
        if (era == MCPW_ERA_LEGACY) {
            step = "ping";
            send_request(s, now, "ping", NO_PARAMS, 0);
            s->phase = WAIT_PING;
            break;
        }
        printf("ping: skipped (the stateless era has none)\n");
    }
        /* fall through */
    case WAIT_PING:
        if (s->phase == WAIT_PING) printf("ping: ok\n");
        step = "close";
        check(mcpw_conn_close(s->conn, now, 1000), "close");
        s->phase = WAIT_CLOSED;
        break;
    default:
        fail("unexpected result in phase %d", (int)s->phase);
    }
    free(params.ptr);
}

static void on_event(session *s, const mcpw_event *ev, uint64_t now) {
    switch (ev->kind) {
    case MCPW_EVENT_READY: {
        mcpw_str info = {NULL, 0};
        check(mcpw_conn_peer_info(s->conn, &info), "peer_info");
        put_view(&s->version, ev->version);
        printf("connect: protocolVersion=%.*s server=%.*s\n", (int)ev->version.len,
               ev->version.ptr, (int)info.len, info.ptr);
        step = "tools";
        send_request(s, now, "tools/list", NO_PARAMS, 0);
        s->phase = WAIT_TOOLS;
        break;
    }
    case MCPW_EVENT_RESPONSE:
        if (ev->request == s->pending) on_result(s, ev->result, now);
        break;
    case MCPW_EVENT_PROGRESS:
        s->progress_seen++;
        break;
    case MCPW_EVENT_ERROR:
        fail("error %lld: %.*s", (long long)ev->code, (int)ev->message.len,
             ev->message.ptr ? ev->message.ptr : "");
        break;
    case MCPW_EVENT_TIMED_OUT:
        fail("request %lld timed out", (long long)ev->request);
        break;
    /* Every other end of a request: this session cannot go on without the result. */
    case MCPW_EVENT_ABANDONED:
        fail("request %lld abandoned: the connection ended first", (long long)ev->request);
        break;
    case MCPW_EVENT_INVALID_RESPONSE:
        fail("request %lld: the server's answer is not a valid result", (long long)ev->request);
        break;
    case MCPW_EVENT_FAILED:
        fail("request %lld failed: %.*s", (long long)ev->request, (int)ev->message.len,
             ev->message.ptr ? ev->message.ptr : "");
        break;
    case MCPW_EVENT_INPUT_REQUIRED:
    case MCPW_EVENT_TASK_CREATED:
    case MCPW_EVENT_URL_ELICITATION_REQUIRED:
        fail("request %lld: the server answered with event %d, which this client does not "
             "handle",
             (long long)ev->request, (int)ev->kind);
        break;
    case MCPW_EVENT_REQUEST: { /* we declared no capabilities: nothing to offer the server */
        mcpw_result rc = mcpw_conn_respond_error(s->conn, &ev->id, MCPW_JSONRPC_METHOD_NOT_FOUND,
                                                 S("not supported by this client"), NULL, 0);
        /* A request that came with the last answer we needed (in the same read) can find the
           connection already closed by our close (MCPW_ERR_CLOSED): the engine answered it
           as it closed, so that is no failure. Any other refusal is one. */
        if (rc != MCPW_ERR_CLOSED) check(rc, "respond_error");
        break;
    }
    case MCPW_EVENT_CLOSED:
        if (s->phase != WAIT_CLOSED || ev->close_reason != MCPW_CLOSE_LOCAL) {
            if (ev->close_reason == MCPW_CLOSE_INITIALIZE_REJECTED) {
                /* `version` holds the server's message (for -32022, its versions). */
                fail("connection closed: %s (error %lld: %.*s)",
                     close_reason_text((uint32_t)ev->close_reason), (long long)ev->code,
                     (int)(ev->version.len > 200 ? 200 : ev->version.len),
                     ev->version.ptr ? (const char *)ev->version.ptr : "");
            }
            fail("connection closed: %s", close_reason_text((uint32_t)ev->close_reason));
        }
        s->phase = DONE;
        break;
    case MCPW_EVENT_VIOLATION:
        /* A server whose output is not JSON-RPC is broken: say so now, not at the timeout. */
        if (ev->violation == MCPW_VIOLATION_PARSE ||
            ev->violation == MCPW_VIOLATION_INVALID_MESSAGE) {
            fail("the server wrote something that is not %s (decode reason %d)",
                 ev->violation == MCPW_VIOLATION_PARSE ? "JSON" : "a JSON-RPC message",
                 (int)ev->decode_reason);
        }
        break;
    default:
        break; /* notifications: nothing to do */
    }
}

int main(int argc, char **argv) {
    session s;
    mcpw_config *config = NULL;
    uint64_t start;
    int i, server_at = -1, input_open = 1;
    /* The server stopped reading (EPIPE): what it wrote before it went is still read, and
       its output's end then says what happened, whichever the client noticed first. */
    int output_broken = 0;
    uint8_t buf[64 * 1024];
    /* What was read and not yet fed: the engine takes it a piece at a time
       (mcpw_conn_input_piece), each piece's events handled before the next. Fed at once, a
       read of a server that pipelines requests made those past max_inbound_in_flight (256)
       wait behind none: the engine refused them as too many in flight. */
    size_t buf_len = 0, buf_fed = 0, piece = 4096;
    /* While this much output waits for a server that reads slowly, no more input is read:
       the server's writes wait instead (backpressure). Past the engine's bound
       (max_buffered_output) the connection would close as if the server did not read. Half
       of it: a server that writes everything before it reads still has that much room. */
    size_t high_water = 8u << 20;

    /* Line by line, also into a pipe: what was printed survives however the process ends. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    memset(&s, 0, sizeof s);
    s.opts.era = MCPW_CLIENT_ERA_AUTO;
    s.opts.echo_arg = "text";
    s.opts.echo_expect = "hello from C";
    s.opts.progress_tool = "count";
    s.opts.progress_args = "{}";
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            server_at = i + 1;
            break;
        } else if (i + 1 < argc && strcmp(argv[i], "--era") == 0) {
            i++;
            if (strcmp(argv[i], "legacy") == 0) {
                s.opts.era = MCPW_CLIENT_ERA_LEGACY;
            } else if (strcmp(argv[i], "modern") == 0) {
                s.opts.era = MCPW_CLIENT_ERA_MODERN;
            } else if (strcmp(argv[i], "auto") != 0) {
                server_at = -1;
                break;
            }
        } else if (i + 1 < argc && strcmp(argv[i], "--echo-arg") == 0) {
            s.opts.echo_arg = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--echo-expect") == 0) {
            s.opts.echo_expect = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--progress-tool") == 0) {
            s.opts.progress_tool = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--progress-args") == 0) {
            s.opts.progress_args = argv[++i];
        } else {
            break;
        }
    }
    if (server_at < 0 || server_at >= argc) {
        fprintf(stderr, "usage: %s [--era auto|legacy|modern] [--echo-arg NAME] [--echo-expect TEXT] "
                        "[--progress-tool NAME] [--progress-args JSON] -- SERVER-COMMAND [ARGS...]\n",
                argv[0]);
        return 2;
    }
    {
        /* --progress-args must be a JSON object, checked before the server starts: the
           library's lookup validates the whole text. */
        mcpw_str none = {NULL, 0};
        mcpw_result rc = mcpw_json_get(s.opts.progress_args, strlen(s.opts.progress_args), "x", 1,
                                       &none);
        if (rc != MCPW_OK) {
            fprintf(stderr, "%s: --progress-args: %s\n", argv[0], mcpw_result_message((int)rc));
            return 2;
        }
    }

    signal(SIGPIPE, SIG_IGN);
    {
        /* Stopping this client stops its server (no SA_RESTART: poll() returns, and the
           loop ends the session). Caught before the server starts: a signal while it starts
           ended this client by default and left the server running. A signal this client
           was started ignoring (nohup's SIGHUP) stays ignored, and the server inherits
           that (exec resets only the caught ones). */
        static const int stops[] = {SIGINT, SIGTERM, SIGHUP};
        size_t k;
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        for (k = 0; k < sizeof stops / sizeof stops[0]; k++) {
            if (sigaction(stops[k], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
            sigaction(stops[k], &sa, NULL);
        }
    }
    spawn(argv + server_at);
    start = now_ns();
    check(mcpw_config_new(MCPW_ROLE_CLIENT, S("mcpwire-c-client"), S(MCPWIRE_VERSION), &config),
          "config");
    check(mcpw_config_set_timeouts(config, 20000, 60000), "timeouts");
    check(mcpw_config_set_client_era(config, s.opts.era), "client era");
    {
        mcpw_limits limits;
        check(mcpw_config_get_limits(config, &limits), "limits");
        high_water = limits.max_buffered_output / 2;
    }
    check(mcpw_conn_new(config, start, &s.conn), "conn");
    mcpw_config_free(config);
    the_conn = s.conn;
    check(mcpw_conn_input_piece(s.conn, &piece), "input_piece");

    while (s.phase != DONE) {
        struct pollfd fds[2];
        nfds_t nfds = 0;
        int timeout_ms = 1000, pending_output = 0;
        bool has_deadline;
        uint64_t deadline, now = now_ns();

        if (got_signal) fail("stopped by signal %d", (int)got_signal);
        if (now - start > SESSION_LIMIT_NS) fail("gave up after 60 s");

        /* Drain after every mutation: events (which may issue requests), then bytes. */
        for (;;) {
            mcpw_event ev;
            check(mcpw_conn_poll_event(s.conn, &ev), "poll_event");
            if (ev.kind == MCPW_EVENT_NONE) break;
            on_event(&s, &ev, now);
        }
        for (;;) {
            const uint8_t *bytes;
            size_t len;
            uint64_t stream;
            ssize_t n;
            if (output_broken) break;
            check(mcpw_conn_transmit(s.conn, &bytes, &len, &stream), "transmit");
            if (len == 0) break;
            n = write(to_server, bytes, len);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                pending_output = 1;
                break;
            }
            if (n < 0 && errno == EPIPE && input_open) {
                output_broken = 1;
                break;
            }
            if (n < 0) fail("write: %s", strerror(errno));
            check(mcpw_conn_consume(s.conn, (size_t)n), "consume");
        }
        if (s.phase == DONE) break;
        /* The rest of the last read, a piece at a time, before anything else is read. */
        if (buf_fed < buf_len) {
            size_t k = buf_len - buf_fed < piece ? buf_len - buf_fed : piece;
            check(mcpw_conn_handle_input(s.conn, now, buf + buf_fed, k), "handle_input");
            buf_fed += k;
            continue;
        }

        check(mcpw_conn_poll_timeout(s.conn, &has_deadline, &deadline), "poll_timeout");
        if (has_deadline) {
            uint64_t ms = deadline > now ? (deadline - now + 999999) / 1000000 : 0;
            if (ms < (uint64_t)timeout_ms) timeout_ms = (int)ms;
        }
        int room = !pending_output || pending_bytes(s.conn) < high_water;
        if (input_open && room) {
            fds[nfds].fd = from_server;
            fds[nfds].events = POLLIN;
            nfds++;
        }
        if (pending_output) {
            fds[nfds].fd = to_server;
            fds[nfds].events = POLLOUT;
            nfds++;
        }
        if (poll(fds, nfds, timeout_ms) < 0 && errno != EINTR) fail("poll: %s", strerror(errno));

        now = now_ns();
        if (input_open && room) {
            ssize_t n = read(from_server, buf, sizeof buf);
            if (n > 0) {
                buf_len = (size_t)n;
                buf_fed = buf_len < piece ? buf_len : piece;
                check(mcpw_conn_handle_input(s.conn, now, buf, buf_fed), "handle_input");
            } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                input_open = 0;
                check(mcpw_conn_handle_eof(s.conn, now), "handle_eof");
            }
        }
        check(mcpw_conn_handle_timeout(s.conn, now), "handle_timeout");
    }

    /* What is left to write (a write the server had not taken yet: the end of a line, an
       answer given during the close) goes out first, within a second. */
    write_out_before(now_ns() + 1000000000ull);
    /* The spec's stdio shutdown: close the server's stdin, then wait for it to exit, reading
       (and dropping) what it still writes meanwhile: a server that drains its output before
       exiting would otherwise block on a full pipe. */
    close(to_server);
    to_server = -1;
    {
        int status = 0, waited;
        step = "shutdown";
        for (waited = 0; waited < 500 && waitpid(child, &status, WNOHANG) == 0; waited++) {
            struct timespec pause = {0, 10 * 1000 * 1000};
            char sink[4096];
            while (from_server >= 0 && read(from_server, sink, sizeof sink) > 0) {
            }
            nanosleep(&pause, NULL);
        }
        if (waited == 500) {
            /* Then SIGTERM, and SIGKILL if that does not end it either (as the spec says). */
            stop_child();
            printf("shutdown: the server did not exit within 5 s of its stdin closing\n");
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            child = -1;
            fail("the server exited with status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        }
        child = -1;
    }
    close(from_server);
    the_conn = NULL;
    mcpw_conn_free(s.conn);
    printf("C_CLIENT_OK %s\n", s.version.ptr ? s.version.ptr : "?");
    free(s.version.ptr);
    return EXIT_SUCCESS;
}
