/*
 * The libmicrohttpd floor of the end-to-end bench: the C host's HTTP stack with no MCP at all.
 *
 * It runs libmicrohttpd exactly as bindings/c/example_http_server.c does (the same daemon
 * flags, connection limit and timeout, one thread, an external select() loop owned by the
 * host), reads every POST body whole and answers it with one fixed JSON-RPC response. Any
 * other method gets 405. What the C host costs above this is mcpwire and the host's own code.
 *
 *   mhd_floor PORT      serves http://127.0.0.1:PORT/ (any path) until SIGINT or SIGTERM
 */
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

static const char BODY[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":"
    "\"hello, world\"},{\"type\":\"text\",\"text\":\"5\"}]}}";

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* A marker that a request's body has started: libmicrohttpd calls the handler once with the
 * head, then once per piece of body, then once more when the body is complete. */
static int body_started;

static enum MHD_Result on_http(void *cls, struct MHD_Connection *connection, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **req_cls) {
    struct MHD_Response *response;
    enum MHD_Result ret;
    int post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    (void)cls;
    (void)url;
    (void)version;
    (void)upload_data;
    if (*req_cls == NULL) {
        *req_cls = &body_started; /* the head: ask for the body */
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        *upload_data_size = 0; /* read and dropped */
        return MHD_YES;
    }
    if (post) {
        response = MHD_create_response_from_buffer(sizeof BODY - 1, (void *)BODY,
                                                   MHD_RESPMEM_PERSISTENT);
    } else {
        response = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (response == NULL) return MHD_NO;
    if (post) {
        MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    } else {
        MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "POST");
    }
    ret = MHD_queue_response(connection, post ? MHD_HTTP_OK : MHD_HTTP_METHOD_NOT_ALLOWED,
                             response);
    MHD_destroy_response(response);
    return ret;
}

int main(int argc, char **argv) {
    struct MHD_Daemon *daemon;
    struct sockaddr_in addr;
    const union MHD_DaemonInfo *info;
    char *end = NULL;
    unsigned long port;
    struct sigaction sa;

    if (argc != 2 || (port = strtoul(argv[1], &end, 10), *end != '\0') || port > 65535) {
        fprintf(stderr, "usage: mhd_floor PORT\n");
        return 2;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* As the C host: epoll where libmicrohttpd has it (one descriptor in the select() set). */
    daemon = MHD_start_daemon(MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME |
                                  (MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES
                                       ? MHD_USE_EPOLL
                                       : 0),
                              (uint16_t)port, NULL,
                              NULL, on_http, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)(FD_SETSIZE - 16),
                              MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    if (daemon == NULL) {
        fprintf(stderr, "mhd_floor: cannot listen on port %lu\n", port);
        return 1;
    }
    info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on http://127.0.0.1:%u/mcp\n",
           info != NULL ? (unsigned)info->port : (unsigned)port);
    fflush(stdout);

    while (!stop_requested) {
        fd_set rs, ws, es;
        MHD_socket max_fd = 0;
        MHD_UNSIGNED_LONG_LONG timeout_ms;
        struct timeval tv, *tvp = NULL;
        FD_ZERO(&rs);
        FD_ZERO(&ws);
        FD_ZERO(&es);
        if (MHD_get_fdset2(daemon, &rs, &ws, &es, &max_fd, FD_SETSIZE) != MHD_YES) break;
        if (MHD_get_timeout(daemon, &timeout_ms) == MHD_YES) {
            tv.tv_sec = (time_t)(timeout_ms / 1000);
            tv.tv_usec = (suseconds_t)(timeout_ms % 1000 * 1000);
            tvp = &tv;
        }
        if (select((int)max_fd + 1, &rs, &ws, &es, tvp) < 0) {
            if (errno != EINTR) {
                perror("mhd_floor: select");
                break;
            }
            continue;
        }
        MHD_run_from_select(daemon, &rs, &ws, &es);
    }
    MHD_stop_daemon(daemon);
    return 0;
}
