package mcpwire

import (
	"bytes"
	"errors"
	"sort"
	"strings"
	"testing"
)

// FuzzFeed feeds arbitrary bytes to a server (fresh and past the handshake; handshake era
// only, and both eras), draining every
// output after each feed: the engine must never fail a call, and feeding the input whole or
// in small pieces must give the same events and the same output lines. Seeds (testdata/fuzz/FuzzFeed) are
// the spec's example messages; regenerate them with `go run ./testdata/gen seeds`.
func FuzzFeed(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n"))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":\"x\\u0000\",\"method\":\"ping\"}\r\n[]\n\n{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		bothEras := serverConfig()
		bothEras.Versions = nil
		for _, v := range []struct {
			name      string
			cfg       *Config
			handshake bool
		}{
			{"fresh, handshake era", serverConfig(), false},
			{"initialized, handshake era", serverConfig(), true},
			{"fresh, both eras", bothEras, false},
		} {
			whole := feedAndDrain(t, data, len(data)+1, v.cfg, v.handshake)
			split := feedAndDrain(t, data, 3, v.cfg, v.handshake)
			if whole != split {
				t.Fatalf("%s: whole and split differ:\n%s\nvs\n%s", v.name, whole, split)
			}
		}
	})
}

func feedAndDrain(t *testing.T, data []byte, chunk int, cfg *Config, handshake bool) string {
	var s *Conn
	if handshake {
		s = serverAfterHandshake(t, cfg)
	} else {
		var err error
		if s, err = NewConn(cfg, epoch); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}
	var log bytes.Buffer
	var out []byte
	// Requests are answered once all the input is in, as a server would answer them later:
	// answering each as soon as its chunk arrives would make the outcome depend on where the
	// chunks end (a request repeating the id of one still unanswered is refused, but not once
	// the first has been answered).
	var unanswered []ID
	answer := func() {
		for _, id := range unanswered {
			// Refusals (the connection closed meanwhile) are fine; anything else is not:
			// an id passed back unchanged must always be accepted.
			var re *ResultError
			if err := s.Respond(id, []byte(`{}`)); err != nil && !(errors.As(err, &re) && re.Code.IsRefused()) {
				t.Fatalf("respond to %v: %v", id, err)
			}
		}
		unanswered = unanswered[:0]
	}
	drain := func() {
		for ev, ok := s.NextEvent(); ok; ev, ok = s.NextEvent() {
			log.WriteString(dump([]Event{ev}))
			if r, ok := ev.(*RequestEvent); ok {
				unanswered = append(unanswered, r.ID)
			}
		}
		if s.Err() != nil {
			t.Fatalf("poll: %v", s.Err())
		}
		var err error
		if out, err = s.AppendOutput(out); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < len(data); i += chunk {
		end := i + chunk
		if end > len(data) {
			end = len(data)
		}
		if err := s.Feed(epoch, data[i:end]); err != nil {
			t.Fatalf("feed: %v", err)
		}
		drain()
	}
	answer()
	drain()
	if err := s.FeedEOF(epoch); err != nil {
		t.Fatalf("eof: %v", err)
	}
	drain()
	// Answers we give interleave with the engine's own by where the chunks end, so the output
	// is compared as a set of lines; the events must match in order.
	lines := strings.SplitAfter(string(out), "\n")
	sort.Strings(lines)
	log.WriteString("\n")
	log.WriteString(strings.Join(lines, ""))
	return log.String()
}
