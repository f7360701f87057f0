module github.com/mcpwire/mcpwire/benches/e2e/loadgen

go 1.26

toolchain go1.26.8
