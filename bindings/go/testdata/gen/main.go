// Command gen writes the checked-in fuzz seed corpus of the Go binding.
//
//	cd bindings/go && go run ./testdata/gen [-spec ../../tests/data/spec/2026-07-28/examples]
//
// Every example in the spec directory that is a whole JSON-RPC message (an object with a
// "jsonrpc" member) becomes one seed in testdata/fuzz/FuzzFeed: the message compacted onto
// one line and terminated by a newline. One more seed joins all of them into a single
// stream. Output is deterministic (files in sorted order, names from the example's path).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func main() {
	spec := flag.String("spec", "../../tests/data/spec/2026-07-28/examples", "the spec examples directory")
	out := flag.String("out", "testdata/fuzz/FuzzFeed", "where the seeds go")
	flag.Parse()

	paths, err := filepath.Glob(filepath.Join(*spec, "*", "*.json"))
	if err != nil || len(paths) == 0 {
		log.Fatalf("no examples under %s (%v)", *spec, err)
	}
	sort.Strings(paths)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(*out, "spec-*"))
	for _, p := range old {
		os.Remove(p)
	}
	var stream bytes.Buffer
	n := 0
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			log.Fatal(err)
		}
		var probe map[string]json.RawMessage
		if json.Unmarshal(text, &probe) != nil || probe["jsonrpc"] == nil {
			continue // a fragment (params, a result, a content block), not a message
		}
		var line bytes.Buffer
		if err := json.Compact(&line, text); err != nil {
			log.Fatalf("%s: %v", p, err)
		}
		line.WriteByte('\n')
		stream.Write(line.Bytes())
		name := "spec-" + filepath.Base(filepath.Dir(p)) + "-" + strings.TrimSuffix(filepath.Base(p), ".json")
		write(filepath.Join(*out, name), line.Bytes())
		n++
	}
	write(filepath.Join(*out, "spec-all-messages"), stream.Bytes())
	fmt.Printf("wrote %d seeds (+1 joined) to %s\n", n, *out)
}

// write stores data in the corpus file format of `go test -fuzz`.
func write(path string, data []byte) {
	content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		log.Fatal(err)
	}
}
