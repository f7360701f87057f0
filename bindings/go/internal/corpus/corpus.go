// Package corpus is a Go port of the deterministic traffic generator in benches/corpus.rs, so
// the Go benchmarks (this module's and the bench module's) measure the same bytes as the Rust
// ones without checking 11 MB of corpora in. It must reproduce the Rust output byte for byte:
// TestCorpusMatchesRust in the binding pins the SHA-256 of both corpora (printed by a program
// that includes benches/corpus.rs and writes them out).
package corpus

import (
	"fmt"
	"strconv"
	"unicode/utf16"
)

// Corpus is newline-delimited JSON-RPC traffic: Bytes holds Messages lines.
type Corpus struct {
	Bytes    []byte
	Messages int
}

// Mixed is realistic tool traffic, about 1.2 KB per message on average (5,000 messages).
func Mixed() Corpus {
	const messages = 5_000
	g := &gen{state: 0x6d63_7077_6972_6531}
	out := make([]byte, 0, messages*1300)
	for n := 0; n < messages; n++ {
		id := g.id(n)
		switch {
		case n%250 == 125:
			out = g.toolsListResult(out, id)
		case n%1000 == 617:
			out = g.resourceBlobResult(out, id)
		default:
			switch k := g.below(100); {
			case k <= 24:
				out = g.toolsCallRequest(out, id)
			case k <= 40:
				out = g.progressNotification(out)
			case k <= 47:
				out = g.pingRequest(out, id)
			case k <= 54:
				out = g.emptyResult(out, id)
			case k <= 90:
				out = g.textResult(out, id, 500+g.below(3500))
			default:
				out = g.errorResponse(out, id)
			}
		}
		out = append(out, '\n')
	}
	return Corpus{out, messages}
}

// Small is chatty control traffic, about 150 B per message on average (32,000 messages).
func Small() Corpus {
	const messages = 32_000
	g := &gen{state: 0x736d_616c_6c5f_7331}
	out := make([]byte, 0, messages*160)
	for n := 0; n < messages; n++ {
		id := g.id(n)
		switch k := g.below(100); {
		case k <= 10:
			out = g.pingRequest(out, id)
		case k <= 20:
			out = g.emptyResult(out, id)
		case k <= 47:
			out = g.toolsCallRequest(out, id)
		case k <= 74:
			out = g.progressNotification(out)
		case k <= 90:
			out = g.textResult(out, id, 40+g.below(180))
		default:
			out = g.errorResponse(out, id)
		}
		out = append(out, '\n')
	}
	return Corpus{out, messages}
}

type genID struct {
	isStr bool
	n     int64
	s     string
}

var asciiWords = []string{"the", "file", "config", "server", "request", "returned", "value", "index",
	"search", "matched", "line", "function", "error", "warning", "build", "test", "passed", "module",
	"path", "src/lib.rs", "async", "await", "token", "cache", "miss", "hit"}

var nonASCIIWords = []string{"résumé", "café", "naïve", "über", "Grüße", "日本語", "テスト", "数据", "🚀", "✅",
	"😀", "Ω", "→"}

var toolNames = []string{"read_file", "write_file", "search_files", "list_directory", "run_command",
	"git_status", "fetch_url", "query_database", "get_weather", "create_issue"}

var progressMessages = []string{"Indexing files", "Downloading dependencies", "Running tests",
	"Analyzing results", "Compiling"}

// gen is splitmix64 plus the message builders.
type gen struct{ state uint64 }

func (g *gen) next() uint64 {
	g.state += 0x9e37_79b9_7f4a_7c15
	z := g.state
	z = (z ^ (z >> 30)) * 0xbf58_476d_1ce4_e5b9
	z = (z ^ (z >> 27)) * 0x94d0_49bb_1331_11eb
	return z ^ (z >> 31)
}

func (g *gen) below(n int) int { return int(g.next() % uint64(n)) }

