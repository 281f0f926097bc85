package ent

// ent first (it also writes graph/ent.graphql), then gqlgen from the module root where gqlgen.yml lives.
//go:generate go run entc.go
//go:generate sh -c "cd .. && go run github.com/99designs/gqlgen generate"
