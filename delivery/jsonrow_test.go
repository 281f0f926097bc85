package delivery

import (
	"encoding/json"
	"testing"
	"time"
)

// TestJSONRowWritesWhatEncodingJSONWrites: the hand-written rows decode to the values written, and a string
// decodes as encoding/json would encode it — escapes, multi-byte characters, and U+FFFD for a byte that is not
// UTF-8 — so the statements read the same values they read when the rows were marshalled.
func TestJSONRowWritesWhatEncodingJSONWrites(t *testing.T) {
	strs := []string{"", "plain", `quote " and \ backslash`, "nl \n tab \t bell \x07 nul-free \x1f", "ünïcødé ✓ 𝄞",
		"bad \xff byte", "cut \xe2\x9c", "\u2028 line sep", "/in/abc?x=%ff"}
	at := time.Date(2026, 12, 1, 19, 2, 3, 456789123, time.FixedZone("x", 3*3600+1800))
	n := 7
	for _, s := range strs {
		w := jsonRow{first: true}
		w.open()
		w.str("s", s)
		w.strp("none", nil)
		w.int("n", -42)
		w.int64("big", 1<<62)
		w.intp("p", &n)
		w.intp("np", nil)
		w.bool("b", true)
		w.time("t", &at)
		w.time("nt", nil)
		raw := w.close()
		var got struct {
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
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("%q: not JSON: %v (%s)", s, err, raw)
		}
		want, _ := json.Marshal(s)
		var wantS string
		_ = json.Unmarshal(want, &wantS)
		if got.S != wantS || got.None != nil || got.N != -42 || got.Big != 1<<62 || got.P == nil || *got.P != 7 ||
			got.NP != nil || !got.B || !got.T.Equal(at) || got.NT != nil {
			t.Fatalf("%q: row %s decoded as %+v", s, raw, got)
		}
	}
}
