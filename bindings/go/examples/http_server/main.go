// Command http_server is an MCP server over Streamable HTTP, in Go: net/http for HTTP, the
// mcpwire engine (through its C ABI) for MCP. One endpoint serves handshake-era sessions
// (2025-11-25 and older) and stateless 2026-07-28 requests. It serves examples/internal/app:
// the tools "echo" and "count" (progress over SSE), the resource "mem://greeting" and the
// prompt "greet".
//
//	go run ./examples/http_server -addr 127.0.0.1:8080   # prints "listening on http://…/mcp"
//
// SIGINT or SIGTERM stop it gracefully: no new connections, connections that have sent
// nothing are closed, open answers finish (up to 5 s); a second signal stops it at once.
// Listening on all addresses (-addr :8080), it accepts the Host names -allowed-host gives
// besides localhost.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
	"github.com/mcpwire/mcpwire/bindings/go/examples/internal/app"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "where to listen (port 0 picks a free one)")
	legacy := flag.Bool("legacy", false, "serve the handshake era only")
	maxConns := flag.Int("max-connections", 1024,
		"connections served at once (at the cap a new one displaces the one idle longest; 503 when all are in a request)")
	var allowed hostList
	flag.Var(&allowed, "allowed-host",
		"a host name (with or without a port) accepted in Host and Origin besides localhost; repeat for more")
	flag.Parse()
	usage := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "http_server: "+format+"\n", args...)
		flag.Usage()
		os.Exit(2)
	}
	if flag.NArg() > 0 { // (a mistyped flag after an argument would be ignored silently)
		usage("unexpected argument %q", flag.Arg(0))
	}
	if *maxConns < 1 {
		usage("-max-connections must be at least 1")
	}
	// Signals are caught before the address is printed: a harness that sends one as soon as
	// it reads the address must not find the default action (exit 143) still in place.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg := &mcpwire.Config{
		Role:         mcpwire.Server,
		Name:         "mcpwire-go-http-example",
		Version:      mcpwire.Version(),
		Capabilities: json.RawMessage(app.Capabilities),
		Instructions: app.Instructions,
	}
	if *legacy {
		cfg.Versions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
	}
	var srv *mcpwire.HTTPServer
	// A tool's later steps answer through srv.With, from a timer's goroutine.
	handle := func(c *mcpwire.Conn, key mcpwire.ConnKey, ev mcpwire.Event) {
		req, ok := ev.(*mcpwire.RequestEvent)
		if !ok {
			return
		}
		later := func(d time.Duration, f func(c *mcpwire.Conn) error) {
			time.AfterFunc(d, func() { _ = srv.With(key, f) }) // ErrUnknownConnection: gone
		}
		if err := app.Answer(c, req, later); err != nil {
			fmt.Fprintln(os.Stderr, "http_server:", err)
		}
	}
	srv, err := mcpwire.NewHTTPServer(cfg, &mcpwire.HTTPOptions{Tools: json.RawMessage(app.Tools),
		AllowedHosts: allowed}, mcpwire.HTTPAppFunc(handle))
	if err != nil {
		fatal(err)
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fatal(err)
	}
	capped := capConnections(ln, *maxConns)
	// Idle keep-alive connections are closed after a minute (net/http keeps them for good
	// otherwise). A body must arrive within HTTPOptions.BodyTimeout (30 s) and, after 5 s,
	// at HTTPOptions.MinBodyRate (240 bytes/s on average), so a client trickling one holds
	// its connection for seconds, not 30; HTTPOptions.SendTimeout (30 s) bounds a write to a
	// client that stopped reading. No WriteTimeout: it would cut SSE streams. Heads up to
	// 64 KiB (net/http allows 1 MiB).
	hs := httpServer(routes(srv))
	hs.ConnState = capped.ConnState
	fmt.Printf("listening on %s\n", endpointURL(ln.Addr()))

	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-ctx.Done()
		stop() // a second signal ends the program at once
		stopGracefully(srv, hs, capped, 5*time.Second)
	}()
	if err := hs.Serve(capped); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fatal(err)
	}
	<-drained // Serve returns at once on Shutdown; the answers in flight finish first
}

