package webhook_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/webhook"
)

func TestJoinTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		base, suffix, query string
		want                string
		wantErr             string
	}{
		{"https://r.test/hook", "", "", "https://r.test/hook", ""},
		{"https://r.test/hook", "/a/b", "", "https://r.test/hook/a/b", ""},
		{"https://r.test/hook/", "/a", "", "https://r.test/hook/a", ""},
		{"https://r.test/hook/", "", "", "https://r.test/hook/", ""},
		{"https://r.test", "", "", "https://r.test", ""},
		{"https://r.test", "/x", "", "https://r.test/x", ""},
		{"https://r.test/", "x/", "", "https://r.test/x/", ""},
		{"https://r.test:8443/hook", "/a", "x=1&y=2", "https://r.test:8443/hook/a?x=1&y=2", ""},
		{"https://r.test/hook?token=t", "/a", "x=1", "https://r.test/hook/a?token=t&x=1", ""},
		{"https://r.test/hook?token=t", "", "", "https://r.test/hook?token=t", ""},
		{"https://r.test/hook#frag", "/a", "", "https://r.test/hook/a", ""},
		{"http://r.test/h%20ook", "/a%2Fb/c%3Fd", "q=%2F", "http://r.test/h%20ook/a%2Fb/c%3Fd?q=%2F", ""},
		{"http://user:pw@r.test/h", "/a", "", "http://user:pw@r.test/h/a", ""},
		{"http://[::1]:8080/h", "/a", "", "http://[::1]:8080/h/a", ""},
		// Dot segments never climb above the base path.
		{"https://r.test/hook", "/../admin", "", "https://r.test/hook/admin", ""},
		{"https://r.test/hook", "/a/../../../admin", "", "https://r.test/hook/admin", ""},
		{"https://r.test/hook", "/%2e%2e/admin", "", "https://r.test/hook/admin", ""},
		{"https://r.test/hook", "/%2E%2e/%2e/admin", "", "https://r.test/hook/admin", ""},
		{"https://r.test/hook", "/a/./b/", "", "https://r.test/hook/a/b/", ""},
		{"https://r.test/hook", "/a/..", "", "https://r.test/hook", ""},
		{"https://r.test/hook", "/a/b/..", "", "https://r.test/hook/a/", ""},
		{"https://r.test/hook", "/..", "", "https://r.test/hook", ""},
		{"https://r.test/hook", "/...", "", "https://r.test/hook/...", ""},
		// Errors.
		{"ftp://r.test/hook", "", "", "", "scheme must be http or https"},
		{"r.test/hook", "", "", "", "scheme must be http or https"},
		{"http:///hook", "", "", "", "missing host"},
		{"http://r.test/%zz", "", "", "", "invalid URL escape"},
		{"https://r.test/hook", "/%zz", "", "", "path suffix"},
	}
	for _, tt := range tests {
		t.Run(tt.base+" "+tt.suffix+" "+tt.query, func(t *testing.T) {
			t.Parallel()
			got, err := webhook.JoinTarget(tt.base, tt.suffix, tt.query)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
