package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/server"
	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MemoryServer is one server driven in memory, without any transport: JSON-RPC lines in,
// JSON-RPC lines out, in the same process.
type MemoryServer interface {
	// Exchange hands the server lines (each a JSON-RPC message ending with a newline; joined
	// holds the same bytes back to back) and appends the n answers it gives, each ending with
	// a newline, to out. It returns once every line has been answered (notifications have no
	// answer: n counts the requests).
	Exchange(lines [][]byte, joined []byte, n int, out []byte) ([]byte, error)
	Close()
}

// ---- mcpwire: a server Conn -------------------------------------------------------------

type mcpwireMemory struct{ c *mcpwire.Conn }

// NewMCPWireMemory is a server mcpwire.Conn. Each Exchange feeds the joined bytes in one
// call, answers every RequestEvent with MCPWireAnswer and appends all output
// (AppendOutput): the whole loop of a server on one connection.
func NewMCPWireMemory() (MemoryServer, error) {
	cfg := MCPWireConfig()
	cfg.Limits = mcpwire.Limits{MaxInboundInFlight: 1 << 16}
	c, err := mcpwire.NewConn(cfg, time.Now())
	if err != nil {
		return nil, err
	}
	return &mcpwireMemory{c: c}, nil
}

func (m *mcpwireMemory) Exchange(_ [][]byte, joined []byte, _ int, out []byte) ([]byte, error) {
	if err := m.c.Feed(time.Now(), joined); err != nil {
		return out, err
	}
	for ev, ok := m.c.NextEvent(); ok; ev, ok = m.c.NextEvent() {
		switch ev := ev.(type) {
		case *mcpwire.RequestEvent:
			if err := MCPWireAnswer(m.c, ev); err != nil {
				return out, err
			}
		case *mcpwire.ViolationEvent, *mcpwire.ClosedEvent:
			return out, fmt.Errorf("mcpwire: %#v", ev)
		}
	}
	if err := m.c.Err(); err != nil {
		return out, err
	}
	return m.c.AppendOutput(out)
}

func (m *mcpwireMemory) Close() { m.c.Close() }

// ---- go-sdk: a raw JSON-RPC connection ----------------------------------------------------

// rawConn is an mcp.Connection (the interface the SDK offers transport authors) that hands
// the server lines and collects its answers. Read decodes each line with the SDK's own
// jsonrpc.DecodeMessage and Write encodes each answer with jsonrpc.EncodeMessage, which is
// what the SDK's IOTransport does around its newline framing.
type rawConn struct {
	in     chan []byte
	out    chan []byte
	closed chan struct{}
	once   sync.Once
}

func (r *rawConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case line := <-r.in:
		return jsonrpc.DecodeMessage(bytes.TrimSuffix(line, []byte("\n")))
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.closed:
		return nil, io.EOF
	}
}

func (r *rawConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	select {
	case r.out <- append(data, '\n'):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.closed:
		return io.ErrClosedPipe
	}
}

func (r *rawConn) Close() error {
	r.once.Do(func() { close(r.closed) })
	return nil
}

func (r *rawConn) SessionID() string { return "" }

// rawTransport hands its one connection to Server.Connect.
type rawTransport struct{ conn *rawConn }

func (t rawTransport) Connect(context.Context) (mcp.Connection, error) { return t.conn, nil }

type gosdkMemory struct {
	conn    *rawConn
	session *mcp.ServerSession
}

// NewGoSDKMemory connects server to a raw JSON-RPC connection. The SDK runs its own
// goroutines behind it (a read loop, a handler queue, a goroutine per tools/call), so an
// Exchange hands over every line and then waits for the answers.
func NewGoSDKMemory(server *mcp.Server) (MemoryServer, error) {
	conn := &rawConn{in: make(chan []byte, 1024), out: make(chan []byte, 1024), closed: make(chan struct{})}
	session, err := server.Connect(context.Background(), rawTransport{conn}, nil)
	if err != nil {
		return nil, err
	}
	return &gosdkMemory{conn: conn, session: session}, nil
}

func (g *gosdkMemory) Exchange(lines [][]byte, _ []byte, n int, out []byte) ([]byte, error) {
	for _, line := range lines {
		g.conn.in <- line
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for range n {
		select {
		case msg := <-g.conn.out:
			out = append(out, msg...)
		case <-timeout.C:
			return out, errNoAnswer
		}
	}
	return out, nil
}

func (g *gosdkMemory) Close() {
	g.session.Close()
	g.conn.Close()
}

// ---- mcp-go: HandleMessage ----------------------------------------------------------------

type mcpgoMemory struct{ s *mcpgo.MCPServer }

// NewMCPGoMemory drives server through MCPServer.HandleMessage, one message per call, and
// encodes each answer with json.Marshal, as mcp-go's stdio transport does.
func NewMCPGoMemory(server *mcpgo.MCPServer) MemoryServer { return &mcpgoMemory{s: server} }

func (m *mcpgoMemory) Exchange(lines [][]byte, _ []byte, _ int, out []byte) ([]byte, error) {
	ctx := context.Background()
	for _, line := range lines {
		resp := m.s.HandleMessage(ctx, json.RawMessage(bytes.TrimSuffix(line, []byte("\n"))))
		if resp == nil {
			continue // a notification
		}
		data, err := json.Marshal(resp)
		if err != nil {
			return out, err
		}
		out = append(append(out, data...), '\n')
	}
	return out, nil
}

func (m *mcpgoMemory) Close() {}

// ---- Setup --------------------------------------------------------------------------------

// MemoryImpls are the in-memory servers, by name, in the order they are reported.
var MemoryImpls = []struct {
	Name string
	New  func() (MemoryServer, error)
}{
	{"mcpwire", NewMCPWireMemory},
	{"gosdk", func() (MemoryServer, error) { return NewGoSDKMemory(NewGoSDKServer()) }},
	{"gosdk-typed", func() (MemoryServer, error) { return NewGoSDKMemory(NewGoSDKServerTyped()) }},
	{"mcpgo", func() (MemoryServer, error) { return NewMCPGoMemory(NewMCPGoServer()), nil }},
}

// Handshake runs the handshake-era handshake on s (initialize, then
// notifications/initialized) and checks the initialize answer.
func Handshake(s MemoryServer) error {
	out, err := s.Exchange([][]byte{[]byte(InitializeLine)}, []byte(InitializeLine), 1, nil)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var resp struct {
		ID     int `json:"id"`
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.ID != 0 || resp.Result.ProtocolVersion != "2025-11-25" {
		return fmt.Errorf("initialize answered %q (%v)", out, err)
	}
	out, err = s.Exchange([][]byte{[]byte(InitializedLine)}, []byte(InitializedLine), 0, nil)
	if err != nil || len(out) != 0 {
		return fmt.Errorf("notifications/initialized answered %q (%v)", out, err)
	}
	return nil
}