// stopGracefully stops hs, which serves srv through capped: listen streams end, connections
// that have sent nothing close at once (net/http's Shutdown would wait for them), and open
// answers (SSE streams included) have grace to finish. Past it, the calls still open get an
// error answer on their streams (their clients learn at once that none will come), a second
// to write them, then what is left is cut.
func stopGracefully(srv *mcpwire.HTTPServer, hs *http.Server, capped *capped, grace time.Duration) {
	_, _ = srv.EndListenStreams()
	capped.closeSilent()
	shutdown, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if hs.Shutdown(shutdown) == nil {
		return
	}
	_, _ = srv.AbandonStreams()
	last, cancelLast := context.WithTimeout(context.Background(), time.Second)
	defer cancelLast()
	if hs.Shutdown(last) != nil {
		_ = hs.Close()
	}
}

// httpServer is the net/http server around h, with the limits above. OPTIONS * goes to h too:
// net/http's own answer to it reads the request's body first, with no deadline.
func httpServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10, DisableGeneralOptionsHandler: true}
}

// routes serves MCP at /mcp and 404 elsewhere. The 404 closes its connection, so that net/http
// does not first read and drop the request's body (up to 256 KiB with no deadline: a
// client that declares a body and sends none would hold its connection, and a slot of the
// cap, for good). No ServeMux: it answers a path it would clean (//mcp, /./mcp) with a
// redirect of its own, which reads the body that way.
func routes(srv http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" {
			srv.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		http.NotFound(w, r)
	})
}

// endpointURL is the MCP endpoint's URL on addr; on all addresses (0.0.0.0, ::), the loopback
// one, which the server accepts (a wildcard is no host a client can name).
func endpointURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/mcp"
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/mcp"
}

// hostList is a flag that may be given several times.
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }

func (h *hostList) Set(v string) error {
	if v == "" {
		return errors.New("empty host")
	}
	*h = append(*h, v)
	return nil
}

// capConnections serves at most max connections of ln at once: net/http has no such bound,
// and each connection holds a goroutine and buffers. At the cap, a new connection takes the
// place of the one idle longest, which is closed: one between two requests, or one that has
// not sent a request yet (so sockets left open cannot lock other clients out), preferably not
// one whose next request is arriving (see makeRoom).
// Which ones are idle, the server says through the listener's ConnState: set it as the
// http.Server's. Only when every connection is in a request does a new one get 503 at once
// and is closed (at most 64 being turned away at a time; beyond, they are closed unanswered).
// Requests whose bodies trickle cannot keep every slot for long: see HTTPOptions.MinBodyRate.
func capConnections(ln net.Listener, max int) *capped {
	return &capped{Listener: ln, slots: make(chan struct{}, max), shedding: make(chan struct{}, 64),
		conns: make(map[*slotConn]struct{})}
}

type capped struct {
	net.Listener
	slots, shedding chan struct{}

	mu    sync.Mutex
	conns map[*slotConn]struct{} // the connections holding a slot
}

// makeRoomWait is how long a new connection at the cap waits for the slot of the idle one it
// displaces.
const makeRoomWait = 250 * time.Millisecond

// headGrace is how long a request head that has begun to arrive protects its connection from
// being closed to make room: a client's head comes in one round trip or a few; one that takes
// longer is slow (trickled, perhaps on purpose), and its connection may go.
const headGrace = time.Second

func (l *capped) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.take(0) || (l.makeRoom() && l.take(makeRoomWait)) {
			sc := &slotConn{Conn: c, state: http.StateNew, since: time.Now()}
			sc.free = func() {
				l.mu.Lock()
				delete(l.conns, sc)
				l.mu.Unlock()
				<-l.slots
			}
			l.mu.Lock()
			l.conns[sc] = struct{}{}
			l.mu.Unlock()
			return sc, nil
		}
		select {
		case l.shedding <- struct{}{}:
			go func() {
				defer func() { <-l.shedding }()
				turnAway(c)
			}()
		default:
			c.Close()
		}
	}
}

