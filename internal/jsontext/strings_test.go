package jsontext

import (
	"encoding/json"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s/\n\t\r\b\f\x01\x1f\x7f", "café \u2028 \ufffd 😀", "<&>"} {
		q := AppendQuoted(nil, s)
		var want string
		if err := json.Unmarshal(q, &want); err != nil || want != s {
			t.Errorf("AppendQuoted(%q) = %s: encoding/json reads %q, %v", s, q, want, err)
		}
		if got := string(AppendUnquoted(nil, q[1:len(q)-1])); got != s {
			t.Errorf("AppendUnquoted(%s) = %q, want %q", q, got, s)
		}
	}
	// Decoded as encoding/json decodes: pairs joined, a lone surrogate and invalid UTF-8 replaced.
	for _, q := range []string{`\ud83d\ude00`, `\ud800x`, `\udc00\ud800`, "a\xffb", `\u00e9\/\"`} {
		var want string
		if err := json.Unmarshal([]byte(`"`+q+`"`), &want); err != nil {
			t.Fatal(err)
		}
		if got := string(AppendUnquoted(nil, []byte(q))); got != want {
			t.Errorf("AppendUnquoted(%s) = %q, want %q", q, got, want)
		}
	}
	if Hex4([]byte("00e9")) != 0xe9 || Hex4([]byte("00g9")) != -1 {
		t.Error("Hex4")
	}
}
