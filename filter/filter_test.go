package filter_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/filter"
)

// order is a Stripe-like event, the body most rules in these tests look at.
const order = `{
	"type": "invoice.paid",
	"livemode": false,
	"id": 9007199254740993,
	"data": {"object": {"amount": 2500, "currency": "eur", "customer": null, "note": "rush order",
		"lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1, "tags": ["gift"]}],
		"created": "2026-11-03T10:00:00Z"}}
}`

func input(body string) *filter.Input {
	return &filter.Input{
		Method: http.MethodPost,
		Path:   "/stripe/events",
		Query:  "page=2&tag=a&tag=b",
		Header: http.Header{"X-Github-Event": {"push"}, "Content-Length": {"42"}, "X-Multi": {"one", "two"}},
		Body:   []byte(body),
	}
}

func match(t *testing.T, rule string, in *filter.Input) bool {
	t.Helper()
	f, err := filter.Compile([]byte(rule))
	require.NoError(t, err, rule)
	return f.Match(in)
}

func TestOperators(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rule string
		want bool
	}{
		// $eq, also implied by a literal, by value for numbers, exactly for the rest.
		{`{"body.type": "invoice.paid"}`, true},
		{`{"body.type": {"$eq": "invoice.paid"}}`, true},
		{`{"body.type": {"$eq": "invoice.failed"}}`, false},
		{`{"body.data.object.amount": 2500}`, true},
		{`{"body.data.object.amount": 2500.0}`, true},
		{`{"body.data.object.amount": "2500"}`, false},
		{`{"body.livemode": false}`, true},
		{`{"body.data.object.customer": null}`, true},
		{`{"body.id": 9007199254740993}`, true},
		{`{"body.id": 9007199254740992}`, false},
		{`{"body.data.object.lines.1.tags": ["gift"]}`, true},
		{`{"body.data.object.lines.0": {"$eq": {"sku": "A-1", "qty": 2}}}`, true},
		// $neq: nothing at the path equals the value; a missing field equals nothing.
		{`{"body.type": {"$neq": "invoice.failed"}}`, true},
		{`{"body.type": {"$neq": "invoice.paid"}}`, false},
		{`{"body.nothing": {"$neq": 1}}`, true},
		// $gt $gte $lt $lte: numbers by value, strings in order, nothing across types.
		{`{"body.data.object.amount": {"$gt": 2499}}`, true},
		{`{"body.data.object.amount": {"$gt": 2500}}`, false},
		{`{"body.data.object.amount": {"$gte": 2500}}`, true},
		{`{"body.data.object.amount": {"$lt": 2500.5}}`, true},
		{`{"body.data.object.amount": {"$lte": 2499}}`, false},
		{`{"body.data.object.amount": {"$gte": 1000, "$lt": 5000}}`, true},
		{`{"body.data.object.created": {"$gte": "2026-11-01T00:00:00Z"}}`, true},
		{`{"body.data.object.created": {"$lt": "2026-11-01T00:00:00Z"}}`, false},
		{`{"body.type": {"$gt": 3}}`, false},
		{`{"headers.content-length": {"$gt": 40}}`, true},
		// $in $nin.
		{`{"body.data.object.currency": {"$in": ["usd", "eur"]}}`, true},
		{`{"body.data.object.currency": {"$in": ["usd", "gbp"]}}`, false},
		{`{"body.data.object.currency": {"$nin": ["usd", "gbp"]}}`, true},
		{`{"body.data.object.currency": {"$nin": ["eur"]}}`, false},
		{`{"body.data.object.amount": {"$in": [1, 2500]}}`, true},
		// $exists: null exists, a missing field does not.
		{`{"body.data.object.customer": {"$exists": true}}`, true},
		{`{"body.data.object.refund": {"$exists": true}}`, false},
		{`{"body.data.object.refund": {"$exists": false}}`, true},
		{`{"headers.x-github-event": {"$exists": true}}`, true},
		{`{"headers.x-gitlab-event": {"$exists": true}}`, false},
		// $regex: RE2 over strings only.
		{`{"body.data.object.note": {"$regex": "^rush"}}`, true},
		{`{"body.data.object.note": {"$regex": "(?i)RUSH"}}`, true},
		{`{"body.data.object.note": {"$regex": "^order"}}`, false},
		{`{"body.data.object.amount": {"$regex": "25"}}`, false},
		{`{"path": {"$regex": "^/stripe/"}}`, true},
		// $and $or $not.
		{`{"$and": [{"body.type": "invoice.paid"}, {"method": "POST"}]}`, true},
		{`{"$and": [{"body.type": "invoice.paid"}, {"method": "GET"}]}`, false},
		{`{"$or": [{"body.type": "x"}, {"method": "POST"}]}`, true},
		{`{"$or": [{"body.type": "x"}, {"method": "GET"}]}`, false},
		{`{"$not": {"body.type": "invoice.paid"}}`, false},
		{`{"$not": {"method": "GET"}}`, true},
		{`{"body.type": {"$not": {"$in": ["a", "b"]}}}`, true},
		{`{"body.type": {"$not": {"$regex": "^invoice\\."}}}`, false},
		// Keys of one object must all hold.
		{`{"method": "POST", "body.type": "invoice.paid"}`, true},
		{`{"method": "POST", "body.type": "invoice.failed"}`, false},
	} {
		require.Equal(t, c.want, match(t, c.rule, input(order)), c.rule)
	}
}

