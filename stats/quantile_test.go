package stats_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/stats"
)

// A duration is counted in the first bucket whose bound it does not pass.
func TestBucket(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, stats.Bucket(-1))
	require.Equal(t, 0, stats.Bucket(0))
	require.Equal(t, 0, stats.Bucket(10))
	require.Equal(t, 1, stats.Bucket(11))
	require.Equal(t, 6, stats.Bucket(1000))
	require.Equal(t, 10, stats.Bucket(30000))
	require.Equal(t, 11, stats.Bucket(30001))
	require.Equal(t, stats.Buckets-1, stats.Bucket(1<<40))
}

// Quantiles interpolate within the bucket their rank falls in, from zero for the first bucket; a quantile in
// the open last bucket is its lower bound.
func TestQuantile(t *testing.T) {
	t.Parallel()
	var b [stats.Buckets]int64
	require.Nil(t, stats.Quantile(b, 0.5), "nothing counted")

	b[0] = 10 // ten attempts of up to 10 ms
	require.InDelta(t, 5, *stats.Quantile(b, 0.5), 1e-9)
	require.InDelta(t, 9.5, *stats.Quantile(b, 0.95), 1e-9)

	// 50 in (10, 25], 50 in (100, 250]: the median is the top of the first, p95 nine tenths into the second.
	b = [stats.Buckets]int64{}
	b[1], b[4] = 50, 50
	require.InDelta(t, 25, *stats.Quantile(b, 0.5), 1e-9)
	require.InDelta(t, 100+150*0.9, *stats.Quantile(b, 0.95), 1e-9)

	b = [stats.Buckets]int64{}
	b[stats.Buckets-1] = 3
	require.InDelta(t, 30000, *stats.Quantile(b, 0.5), 1e-9)

	h := stats.RecipientHour{Attempts: 4, Successes: 3, Durations: [stats.Buckets]int64{0, 4}}
	require.EqualValues(t, 1, h.Failures())
	require.InDelta(t, 0.75, *h.SuccessRate(), 1e-9)
	require.InDelta(t, 17.5, *h.P50Ms(), 1e-9)
	require.Nil(t, stats.RecipientHour{}.SuccessRate())
	require.Nil(t, stats.RecipientHour{}.P95Ms())
}
