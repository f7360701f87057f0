package bench

import (
	"bytes"
	"testing"
	"time"

	mcpwire "github.com/mcpwire/mcpwire/bindings/go"
	"github.com/mcpwire/mcpwire/bindings/go/internal/corpus"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The codec alone, no connection or server: every line of the corpora of benches/corpus.rs
// (internal/corpus) decoded by mcpwire.Decode and by go-sdk's jsonrpc.DecodeMessage, the
// public decoder a Go proxy on go-sdk would use. mcp-go has no public decoder of its own (its
// server unmarshals into private types), so it is not in this comparison. go-sdk v1.8.0
// checks less (tried): it accepts a duplicate "method" (the last wins), invalid UTF-8 (made
// U+FFFD), an id of 1.5 (read as 1), params that are an array, and both "result" and
// "error", all of which mcpwire refuses, as JSON-RPC and MCP ask.

var small, mixed = corpus.Small(), corpus.Mixed()

// eachLine calls decode on every line of c; decode reports whether the line decoded.
func eachLine(b *testing.B, c corpus.Corpus, decode func(line []byte) bool) {
	data := c.Bytes
	n := 0
	for len(data) > 0 {
		end := bytes.IndexByte(data, '\n')
		if end < 0 {
			end = len(data)
		}
		if !decode(data[:end]) {
			b.Fatalf("line %d did not decode: %.80s", n, data[:end])
		}
		n++
		data = data[min(end+1, len(data)):]
	}
	if n != c.Messages {
		b.Fatalf("%d lines of %d", n, c.Messages)
	}
}

func mcpwireDecoder() func([]byte) bool {
	dst := make([]mcpwire.Message, 0, 4)
	return func(line []byte) bool {
		msgs, _, err := mcpwire.Decode(dst[:0], line)
		return err == nil && len(msgs) == 1 && msgs[0].Kind <= mcpwire.MessageError
	}
}

func goSDKDecoder() func([]byte) bool {
	return func(line []byte) bool {
		_, err := jsonrpc.DecodeMessage(line)
		return err == nil
	}
}

func benchCodec(b *testing.B, c corpus.Corpus, decode func([]byte) bool) {
	b.SetBytes(int64(len(c.Bytes)))
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		eachLine(b, c, decode)
	}
	b.ReportMetric(float64(c.Messages)*float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	b.ReportMetric(0, "ns/op") // the pass time depends on the corpus: read msgs/s
}

func BenchmarkCodecSmallMcpwire(b *testing.B) { benchCodec(b, small, mcpwireDecoder()) }
func BenchmarkCodecSmallGoSDK(b *testing.B)   { benchCodec(b, small, goSDKDecoder()) }
func BenchmarkCodecMixedMcpwire(b *testing.B) { benchCodec(b, mixed, mcpwireDecoder()) }
func BenchmarkCodecMixedGoSDK(b *testing.B)   { benchCodec(b, mixed, goSDKDecoder()) }

// benchCodecSideBySide alternates a pass of each decoder over the corpus, so both see the
// same machine, and reports each one's msgs/s and their ratio.
func benchCodecSideBySide(b *testing.B, c corpus.Corpus) {
	ours, theirs := mcpwireDecoder(), goSDKDecoder()
	var oursTime, theirsTime time.Duration
	for b.Loop() {
		start := time.Now()
		eachLine(b, c, ours)
		oursTime += time.Since(start)
		start = time.Now()
		eachLine(b, c, theirs)
		theirsTime += time.Since(start)
	}
	total := float64(c.Messages) * float64(b.N)
	b.ReportMetric(total/oursTime.Seconds(), "mcpwire-msgs/s")
	b.ReportMetric(total/theirsTime.Seconds(), "gosdk-msgs/s")
	b.ReportMetric(theirsTime.Seconds()/oursTime.Seconds(), "x-gosdk")
}

func BenchmarkCodecSmallSideBySide(b *testing.B) { benchCodecSideBySide(b, small) }
func BenchmarkCodecMixedSideBySide(b *testing.B) { benchCodecSideBySide(b, mixed) }
