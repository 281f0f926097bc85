package storage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNullTimeReadsWhatSQLiteHandsBack(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 11, 30, 5, 4, 3, 120000000, time.UTC)
	for _, src := range []any{
		want,
		want.String(),
		want.String() + " m=+12.345678901",
		"2026-11-30 05:04:03.12+00:00",
		[]byte("2026-11-30T05:04:03.12Z"),
	} {
		var v NullTime
		require.NoError(t, v.Scan(src), "%v", src)
		require.True(t, v.Valid)
		require.True(t, want.Equal(v.Time), "%v parsed as %v", src, v.Time)
	}
	var v NullTime
	require.NoError(t, v.Scan(nil))
	require.False(t, v.Valid)
	require.Error(t, v.Scan("yesterday"))
}
