// Package cbench is the benchmark baseline of the Go binding: the same loops written in C
// directly against the C ABI (feed a chunk, poll every event, transmit and consume; decode
// every line with mcpw_decode), so a Go benchmark can report the binding's cost beside the
// engine's own in the same run.
package cbench

/*
#cgo pkg-config: mcpwire
#cgo CFLAGS: -O2
#include <string.h>
#include "mcpwire.h"

// Feeds len bytes in chunks, draining events and output after each; returns the number of
// events, or -1 on any failure.
static long long run(mcpw_conn *conn, const uint8_t *bytes, size_t len, size_t chunk) {
    long long events = 0;
    size_t off;
    for (off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        mcpw_event ev;
        if (mcpw_conn_handle_input(conn, 1, bytes + off, n) != MCPW_OK) return -1;
        for (;;) {
            if (mcpw_conn_poll_event(conn, &ev) != MCPW_OK) return -1;
            if (ev.kind == MCPW_EVENT_NONE) break;
            events++;
        }
        for (;;) {
            const uint8_t *out;
            size_t out_len;
            uint64_t stream;
            if (mcpw_conn_transmit(conn, &out, &out_len, &stream) != MCPW_OK) return -1;
            if (out_len == 0) break;
            if (mcpw_conn_consume(conn, out_len) != MCPW_OK) return -1;
        }
    }
    return events;
}

// Decodes every newline-delimited frame of bytes with mcpw_decode (room for one message, as a
// router would pass); returns the number of frames, or -1 on any failure.
static long long decode_lines(const uint8_t *bytes, size_t len) {
    long long frames = 0;
    const uint8_t *p = bytes, *end = bytes + len;
    while (p < end) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        mcpw_message m;
        size_t count;
        bool batch;
        if (mcpw_decode(p, n, &m, 1, &count, &batch) != MCPW_OK) return -1;
        if (m.kind == 0) return -1;
        frames++;
        p += n + 1;
    }
    return frames;
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Run feeds data to the C connection handle conn (a *C.mcpw_conn from the binding, passed
// as unsafe.Pointer) in chunks of chunk bytes, draining everything, and returns how many
// events it saw.
func Run(conn unsafe.Pointer, data []byte, chunk int) (int, error) {
	if len(data) == 0 {
		return 0, nil
	}
	n := C.run((*C.mcpw_conn)(conn), (*C.uint8_t)(unsafe.Pointer(&data[0])), C.size_t(len(data)), C.size_t(chunk))
	if n < 0 {
		return 0, errors.New("cbench: a C ABI call failed")
	}
	return int(n), nil
}

// DecodeLines decodes every newline-delimited frame of data with mcpw_decode, in C, and
// returns how many it decoded.
func DecodeLines(data []byte) (int, error) {
	if len(data) == 0 {
		return 0, nil
	}
	n := C.decode_lines((*C.uint8_t)(unsafe.Pointer(&data[0])), C.size_t(len(data)))
	if n < 0 {
		return 0, errors.New("cbench: mcpw_decode failed")
	}
	return int(n), nil
}