func TestPaths(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rule string
		want bool
	}{
		// Dot paths and nested objects say the same.
		{`{"body": {"data": {"object": {"amount": {"$gte": 2000}}}}}`, true},
		{`{"body.data": {"object.currency": "eur"}}`, true},
		{`{"body": {"$or": [{"type": "x"}, {"data.object.currency": "eur"}]}}`, true},
		// Into arrays: by index, or each element's field.
		{`{"body.data.object.lines.0.sku": "A-1"}`, true},
		{`{"body.data.object.lines.1.sku": "A-1"}`, false},
		{`{"body.data.object.lines.5.sku": {"$exists": true}}`, false},
		{`{"body.data.object.lines.sku": "B-7"}`, true},
		{`{"body.data.object.lines.sku": {"$in": ["C-1", "B-7"]}}`, true},
		{`{"body.data.object.lines.sku": {"$nin": ["B-7"]}}`, false},
		{`{"body.data.object.lines.qty": {"$gt": 1}}`, true},
		{`{"body.data.object.lines.qty": {"$gt": 2}}`, false},
		// An array matches a value one of its elements equals.
		{`{"body.data.object.lines.tags": "gift"}`, true},
		{`{"body.data.object.lines.1.tags": {"$in": ["gift"]}}`, true},
		// Headers by any case; repeated values each count; the query by parameter or as a whole.
		{`{"headers.X-GitHub-Event": "push"}`, true},
		{`{"headers.x-github-event": "push"}`, true},
		{`{"headers": {"X-GITHUB-EVENT": "push"}}`, true},
		{`{"headers.x-multi": "two"}`, true},
		{`{"headers": {"$eq": {"x-github-event": "push", "content-length": "42", "x-multi": "one, two"}}}`, true},
		{`{"query.page": 2}`, true},
		{`{"query.tag": "b"}`, true},
		{`{"query.tag": {"$nin": ["a"]}}`, false},
		{`{"query": "page=2&tag=a&tag=b"}`, true},
		{`{"method": {"$in": ["POST", "PUT"]}}`, true},
		{`{"path": "/stripe/events"}`, true},
	} {
		require.Equal(t, c.want, match(t, c.rule, input(order)), c.rule)
	}
}