// take takes a slot, waiting up to wait for one.
func (l *capped) take(wait time.Duration) bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
	}
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// makeRoom closes the connection idle longest; false when every one is in a request. One
// whose next request is arriving is passed over while another can go: net/http calls a
// connection active only once it has read a whole head, so one whose head it has read in part
// (for less than headGrace), or whose next request waits in the kernel unread, still counts
// as idle, and closing it would lose that request. When every idle connection has one
// arriving, the one idle longest goes all the same: heads kept arriving cannot lock new
// clients out.
func (l *capped) makeRoom() bool {
	now := time.Now().UnixNano()
	l.mu.Lock()
	idle := make([]*slotConn, 0, len(l.conns))
	for c := range l.conns {
		if (c.state == http.StateNew || c.state == http.StateIdle) && !c.evicted {
			idle = append(idle, c)
		}
	}
	slices.SortFunc(idle, func(a, b *slotConn) int { return a.since.Compare(b.since) })
	var chosen *slotConn
	for _, c := range idle {
		if a := c.arriving.Load(); a != 0 {
			if now-a >= int64(headGrace) { // a slow head
				chosen = c
				break
			}
			continue
		}
		if !pendingInput(c.Conn) {
			chosen = c
			break
		}
	}
	if chosen == nil && len(idle) > 0 {
		chosen = idle[0]
	}
	if chosen != nil {
		chosen.evicted = true
	}
	l.mu.Unlock()
	if chosen == nil {
		return false
	}
	_ = chosen.Close() // frees its slot
	return true
}

// pendingInput reports whether bytes wait unread on c's socket (false when it cannot tell).
// It peeks through RawConn.Control, which, unlike RawConn.Read, does not wait for the
// goroutine net/http has blocked in a read on c.
func pendingInput(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	pending := false
	_ = raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		pending = err == nil && n > 0
	})
	return pending
}

// closeSilent closes the connections that have sent nothing since they were accepted (nothing
// read, nothing waiting unread), as the server begins to stop.
func (l *capped) closeSilent() {
	l.mu.Lock()
	var silent []*slotConn
	for c := range l.conns {
		if c.state == http.StateNew && !c.evicted && c.arriving.Load() == 0 && !pendingInput(c.Conn) {
			c.evicted = true
			silent = append(silent, c)
		}
	}
	l.mu.Unlock()
	for _, c := range silent {
		_ = c.Close()
	}
}

// ConnState is the http.Server's ConnState for the server on l: it tells l which of its
// connections are idle.
func (l *capped) ConnState(c net.Conn, s http.ConnState) {
	sc, ok := c.(*slotConn)
	if !ok {
		return
	}
	l.mu.Lock()
	sc.state = s
	if s == http.StateIdle {
		sc.since = time.Now()
		sc.arriving.Store(0) // (the conn's own goroutine: no read of the next request yet)
	}
	l.mu.Unlock()
}

// turnAway answers 503 and closes c, reading (and dropping) its request for a moment first so
// that closing does not reset the connection under a client still sending.
func turnAway(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"+
		"Content-Type: text/plain\r\nContent-Length: 21\r\nConnection: close\r\n\r\n"+
		"too many connections\n")
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, c)
}

// slotConn gives its slot back when closed (once). state, since and evicted belong to the
// listener's lock.
type slotConn struct {
	net.Conn
	once sync.Once
	free func()

	state   http.ConnState
	since   time.Time // accepted, or last idle
	evicted bool

	// When the first byte since it became idle was read (UnixNano; 0: none yet).
	arriving atomic.Int64
}

// Read notes when a request begins to arrive.
func (c *slotConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.arriving.Load() == 0 {
		c.arriving.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *slotConn) Close() error {
	c.once.Do(c.free)
	return c.Conn.Close()
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "http_server:", err)
	os.Exit(1)
}
