package api

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// TestBodyGate: a tenant holds one place at a time and the process maxBodyOperations; a caller that gives up
// while waiting leaves no place taken.
func TestBodyGate(t *testing.T) {
	t.Parallel()
	g := newBodyGate(fieldCosts(1<<20, DefaultComplexityLimit))
	gaveUp, cancel := context.WithCancel(t.Context())
	cancel()

	release1, err := g.enter(t.Context(), 1)
	require.NoError(t, err)
	_, err = g.enter(gaveUp, 1)
	require.ErrorIs(t, err, context.Canceled, "tenant 1 already holds its place")

	release2, err := g.enter(t.Context(), 2)
	require.NoError(t, err)
	_, err = g.enter(gaveUp, 3)
	require.ErrorIs(t, err, context.Canceled, "both places of the process are taken")

	release1()
	release3, err := g.enter(t.Context(), 3)
	require.NoError(t, err, "tenant 3 gave up its own place when it stopped waiting, and a process place is free")
	_, err = g.enter(gaveUp, 1)
	require.ErrorIs(t, err, context.Canceled, "tenants 2 and 3 hold the process's places")
	release2()
	release1, err = g.enter(t.Context(), 1)
	require.NoError(t, err)
	release1()
	release3()
}

// TestBodyGateReads: the gate sees a body field however the query reaches it.
func TestBodyGateReads(t *testing.T) {
	t.Parallel()
	g := newBodyGate(fieldCosts(1<<20, DefaultComplexityLimit))
	cases := []struct {
		query string
		reads bool
	}{
		{`{ requests(serverId: "1") { edges { node { id bodySize } } } }`, false},
		{`{ requests(serverId: "1") { edges { node { id body } } } }`, true},
		{`{ node(id: "1") { ... on Request { bodyBase64 } } }`, true},
		{`query { outboundJobs { edges { node { ...J } } } } fragment J on OutboundJob { attempts { responseBody } }`, true},
		{`query { outboundJobs { edges { node { ...J } } } } fragment J on OutboundJob { id url }`, false},
	}
	for _, c := range cases {
		doc, err := parser.ParseQuery(&ast.Source{Input: c.query})
		require.NoError(t, err, c.query)
		require.Equal(t, c.reads, g.reads(doc, doc.Operations[0].SelectionSet, 0), c.query)
	}
}