func TestBodyThatIsNotJSON(t *testing.T) {
	t.Parallel()
	in := input("type=invoice.paid&amount=12")
	require.False(t, match(t, `{"body.type": {"$exists": true}}`, in))
	require.True(t, match(t, `{"body": {"$regex": "type=invoice\\.paid"}}`, in))
	// A body that starts like JSON but is not is text too.
	require.True(t, match(t, `{"body": "{not json"}`, input("{not json")))
	// A top-level array.
	require.True(t, match(t, `{"body.0.id": 1}`, input(`[{"id": 1}]`)))
	require.True(t, match(t, `{"body.id": 2}`, input(`[{"id": 1}, {"id": 2}]`)))
}

func TestBodyParsedOnceAndOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	headersOnly, err := filter.Compile([]byte(`{"headers.x-github-event": "push"}`))
	require.NoError(t, err)
	require.False(t, headersOnly.NeedsBody())
	onBody, err := filter.Compile([]byte(`{"$or": [{"method": "GET"}, {"body.type": "invoice.paid"}]}`))
	require.NoError(t, err)
	require.True(t, onBody.NeedsBody())

	in := input(order)
	require.True(t, headersOnly.Match(in))
	in.Body = []byte(`{"type": "changed"}`) // not parsed yet: the next rule reads this one
	require.False(t, onBody.Match(in))
	in.Body = []byte(order) // parsed already: every later rule sees the first parse
	require.False(t, onBody.Match(in))
}

func TestLargeBodiesAreNotParsed(t *testing.T) {
	t.Parallel()
	big := `{"type": "x", "pad": "` + strings.Repeat("a", filter.MaxBodyParsed) + `"}`
	require.False(t, match(t, `{"body.type": "x"}`, input(big)))
	require.True(t, match(t, `{"body.type": "x"}`, input(`{"type": "x"}`)))
}

func TestRegexBounds(t *testing.T) {
	t.Parallel()
	// A pattern sees the first MaxRegexInput bytes of a value.
	long := strings.Repeat("a", filter.MaxRegexInput) + "needle"
	require.False(t, match(t, `{"body.s": {"$regex": "needle"}}`, input(fmt.Sprintf(`{"s": %q}`, long))))
	require.True(t, match(t, `{"body.s": {"$regex": "^a+"}}`, input(fmt.Sprintf(`{"s": %q}`, long))))
	// The patterns of one evaluation see MaxRegexBudget bytes in all: past it, none matches.
	n := filter.MaxRegexBudget/filter.MaxRegexInput + 1
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("%q", strings.Repeat("b", filter.MaxRegexInput-1)+"z")
	}
	body := `{"items": [` + strings.Join(items, ",") + `], "last": "z"}`
	require.False(t, match(t, `{"body.items": {"$regex": "^z"}}`, input(body)))
	f, err := filter.Compile([]byte(`{"$and": [{"body.items": {"$regex": "^z"}}, {"body.last": {"$regex": "z"}}]}`))
	require.NoError(t, err)
	require.False(t, f.Match(input(body)), "budget spent on the items leaves nothing for the last pattern")
	require.True(t, match(t, `{"body.last": {"$regex": "z"}}`, input(body)), "a fresh evaluation has a fresh budget")
}

