package main

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"
)

// A connection past the cap gets 503 at once and is closed; once a served connection closes,
// the next one is served. (net/http bounds nothing: a helper's audit held 3,000 idle
// connections open on this example.)
func TestConnectionsPastTheCapGet503(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := capConnections(inner, 1)
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	addr := inner.Addr().String()
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	served := <-accepted

	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	_ = second.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := second.Write([]byte("GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(second), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("past the cap: %d %v", resp.StatusCode, resp.Header)
	}
	select {
	case c := <-accepted:
		t.Fatalf("a connection past the cap was handed out: %v", c.RemoteAddr())
	default:
	}

	// The served one closes: its slot is free again (closing twice frees it once).
	served.Close()
	served.Close()
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the freed slot was not given to the next connection")
	}
	fourth, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fourth.Close()
	_ = fourth.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fourth.Write([]byte("GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(fourth), nil); err != nil || resp.StatusCode != 503 {
		t.Fatalf("one slot, two connections: %v %v", resp, err)
	}
}
