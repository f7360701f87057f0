package bench

import (
	"bytes"
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ring is how many distinct requests (ids 1..ring) the benchmarks cycle through; an id is
// reused only long after its answer went out.
const ring = 4096

// requests are the request lines every in-memory benchmark feeds, the same bytes for every
// server: joined holds them back to back, lines[i] is a slice of it with id i+1.
var requests = func() (r struct {
	joined  []byte
	lines   [][]byte
	offsets []int
}) {
	r.offsets = []int{0}
	for i := 1; i <= ring; i++ {
		r.joined = append(r.joined, CallLine(i)...)
		r.offsets = append(r.offsets, len(r.joined))
	}
	for i := 0; i < ring; i++ {
		r.lines = append(r.lines, r.joined[r.offsets[i]:r.offsets[i+1]:r.offsets[i+1]])
	}
	return r
}()

// window returns the batch of n requests starting at request k (n divides ring).
func window(k, n int) (lines [][]byte, joined []byte, firstID int) {
	k = (k * n) % ring
	lines = requests.lines[k : k+n]
	return lines, requests.joined[requests.offsets[k]:requests.offsets[k+n]], k + 1
}

// cpuTime is the CPU time this process has used (user + system, every thread, GC
// included): go-sdk answers on goroutines of its own, which may run on the second core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkAnswers verifies that out holds the n echo answers to ids first..first+n-1 (in any
// order: go-sdk answers concurrently).
func checkAnswers(out []byte, first, n int) error {
	answers := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	if len(answers) != n {
		return errNoAnswer
	}
	seen := map[int]bool{}
	for _, a := range answers {
		var err error
		for id := first; id < first+n; id++ {
			if seen[id] {
				continue
			}
			if err = CheckEchoResponse(a, id); err == nil {
				seen[id] = true
				break
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func TestEchoAnswers(t *testing.T) {
	for _, impl := range MemoryImpls {
		t.Run(impl.Name, func(t *testing.T) {
			s, err := impl.New()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := Handshake(s); err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1, 64} {
				lines, joined, first := window(3, n)
				out, err := s.Exchange(lines, joined, n, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := checkAnswers(out, first, n); err != nil {
					t.Fatalf("batch of %d: %v\n%s", n, err, out)
				}
			}
			t.Logf("%s", bytes.SplitN(mustExchange(t, s, 1), []byte("\n"), 2)[0])
		})
	}
}

func mustExchange(t *testing.T, s MemoryServer, k int) []byte {
	lines, joined, _ := window(k, 1)
	out, err := s.Exchange(lines, joined, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// benchEcho runs batch requests per iteration through each server past its handshake: feed,
// answer, collect the output. It reports msg/s (requests answered per wall second),
// msg/cpu-s (per CPU second of the whole process: steadier on a loaded machine, and fair to
// a server that spreads one exchange over two cores) and allocs/op and B/op (per batch:
// divide by the batch size for per-message figures). Allocations on the servers' own
// goroutines count too (the testing package reads the process-wide counters).
func benchEcho(b *testing.B, batch int) {
	for _, impl := range MemoryImpls {
		b.Run(impl.Name, func(b *testing.B) {
			s, err := impl.New()
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := Handshake(s); err != nil {
				b.Fatal(err)
			}
			lines, joined, first := window(0, batch)
			out, err := s.Exchange(lines, joined, batch, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := checkAnswers(out, first, batch); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			start, startCPU := time.Now(), cpuTime()
			for i := 0; b.Loop(); i++ {
				lines, joined, _ := window(i+1, batch)
				out, err = s.Exchange(lines, joined, batch, out[:0])
				if err != nil {
					b.Fatal(err)
				}
				if bytes.Count(out, []byte("\n")) != batch {
					b.Fatalf("%d answers to %d requests", bytes.Count(out, []byte("\n")), batch)
				}
			}
			elapsed, cpu := time.Since(start), cpuTime()-startCPU
			b.StopTimer()
			msgs := float64(b.N) * float64(batch)
			b.ReportMetric(msgs/elapsed.Seconds(), "msg/s")
			b.ReportMetric(msgs/cpu.Seconds(), "msg/cpu-s")
		})
	}
}

// BenchmarkEcho is one request at a time: feed a tools/call, wait for its answer.
func BenchmarkEcho(b *testing.B) { benchEcho(b, 1) }

// BenchmarkEchoBatch64 hands over 64 requests at once (one read's worth of a busy
// connection) and waits for the 64 answers.
func BenchmarkEchoBatch64(b *testing.B) { benchEcho(b, 64) }

// BenchmarkEchoGoSDKClient is not part of the comparison: a go-sdk ClientSession calling
// the tool on a go-sdk server over the SDK's InMemoryTransport (net.Pipe), the way go-sdk
// users usually measure it. It includes the client's work and the pipe, and it negotiates
// the SDK's newest protocol version.
func BenchmarkEchoGoSDKClient(b *testing.B) {
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := NewGoSDKServer().Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": EchoText}}
	b.ReportAllocs()
	start, startCPU := time.Now(), cpuTime()
	for b.Loop() {
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != EchoText {
			b.Fatalf("%#v", res)
		}
	}
	elapsed, cpu := time.Since(start), cpuTime()-startCPU
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "msg/cpu-s")
	b.Logf("negotiated %s", cs.InitializeResult().ProtocolVersion)
}
