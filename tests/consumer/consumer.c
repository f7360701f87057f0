/* A program outside the tree that uses the installed mcpwire: a server answers initialize.
 * .ci/packaging builds it with pkg-config (shared and static) and with CMake, then runs it. */
#include <mcpwire.h>
#include <stdio.h>
#include <string.h>

/* Whether `needle` occurs in bytes[0..len). */
static int contains(const uint8_t *bytes, size_t len, const char *needle) {
    size_t n = strlen(needle), i;
    for (i = 0; i + n <= len; i++) {
        if (memcmp(bytes + i, needle, n) == 0) {
            return 1;
        }
    }
    return 0;
}

int main(void) {
    static const char init[] =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
        "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}\n";
    struct mcpw_config *config = NULL;
    struct mcpw_conn *conn = NULL;
    const uint8_t *bytes = NULL;
    size_t len = 0;
    uint64_t stream = 0;
    int ok = 0;

    if (strcmp(mcpw_version(), MCPWIRE_VERSION) != 0) {
        fprintf(stderr, "header %s, library %s\n", MCPWIRE_VERSION, mcpw_version());
        return 1;
    }
    if (mcpw_config_new(MCPW_ROLE_SERVER, "consumer", 8, "1.0", 3, &config) != MCPW_OK ||
        mcpw_conn_new(config, 0, &conn) != MCPW_OK ||
        mcpw_conn_handle_input(conn, 0, (const uint8_t *)init, sizeof init - 1) != MCPW_OK ||
        mcpw_conn_transmit(conn, &bytes, &len, &stream) != MCPW_OK) {
        fprintf(stderr, "the engine refused a call\n");
    } else {
        fwrite(bytes, 1, len, stdout);
        ok = contains(bytes, len, "\"protocolVersion\":\"2025-11-25\"");
    }
    mcpw_conn_free(conn);
    mcpw_config_free(config);
    return ok ? 0 : 1;
}
