//go:build tools

// Package tools pins the code generators so `go generate ./...` uses the versions in go.mod.
package tools

import (
	_ "entgo.io/contrib/entgql"
	_ "entgo.io/ent/cmd/ent"
	_ "github.com/99designs/gqlgen"
)
