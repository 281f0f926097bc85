package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestJournalKeepsEntriesUntilRemoved(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	j, err := openJournal(root, "http://localhost:8080", "5")
	require.NoError(t, err)
	defer j.Close()

	e := &entry{DeliveryID: "9", Attempt: 2, LeaseToken: "cli:a:b", Method: "POST", Path: "/x", ReceivedAt: time.Now()}
	require.NoError(t, j.put(e))
	got, err := j.get(jobKey{"9", 2})
	require.NoError(t, err)
	require.Nil(t, got.Result)
	require.Equal(t, "cli:a:b", got.LeaseToken)

	e.Result = &outcome{HTTPStatus: 200}
	require.NoError(t, j.put(e))
	all, err := j.list()
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, 200, all[0].Result.HTTPStatus)

	require.NoError(t, j.remove(jobKey{"9", 2}))
	require.NoError(t, j.remove(jobKey{"9", 2}), "removing twice is fine")
	got, err = j.get(jobKey{"9", 2})
	require.NoError(t, err)
	require.Nil(t, got)
	leftovers, _ := filepath.Glob(filepath.Join(j.dir, ".entry-*"))
	require.Empty(t, leftovers)
}

func TestJournalIsScopedAndLocked(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a, err := openJournal(root, "http://localhost:8080", "5")
	require.NoError(t, err)
	_, err = openJournal(root, "http://localhost:8080", "5")
	require.ErrorContains(t, err, "another adal listen")
	b, err := openJournal(root, "http://localhost:8080", "6")
	require.NoError(t, err, "another recipient has its own journal")
	c, err := openJournal(root, "http://example.com:8080", "5")
	require.NoError(t, err, "another server has its own journal")
	require.NotEqual(t, a.dir, b.dir)
	require.NotEqual(t, a.dir, c.dir)
	a.Close()
	a2, err := openJournal(root, "http://localhost:8080", "5")
	require.NoError(t, err, "free again once closed")
	a2.Close()
	b.Close()
	c.Close()
	st, err := os.Stat(a.dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
}

func TestWSURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://localhost:8080":            "ws://localhost:8080/graphql",
		"http://localhost:8080/":           "ws://localhost:8080/graphql",
		"https://adal.example.com/api":     "wss://adal.example.com/api/graphql",
		"https://adal.example.com/graphql": "wss://adal.example.com/graphql",
	} {
		got, err := wsURL(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, bad := range []string{"localhost:8080", "ftp://x", ""} {
		_, err := wsURL(bad)
		require.Error(t, err, bad)
	}
}
