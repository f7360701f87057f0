package mcpwire

import gen "github.com/mcpwire/mcpwire/bindings/go/internal/corpus"

// corpus is the benchmarks' traffic (internal/corpus, the port of benches/corpus.rs).
type corpus struct {
	bytes    []byte
	messages int
}

func smallCorpus() corpus {
	c := gen.Small()
	return corpus{c.Bytes, c.Messages}
}

func mixedCorpus() corpus {
	c := gen.Mixed()
	return corpus{c.Bytes, c.Messages}
}
