module github.com/mcpwire/mcpwire-go

go 1.19
