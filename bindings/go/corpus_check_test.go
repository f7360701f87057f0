package mcpwire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// The SHA-256 and sizes of the corpora benches/corpus.rs generates (small(), mixed()).
const (
	smallCorpusSHA256 = "0cc74ca95ccfe0560fa773e6af97e2e5c678d0300e6b05523f3d93440fae37eb"
	smallCorpusBytes  = 4804981
	mixedCorpusSHA256 = "482b03e130080babd4d127fb93f4cf486ab5b6c750e7c9d4766c3a4a25a3531c"
	mixedCorpusBytes  = 5955840
)

func TestCorpusMatchesRust(t *testing.T) {
	for _, tc := range []struct {
		name     string
		c        corpus
		sum      string
		size     int
		messages int
	}{
		{"small", smallCorpus(), smallCorpusSHA256, smallCorpusBytes, 32_000},
		{"mixed", mixedCorpus(), mixedCorpusSHA256, mixedCorpusBytes, 5_000},
	} {
		sum := sha256.Sum256(tc.c.bytes)
		if len(tc.c.bytes) != tc.size || hex.EncodeToString(sum[:]) != tc.sum {
			t.Errorf("%s: %d bytes, sha256 %x; the Rust generator gives %d bytes, %s", tc.name, len(tc.c.bytes), sum, tc.size, tc.sum)
		}
		if n := bytes.Count(tc.c.bytes, []byte("\n")); n != tc.messages || tc.c.messages != n {
			t.Errorf("%s: %d lines", tc.name, n)
		}
	}
}