func TestInvalidRules(t *testing.T) {
	t.Parallel()
	deep := `{"body": ` + strings.Repeat(`{"a": `, filter.MaxDepth) + `1` + strings.Repeat("}", filter.MaxDepth) + `}`
	conds := make([]string, filter.MaxConditions+1)
	for i := range conds {
		conds[i] = fmt.Sprintf(`"body.f%d": 1`, i)
	}
	list := make([]string, filter.MaxListValues+1)
	for i := range list {
		list[i] = "1"
	}
	for _, c := range []struct{ rule, msg string }{
		{`[]`, `$: a rule is a JSON object`},
		{`{"body.type": }`, `$: not valid JSON`},
		{`{} {}`, `$: not valid JSON: data after the rule`},
		{`{}`, `$: an empty object tests nothing`},
		{`{"bdy.type": "x"}`, `$.bdy.type: unknown field "bdy": a path starts with method, path, query, headers or body`},
		{`{"body..type": "x"}`, `$.body..type: "body..type" is not a dot path`},
		{`{"body.amount": {"$gte": true}}`, `$.body.amount.$gte: expected a number or a string`},
		{`{"body.amount": {"$gte": [1]}}`, `$.body.amount.$gte: expected a number or a string`},
		{`{"body.amount": {"$in": 3}}`, `$.body.amount.$in: expected an array of values`},
		{`{"body.amount": {"$in": [1, [2]]}}`, `$.body.amount.$in[1]: expected a string, number, boolean or null`},
		{`{"body.amount": {"$exists": "yes"}}`, `$.body.amount.$exists: expected true or false`},
		{`{"body.amount": {"$between": [1, 2]}}`, `$.body.amount.$between: unknown operator $between`},
		{`{"body.amount": {"$regex": 5}}`, `$.body.amount.$regex: expected a pattern (a string)`},
		{`{"body.note": {"$regex": "(unclosed"}}`, `$.body.note.$regex: invalid pattern: error parsing regexp: missing closing )`},
		{`{"body.note": {"$regex": "` + strings.Repeat("a", filter.MaxPattern+1) + `"}}`, `$.body.note.$regex: a pattern is at most 256 bytes`},
		{`{"body.note": {"$regex": "((a{100}){100})"}}`, `$.body.note.$regex: `},
		{`{"body.note": {"$regex": "(a{1,99}){9}"}}`, `$.body.note.$regex: pattern too large`},
		{`{"$or": []}`, `$.$or: expected a non-empty array of rules`},
		{`{"$or": [{"method": "GET"}, "POST"]}`, `$.$or[1]: expected a rule (a JSON object)`},
		{`{"$and": [{"method": {"$gt": null}}]}`, `$.$and[0].method.$gt: expected a number or a string`},
		{`{"$not": "x"}`, `$.$not: expected a rule or a set of operators`},
		{`{"$eq": "x"}`, `$.$eq: $eq needs a field`},
		{`{"method.name": "x"}`, `$.method.name: method is text and has no fields`},
		{`{"headers.a.b": "x"}`, `$.headers.a.b: a header has no fields`},
		{`{"query.a.b": "x"}`, `$.query.a.b: a query parameter has no fields`},
		{`{"body.a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q": 1}`, `a path has at most 16 segments`},
		{deep, `a rule nests at most 8 levels`},
		{`{` + strings.Join(conds, ",") + `}`, `a rule has at most 64 conditions`},
		{`{"body.a": {"$in": [` + strings.Join(list, ",") + `]}}`, `$.body.a.$in: expected at most 256 values`},
		{`{"body.a": "` + strings.Repeat("x", filter.MaxRuleBytes) + `"}`, `$: a rule is at most 16384 bytes`},
	} {
		_, err := filter.Compile([]byte(c.rule))
		require.Error(t, err, c.rule)
		var fe *filter.Error
		require.ErrorAs(t, err, &fe)
		require.Contains(t, err.Error(), c.msg, c.rule)
	}
}

func TestCachedCompilesOnce(t *testing.T) {
	t.Parallel()
	a, err := filter.Cached(`{"method": "PATCH"}`)
	require.NoError(t, err)
	b, err := filter.Cached(`{"method": "PATCH"}`)
	require.NoError(t, err)
	require.Same(t, a, b)
	_, err = filter.Cached(`{"method": {"$gt": {}}}`)
	require.Error(t, err)
	require.Equal(t, `{"method":{"$gt":"A"}}`, mustCompile(t, `{ "method" : {"$gt": "A"} }`).String(), "the text is kept compact")
}

func mustCompile(t *testing.T, rule string) *filter.Filter {
	t.Helper()
	f, err := filter.Compile([]byte(rule))
	require.NoError(t, err)
	return f
}
