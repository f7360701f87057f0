package mcpwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/mcpwire/mcpwire/bindings/go/internal/cbench"
)

// cpuTime is the CPU time this process has used (user + system, every thread, GC
// included). On a loaded machine, messages per CPU-second is steadier than per wall-second.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchChunk is the read size the Rust decode bench uses too.
const benchChunk = 64 * 1024

// benchDecode feeds the corpus to a server Conn past its handshake, in 64 KiB chunks, and
// drains every event (as typed Go events, their data copied out) and all output after each
// chunk. It reports bytes/s (MB/s), msgs/s and msgs/cpu-s; batch is how many events one crossing into C
// may copy out (the binding's default, or 1 to see what batching buys).
func benchDecode(b *testing.B, c corpus, batch int) {
	cfg := serverConfig()
	// The corpus is one-way traffic nobody answers: lift the bounds it would otherwise hit.
	cfg.Limits = Limits{MaxInboundInFlight: 1 << 20, MaxQueuedEvents: 1 << 20, MaxBufferedOutput: 1 << 30}
	b.SetBytes(int64(len(c.bytes)))
	b.ReportAllocs()
	b.ResetTimer() // the corpus may just have been generated
	var elapsed, cpu time.Duration
	events := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := serverAfterHandshake(b, cfg)
		s.records = s.records[:batch]
		b.StartTimer()
		start, startCPU := time.Now(), cpuTime()
		for off := 0; off < len(c.bytes); off += benchChunk {
			end := off + benchChunk
			if end > len(c.bytes) {
				end = len(c.bytes)
			}
			if err := s.Feed(start, c.bytes[off:end]); err != nil {
				b.Fatal(err)
			}
			for ev, ok := s.NextEvent(); ok; ev, ok = s.NextEvent() {
				_ = ev
				events++
			}
			if _, err := s.WriteTo(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
		elapsed += time.Since(start)
		cpu += cpuTime() - startCPU
		b.StopTimer()
		if s.Err() != nil {
			b.Fatal(s.Err())
		}
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(c.messages)*float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(c.messages)*float64(b.N)/cpu.Seconds(), "msgs/cpu-s")
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

var benchSmall, benchMixed corpus

func small(b *testing.B) corpus {
	if benchSmall.bytes == nil {
		benchSmall = smallCorpus()
	}
	return benchSmall
}

func mixed(b *testing.B) corpus {
	if benchMixed.bytes == nil {
		benchMixed = mixedCorpus()
	}
	return benchMixed
}

func BenchmarkDecodeSmall(b *testing.B)          { benchDecode(b, small(b), batchEvents) }
func BenchmarkDecodeMixed(b *testing.B)          { benchDecode(b, mixed(b), batchEvents) }
func BenchmarkDecodeSmallUnbatched(b *testing.B) { benchDecode(b, small(b), 1) }

// benchNative is the baseline: the same loop in C over the same engine (internal/cbench),
// with no Go event objects.
func benchNative(b *testing.B, c corpus) {
	cfg := serverConfig()
	cfg.Limits = Limits{MaxInboundInFlight: 1 << 20, MaxQueuedEvents: 1 << 20, MaxBufferedOutput: 1 << 30}
	b.SetBytes(int64(len(c.bytes)))
	b.ResetTimer()
	var elapsed, cpu time.Duration
	events := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := serverAfterHandshake(b, cfg)
		b.StartTimer()
		start, startCPU := time.Now(), cpuTime()
		n, err := cbench.Run(unsafe.Pointer(s.ptr), c.bytes, benchChunk)
		elapsed += time.Since(start)
		cpu += cpuTime() - startCPU
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		events += n
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(c.messages)*float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(c.messages)*float64(b.N)/cpu.Seconds(), "msgs/cpu-s")
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

func BenchmarkDecodeSmallNativeC(b *testing.B) { benchNative(b, small(b)) }
func BenchmarkDecodeMixedNativeC(b *testing.B) { benchNative(b, mixed(b)) }

// serverTraffic keeps the corpus lines a client sends a server (requests and
// notifications), as benches/ffi.rs does: in the generated corpora only those carry a
// "method" member.
func serverTraffic(c corpus) corpus {
	var out corpus
	for _, line := range bytes.SplitAfter(c.bytes, []byte("\n")) {
		if bytes.Contains(line, []byte(`"method":`)) {
			out.bytes = append(out.bytes, line...)
			out.messages++
		}
	}
	return out
}

// benchServerLoop is the workload of benches/ffi.rs (ffi_small, ffi_mixed) through the Go
// binding: one server Conn past its handshake is fed the client traffic in 64 KiB reads and
// runs a server's whole loop after each read: drain the events, answering every request with
// a small result, then write all output. Compare msgs/s with ffi_*/rust_api and
// ffi_*/c_abi.
func benchServerLoop(b *testing.B, c corpus) {
	result := json.RawMessage(`{"content":[{"type":"text","text":"ok"}],"isError":false}`)
	cfg := serverConfig()
	s := serverAfterHandshake(b, cfg)
	b.SetBytes(int64(len(c.bytes)))
	b.ReportAllocs()
	b.ResetTimer()
	start, startCPU := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		for off := 0; off < len(c.bytes); off += benchChunk {
			end := off + benchChunk
			if end > len(c.bytes) {
				end = len(c.bytes)
			}
			if err := s.Feed(start, c.bytes[off:end]); err != nil {
				b.Fatal(err)
			}
			for ev, ok := s.NextEvent(); ok; ev, ok = s.NextEvent() {
				if req, isReq := ev.(*RequestEvent); isReq {
					if err := s.Respond(req.ID, result); err != nil {
						b.Fatal(err)
					}
				}
			}
			if _, err := s.WriteTo(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	}
	elapsed, cpu := time.Since(start), cpuTime()-startCPU
	b.StopTimer()
	b.ReportMetric(float64(c.messages)*float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(c.messages)*float64(b.N)/cpu.Seconds(), "msgs/cpu-s")
}

var trafficSmall, trafficMixed corpus

func BenchmarkServerLoopSmall(b *testing.B) {
	if trafficSmall.bytes == nil {
		trafficSmall = serverTraffic(small(b))
	}
	benchServerLoop(b, trafficSmall)
}

func BenchmarkServerLoopMixed(b *testing.B) {
	if trafficMixed.bytes == nil {
		trafficMixed = serverTraffic(mixed(b))
	}
	benchServerLoop(b, trafficMixed)
}

// BenchmarkDecodeSmallVsC alternates, iteration by iteration, a pass of the Go binding and a
// pass of the C baseline over the small corpus, so both see the same machine load; it
// reports each side's msgs/s and their ratio (go/c: 1.0 means the binding costs nothing).
func BenchmarkDecodeSmallVsC(b *testing.B) {
	c := small(b)
	cfg := serverConfig()
	cfg.Limits = Limits{MaxInboundInFlight: 1 << 20, MaxQueuedEvents: 1 << 20, MaxBufferedOutput: 1 << 30}
	b.SetBytes(int64(len(c.bytes)))
	b.ResetTimer()
	var goTime, cTime time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sGo := serverAfterHandshake(b, cfg)
		sC := serverAfterHandshake(b, cfg)
		b.StartTimer()
		start := time.Now()
		for off := 0; off < len(c.bytes); off += benchChunk {
			end := off + benchChunk
			if end > len(c.bytes) {
				end = len(c.bytes)
			}
			if err := sGo.Feed(start, c.bytes[off:end]); err != nil {
				b.Fatal(err)
			}
			for _, ok := sGo.NextEvent(); ok; _, ok = sGo.NextEvent() {
			}
			if _, err := sGo.WriteTo(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
		goTime += time.Since(start)
		start = time.Now()
		if _, err := cbench.Run(unsafe.Pointer(sC.ptr), c.bytes, benchChunk); err != nil {
			b.Fatal(err)
		}
		cTime += time.Since(start)
		b.StopTimer()
		sGo.Close()
		sC.Close()
		b.StartTimer()
	}
	msgs := float64(c.messages) * float64(b.N)
	b.ReportMetric(msgs/goTime.Seconds(), "go-msgs/s")
	b.ReportMetric(msgs/cTime.Seconds(), "c-msgs/s")
	b.ReportMetric(cTime.Seconds()/goTime.Seconds(), "go/c")
}

// decodeLines runs Decode on every line of data, reusing one slice of messages as a router
// would; it returns how many messages it decoded.
func decodeLines(data []byte, dst []Message) (int, error) {
	n := 0
	for len(data) > 0 {
		end := bytes.IndexByte(data, '\n')
		if end < 0 {
			end = len(data)
		}
		msgs, _, err := Decode(dst[:0], data[:end])
		if err != nil {
			return n, err
		}
		n += len(msgs)
		data = data[min(end+1, len(data)):]
	}
	return n, nil
}

// benchCodec decodes every line of the corpus with Decode, the codec alone (no connection).
func benchCodec(b *testing.B, c corpus) {
	b.SetBytes(int64(len(c.bytes)))
	b.ReportAllocs()
	dst := make([]Message, 0, 4)
	start := time.Now()
	for b.Loop() {
		if n, err := decodeLines(c.bytes, dst); err != nil || n != c.messages {
			b.Fatalf("%d messages of %d: %v", n, c.messages, err)
		}
	}
	b.ReportMetric(float64(c.messages)*float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

func BenchmarkCodecSmall(b *testing.B) { benchCodec(b, small(b)) }
func BenchmarkCodecMixed(b *testing.B) { benchCodec(b, mixed(b)) }

// benchCodecVsC alternates, pass by pass, Decode over the corpus and the same loop in C over
// mcpw_decode (internal/cbench), so both see the same machine; it reports each side's msgs/s
// and their ratio (go/c: 1.0 means the binding costs nothing over the library's codec).
func benchCodecVsC(b *testing.B, c corpus) {
	b.SetBytes(int64(len(c.bytes)))
	dst := make([]Message, 0, 4)
	var goTime, cTime time.Duration
	for b.Loop() {
		start := time.Now()
		if n, err := decodeLines(c.bytes, dst); err != nil || n != c.messages {
			b.Fatalf("go: %d messages of %d: %v", n, c.messages, err)
		}
		goTime += time.Since(start)
		start = time.Now()
		if n, err := cbench.DecodeLines(c.bytes); err != nil || n != c.messages {
			b.Fatalf("c: %d messages of %d: %v", n, c.messages, err)
		}
		cTime += time.Since(start)
	}
	total := float64(c.messages) * float64(b.N)
	b.ReportMetric(total/goTime.Seconds(), "go-msgs/s")
	b.ReportMetric(total/cTime.Seconds(), "c-msgs/s")
	b.ReportMetric(cTime.Seconds()/goTime.Seconds(), "go/c")
}

func BenchmarkCodecSmallVsC(b *testing.B) { benchCodecVsC(b, small(b)) }
func BenchmarkCodecMixedVsC(b *testing.B) { benchCodecVsC(b, mixed(b)) }

// BenchmarkHTTPPingBesideIdleStreams: a ping in one session over HTTP (httptest), with 0 or
// 1,000 other sessions holding their GET stream open. Each waiting stream parks on its own
// channel and only the streams a request changes wake, so the idle streams should cost a
// ping little (when every request woke every stream, 1,000 made a ping 13 times dearer).
func BenchmarkHTTPPingBesideIdleStreams(b *testing.B) {
	for _, idle := range []int{0, 1000} {
		b.Run(fmt.Sprintf("idle=%d", idle), func(b *testing.B) {
			cfg := &Config{Role: Server, Name: "bench", Version: "1", Versions: []string{"2025-11-25"},
				Capabilities: json.RawMessage(`{"tools":{}}`)}
			srv, err := NewHTTPServer(cfg, &HTTPOptions{MaxSessions: idle + 16}, HTTPAppFunc(
				func(c *Conn, _ ConnKey, ev Event) {
					if r, ok := ev.(*RequestEvent); ok {
						_ = c.Respond(r.ID, json.RawMessage(`{}`))
					}
				}))
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			b.Cleanup(func() {
				ts.Close()
				srv.Close()
			})
			for range idle {
				get := openGetStream(b, ts.URL, openTestSession(b, ts.URL))
				b.Cleanup(func() { get.Body.Close() })
			}
			sid := openTestSession(b, ts.URL)
			ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
			b.ResetTimer()
			for b.Loop() {
				r := sessionPost(b, ts.URL, sid, ping)
				if _, err := io.Copy(io.Discard, r.Body); err != nil || r.StatusCode != http.StatusOK {
					b.Fatalf("ping: %d %v", r.StatusCode, err)
				}
				r.Body.Close()
			}
		})
	}
}
