package delivery

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
)

// TestOneStatementAgreesWithChunks: a batch OneStatement accepts is stored in one chunk, so a caller that
// skips the transaction on its word gets the batch stored whole or not at all; a batch it refuses is split so
// that no chunk's headers and bodies reach maxChunkBytes, except a request larger than that, alone.
func TestOneStatementAgreesWithChunks(t *testing.T) {
	big := make([]byte, 30<<20) // shared by every request: only its length counts
	header := http.Header{"Content-Type": {"application/json"}}
	cases := []struct {
		name   string
		bodies []int
		ends   []int
	}{
		{"none", nil, nil},
		{"small", []int{1 << 10, 1 << 10}, []int{2}},
		{"two large", []int{30 << 20, 30 << 20, 1 << 10}, []int{3}},
		{"three large", []int{30 << 20, 30 << 20, 30 << 20, 1 << 10}, []int{2, 4}},
		{"large among small, and empty", []int{1 << 10, 30 << 20, 0}, []int{3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items := make([]Incoming, len(tc.bodies))
			reqs := make([]*ent.Request, len(tc.bodies))
			for i, n := range tc.bodies {
				items[i] = Incoming{Request: NewRequest{Header: header, Body: big[:n]}}
				reqs[i] = &ent.Request{Headers: header, Body: big[:n]}
			}
			ends := chunkEnds(reqs)
			require.Equal(t, tc.ends, ends)
			require.Equal(t, len(ends) <= 1, OneStatement(items))
		})
	}
	huge := make([]byte, maxChunkBytes+1)
	reqs := []*ent.Request{{Body: big[:1]}, {Body: huge}, {Body: big[:1]}}
	require.Equal(t, []int{1, 2, 3}, chunkEnds(reqs), "a request beyond a chunk is a chunk of its own")
	require.False(t, OneStatement([]Incoming{{Request: NewRequest{Body: huge}}}))
}