func (g *gen) pick(items []string) string { return items[g.below(len(items))] }

func (g *gen) id(n int) genID {
	if g.below(5) == 0 {
		return genID{isStr: true, s: fmt.Sprintf("req-%04x-%d", g.below(0x10000), n)}
	}
	return genID{n: int64(n) + 1}
}

func (g *gen) head(out []byte, id genID) []byte {
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	if id.isStr {
		out = append(out, '"')
		out = append(out, id.s...)
		return append(out, '"')
	}
	return strconv.AppendInt(out, id.n, 10)
}

func (g *gen) jsonStr(out []byte, s string) []byte {
	out = append(out, '"')
	for _, c := range s {
		switch {
		case c == '"':
			out = append(out, `\"`...)
		case c == '\\':
			out = append(out, `\\`...)
		case c == '\n':
			out = append(out, `\n`...)
		case c == '\t':
			out = append(out, `\t`...)
		case c == '\r':
			out = append(out, `\r`...)
		case c < 0x20:
			out = append(out, fmt.Sprintf(`\u%04x`, c)...)
		case c < 0x80:
			out = append(out, byte(c))
		default:
			if g.below(4) == 0 {
				units := utf16.Encode([]rune{c})
				for _, u := range units {
					out = append(out, fmt.Sprintf(`\u%04x`, u)...)
				}
			} else {
				out = append(out, string(c)...)
			}
		}
	}
	return append(out, '"')
}

func (g *gen) prose(n int) string {
	s := make([]byte, 0, n+16)
	for len(s) < n {
		switch k := g.below(400); {
		case k <= 27:
			s = append(s, '\n')
		case k <= 29:
			s = append(s, '\t')
		case k <= 39:
			s = append(s, '"')
			s = append(s, g.pick(asciiWords)...)
			s = append(s, `" `...)
		case k <= 42:
			s = append(s, `C:\Users\dev `...)
		case k <= 45:
			s = append(s, `{"k": [1, 2]} `...)
		case k <= 65:
			s = append(s, g.pick(nonASCIIWords)...)
			s = append(s, ' ')
		default:
			s = append(s, g.pick(asciiWords)...)
			s = append(s, ' ')
		}
	}
	return string(s)
}

func (g *gen) pingRequest(out []byte, id genID) []byte {
	return append(g.head(out, id), `,"method":"ping"}`...)
}

func (g *gen) emptyResult(out []byte, id genID) []byte {
	return append(g.head(out, id), `,"result":{}}`...)
}

func (g *gen) toolsCallRequest(out []byte, id genID) []byte {
	out = g.head(out, id)
	out = append(out, `,"method":"tools/call","params":{"_meta":{"progressToken":`...)
	if g.below(2) == 0 {
		out = strconv.AppendInt(out, int64(g.below(100_000)), 10)
	} else {
		out = append(out, fmt.Sprintf(`"pt-%d"`, g.below(100_000))...)
	}
	out = append(out, `},"name":"`...)
	out = append(out, g.pick(toolNames)...)
	out = append(out, `","arguments":{`...)
	switch g.below(3) {
	case 0:
		out = append(out, `"path":`...)
		out = g.jsonStr(out, fmt.Sprintf("/home/dev/project/src/%s.rs", g.pick(asciiWords)))
		out = append(out, `,"limit":`...)
		out = strconv.AppendInt(out, int64(g.below(1000)), 10)
		out = append(out, `,"recursive":true`...)
	case 1:
		out = append(out, `"query":`...)
		a := g.pick(asciiWords)
		b := g.pick(asciiWords)
		out = g.jsonStr(out, a+" "+b)
		out = append(out, `,"filters":{"lang":["rust","go"],"minScore":0.75,"since":null}`...)
	default:
		out = append(out, `"city":"Z\u00fcrich","units":"metric","days":`...)
		out = strconv.AppendInt(out, int64(1+g.below(7)), 10)
	}
	return append(out, `}}}`...)
}

