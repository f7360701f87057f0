module github.com/mcpwire/mcpwire/bindings/go

go 1.26

toolchain go1.26.8
