package delivery

import (
	"encoding/json"
	"testing"
	"time"
)

// TestJSONRowWritesWhatEncodingJSONWrites: an array of hand-written rows decodes to the values written, and a
// string decodes as encoding/json would encode it — escapes, multi-byte characters, and U+FFFD for a byte
// that is not UTF-8 — so the statements read the same values they read when the rows were marshalled.
func TestJSONRowWritesWhatEncodingJSONWrites(t *testing.T) {
	strs := []string{"", "plain", `quote " and \ backslash`, "nl \n tab \t bell \x07 unit \x1f", "ünïcødé ✓ 𝄞",
		"bad \xff byte", "cut \xe2\x9c", "\u2028 line sep", "/in/abc?x=%ff"}
	at := time.Date(2026, 12, 1, 19, 2, 3, 456789123, time.FixedZone("x", 3*3600+1800))
	arr := []byte{'['}
	for i, s := range strs {
		n := i
		w := jsonRow{b: arr}
		w.open()
		w.str("s", s)
		w.null("none")
		w.int("n", -i)
		w.int64("big", 1<<62)
		w.intp("p", &n)
		w.intp("np", nil)
		w.bool("b", i%2 == 0)
		w.time("t", &at)
		w.time("nt", nil)
		arr = w.close()
	}
	arr = append(arr, ']')
	var got []struct {
		S    string
		None *string
		N    int
		Big  int64
		P    *int
		NP   *int
		B    bool
		T    time.Time
		NT   *time.Time
	}
	if err := json.Unmarshal(arr, &got); err != nil {
		t.Fatalf("not JSON: %v (%s)", err, arr)
	}
	if len(got) != len(strs) {
		t.Fatalf("%d rows of %d: %s", len(got), len(strs), arr)
	}
	for i, s := range strs {
		want, _ := json.Marshal(s)
		var wantS string
		_ = json.Unmarshal(want, &wantS)
		g := got[i]
		if g.S != wantS || g.None != nil || g.N != -i || g.Big != 1<<62 || g.P == nil || *g.P != i || g.NP != nil ||
			g.B != (i%2 == 0) || !g.T.Equal(at) || g.NT != nil {
			t.Fatalf("row %d (%q) decoded as %+v", i, s, g)
		}
	}
}
