//go:build !race

package mcpwire

// raceEnabled: the race detector instruments this build (its allocations are not the
// plain build's, so allocation counts are not asserted).
const raceEnabled = false