func (g *gen) progressNotification(out []byte) []byte {
	out = append(out, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`...)
	out = append(out, fmt.Sprintf(`"pt-%d"`, g.below(100_000))...)
	total := 100 + g.below(900)
	progress := g.below(total)
	out = append(out, `,"progress":`...)
	if g.below(3) == 0 {
		out = append(out, fmt.Sprintf("%d.5", progress)...)
	} else {
		out = strconv.AppendInt(out, int64(progress), 10)
	}
	out = append(out, `,"total":`...)
	out = strconv.AppendInt(out, int64(total), 10)
	out = append(out, `,"message":"`...)
	out = append(out, g.pick(progressMessages)...)
	return append(out, `"}}`...)
}

func (g *gen) textResult(out []byte, id genID, n int) []byte {
	out = g.head(out, id)
	out = append(out, `,"result":{"content":[{"type":"text","text":`...)
	out = g.jsonStr(out, g.prose(n))
	out = append(out, `}],"isError":`...)
	if g.below(20) == 0 {
		out = append(out, "true"...)
	} else {
		out = append(out, "false"...)
	}
	return append(out, `}}`...)
}

const toolSchema = `,"inputSchema":{"type":"object","properties":{` +
	`"path":{"type":"string","description":"Absolute path to the file"},` +
	`"recursive":{"type":"boolean","default":false},` +
	`"limit":{"type":"integer","minimum":1,"maximum":1000,"default":100},` +
	`"tags":{"type":"array","items":{"type":"string"}}},` +
	`"required":["path"],"additionalProperties":false}`

func (g *gen) toolsListResult(out []byte, id genID) []byte {
	start := len(out)
	target := 20_000 + g.below(30_000)
	out = g.head(out, id)
	out = append(out, `,"result":{"tools":[`...)
	for i := 0; len(out)-start < target; i++ {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, fmt.Sprintf(`{"name":"tool_%d_%s",`, i, g.pick(toolNames))...)
		out = append(out, `"description":`...)
		out = g.jsonStr(out, g.prose(60+g.below(120)))
		out = append(out, toolSchema...)
		if g.below(3) == 0 {
			out = append(out, `,"annotations":{"readOnlyHint":true,"openWorldHint":false}`...)
		}
		out = append(out, '}')
	}
	out = append(out, `],"nextCursor":"`...)
	out = append(out, fmt.Sprintf("cursor-%d", g.below(1000))...)
	return append(out, `"}}`...)
}

func (g *gen) resourceBlobResult(out []byte, id genID) []byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	out = g.head(out, id)
	out = append(out, `,"result":{"contents":[{"uri":"file:///data/blob-`...)
	out = strconv.AppendInt(out, int64(g.below(1000)), 10)
	out = append(out, `.bin","mimeType":"application/octet-stream","blob":"`...)
	for i := 0; i < 48*1024/3; i++ {
		v := uint32(g.next()) & 0xff_ffff
		for _, shift := range []uint{18, 12, 6, 0} {
			out = append(out, alphabet[(v>>shift)&63])
		}
	}
	return append(out, `"}]}}`...)
}

func (g *gen) errorResponse(out []byte, id genID) []byte {
	out = g.head(out, id)
	if g.below(2) == 0 {
		out = append(out, `,"error":{"code":-32601,"message":`...)
		out = g.jsonStr(out, "Method not found: "+g.pick([]string{"tools/run", "prompts/exec", "foo/bar"}))
	} else {
		out = append(out, `,"error":{"code":-32602,"message":`...)
		out = g.jsonStr(out, `Invalid params: "`+g.pick([]string{"path", "query", "name"})+`" is required`)
		if g.below(2) == 0 {
			out = append(out, `,"data":{"field":"arguments.limit","expected":"integer","got":"string"}`...)
		}
	}
	return append(out, `}}`...)
}
