package filter_test

import (
	"testing"

	"github.com/adal-relay/adal/filter"
)

// What a rule costs intake per request: a rule on a header, and one on the body, which parses it (once per
// request, whatever the number of rules).
func BenchmarkMatch(b *testing.B) {
	for _, c := range []struct{ name, rule string }{
		{"header", `{"headers.x-github-event": {"$in": ["push", "ping"]}}`},
		{"body", `{"body.type": "invoice.paid", "body.data.object.amount": {"$gte": 1000}}`},
		{"body-regex", `{"body.data.object.lines.sku": {"$regex": "^B-"}}`},
	} {
		f, err := filter.Compile([]byte(c.rule))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !f.Match(input(order)) {
					b.Fatal("no match")
				}
			}
		})
	}
}
