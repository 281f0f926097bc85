package delivery

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	firstStart = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	// lastEnd of a late attempt: well after firstStart, so tests can tell which one a wait counts from.
	lastEnd = firstStart.Add(7*time.Minute + 3*time.Second)
)

func TestScheduleValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s     Schedule
		valid bool
	}{
		{Quadratic, true},
		{Stepped, true},
		{Exponential, true},
		{"QUADRATIC", true},
		{"quadratic", false},
		{"", false},
		{"LINEAR", false},
		{" STEPPED", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.valid, tt.s.Valid(), "%q", tt.s)
	}
	require.Equal(t, Quadratic, DefaultSchedule)
}

func TestScheduleMaxAttempts(t *testing.T) {
	t.Parallel()
	require.Equal(t, 10, Quadratic.MaxAttempts())
	require.Equal(t, 10, Stepped.MaxAttempts())
	require.Equal(t, 12, Exponential.MaxAttempts())
	require.Equal(t, 10, Schedule("BOGUS").MaxAttempts())
}

// step is the wait before attempt next, counted from the end of the previous attempt.
type step struct {
	next int
	wait time.Duration
}

// requireWaits checks each step of a schedule that counts from the end of the previous attempt, and the sum
// of the waits.
func requireWaits(t *testing.T, s Schedule, total time.Duration, steps []step) {
	t.Helper()
	var sum time.Duration
	for _, tt := range steps {
		got := s.NextDue(tt.next, firstStart, lastEnd, time.Minute)
		require.Equal(t, lastEnd.Add(tt.wait), got, "%s attempt %d counts from the end of the previous one", s, tt.next)
		sum += got.Sub(lastEnd)
	}
	require.Equal(t, total, sum)
}

func TestQuadraticEveryStep(t *testing.T) {
	t.Parallel()
	requireWaits(t, Quadratic, 6*time.Hour+24*time.Minute, []step{
		{2, 4 * time.Minute},
		{3, 9 * time.Minute},
		{4, 16 * time.Minute},
		{5, 25 * time.Minute},
		{6, 36 * time.Minute},
		{7, 49 * time.Minute},
		{8, 64 * time.Minute},
		{9, 81 * time.Minute},
		{10, 100 * time.Minute},
	})
}

func TestSteppedEveryStep(t *testing.T) {
	t.Parallel()
	requireWaits(t, Stepped, 2*time.Hour+59*time.Minute, []step{
		{2, 1 * time.Minute}, // after the 1st failure
		{3, 1 * time.Minute},
		{4, 2 * time.Minute},
		{5, 5 * time.Minute},
		{6, 10 * time.Minute},
		{7, 20 * time.Minute},
		{8, 20 * time.Minute},
		{9, 60 * time.Minute},
		{10, 60 * time.Minute}, // after the 9th failure
	})
}

// TestExponentialEveryStep pins every due time of EXPONENTIAL: retry k (attempt k+1) is due
// ((2^k)−1)·84.8 s after the first attempt started, k = 1..11, the last ≈48.2 h after it.
func TestExponentialEveryStep(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		retry int
		after time.Duration // after firstStart
	}{
		{1, 84800 * ms},      // (2^1−1)·84.8 s ≈ 1.4 min
		{2, 254400 * ms},     // 3·84.8 s ≈ 4.2 min
		{3, 593600 * ms},     // 7·84.8 s ≈ 9.9 min
		{4, 1272000 * ms},    // 15·84.8 s = 21.2 min
		{5, 2628800 * ms},    // 31·84.8 s ≈ 43.8 min
		{6, 5342400 * ms},    // 63·84.8 s ≈ 1.5 h
		{7, 10769600 * ms},   // 127·84.8 s ≈ 3.0 h
		{8, 21624000 * ms},   // 255·84.8 s ≈ 6.0 h
		{9, 43332800 * ms},   // 511·84.8 s ≈ 12.0 h
		{10, 86750400 * ms},  // 1023·84.8 s ≈ 24.1 h
		{11, 173585600 * ms}, // 2047·84.8 s ≈ 48.2 h
	}
	require.Len(t, tests, Exponential.MaxAttempts()-1, "one retry per attempt after the first")
	for _, tt := range tests {
		// The previous attempt ended right after the first started: the formula decides.
		prevEnd := firstStart.Add(time.Second)
		got := Exponential.NextDue(tt.retry+1, firstStart, prevEnd, time.Minute)
		require.Equal(t, firstStart.Add(tt.after), got, "retry %d (attempt %d)", tt.retry, tt.retry+1)
		require.Equal(t, time.Duration((1<<tt.retry)-1)*84800*ms, tt.after, "the table itself, retry %d", tt.retry)
	}
	require.Equal(t, 48*time.Hour+13*time.Minute+5600*ms,
		Exponential.NextDue(12, firstStart, firstStart, time.Minute).Sub(firstStart), "the last retry, ≈48.2 h")
	// Beyond the maximum the last wait repeats, and never overflows.
	for _, next := range []int{13, 40, 100} {
		require.Equal(t, firstStart.Add(173585600*ms), Exponential.NextDue(next, firstStart, firstStart, time.Minute), "attempt %d", next)
	}
}

func TestExponentialNeverBeforeLastEnd(t *testing.T) {
	t.Parallel()
	// Attempt 2 would be due 84.8 s after firstStart, but attempt 1 ran until 7m03s: it may start no earlier.
	require.Equal(t, lastEnd, Exponential.NextDue(2, firstStart, lastEnd, time.Minute))
	// Attempt 4 is due 593.6 s after firstStart, later than lastEnd: the formula wins.
	require.Equal(t, firstStart.Add(593600*time.Millisecond), Exponential.NextDue(4, firstStart, lastEnd, time.Minute))
}

func TestCompressedUnit(t *testing.T) {
	t.Parallel()
	unit := 10 * time.Millisecond
	for next := 2; next <= 10; next++ {
		got := Quadratic.NextDue(next, firstStart, lastEnd, unit)
		require.Equal(t, lastEnd.Add(time.Duration(next*next)*unit), got, "quadratic %d", next)
	}
	stepped := []time.Duration{10, 10, 20, 50, 100, 200, 200, 600, 600}
	for i, want := range stepped {
		got := Stepped.NextDue(i+2, firstStart, lastEnd, unit)
		require.Equal(t, lastEnd.Add(want*time.Millisecond), got, "stepped %d", i+2)
	}
	for next := 2; next <= 12; next++ {
		k := int64(next - 1)
		// ((2^k)−1)·84.8 s·unit/1 min, computed in milliseconds·unit to stay exact.
		want := time.Duration(((int64(1) << k) - 1) * 84800 * int64(unit) / 60000)
		got := Exponential.NextDue(next, firstStart, firstStart, unit)
		require.Equal(t, firstStart.Add(want), got, "exponential %d", next)
	}
	// Spot checks by hand: 84.8 s·(10 ms/60 s) = 14.1333… ms, 1023 times that = 14.4584 s.
	require.Equal(t, 14133333*time.Nanosecond, Exponential.NextDue(2, firstStart, firstStart, unit).Sub(firstStart))
	require.Equal(t, 14458400*time.Microsecond, Exponential.NextDue(11, firstStart, firstStart, unit).Sub(firstStart))
	// The whole QUADRATIC schedule takes 384 units: 3.84 s at 10 ms.
	var total time.Duration
	for next := 2; next <= 10; next++ {
		total += Quadratic.NextDue(next, firstStart, lastEnd, unit).Sub(lastEnd)
	}
	require.Equal(t, 3840*time.Millisecond, total)
}

func TestNextDueEdges(t *testing.T) {
	t.Parallel()
	for _, s := range []Schedule{Quadratic, Stepped, Exponential, "BOGUS"} {
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			// No previous attempt to wait for.
			require.Equal(t, lastEnd, s.NextDue(1, firstStart, lastEnd, time.Minute))
			require.Equal(t, lastEnd, s.NextDue(0, firstStart, lastEnd, time.Minute))
			// A zero or negative unit means the default minute.
			require.Equal(t, s.NextDue(3, firstStart, lastEnd, time.Minute), s.NextDue(3, firstStart, lastEnd, 0))
			require.Equal(t, s.NextDue(3, firstStart, lastEnd, time.Minute), s.NextDue(3, firstStart, lastEnd, -time.Second))
			// Never earlier than the end of the previous attempt, whatever the number.
			for next := 2; next <= 50; next++ {
				require.False(t, s.NextDue(next, firstStart, lastEnd, time.Minute).Before(lastEnd), "attempt %d", next)
			}
		})
	}
	// Beyond the maximum the last wait repeats.
	require.Equal(t, lastEnd.Add(100*time.Minute), Quadratic.NextDue(11, firstStart, lastEnd, time.Minute))
	require.Equal(t, lastEnd.Add(100*time.Minute), Quadratic.NextDue(1000, firstStart, lastEnd, time.Minute))
	require.Equal(t, lastEnd.Add(60*time.Minute), Stepped.NextDue(11, firstStart, lastEnd, time.Minute))
	// An unknown schedule behaves like the default one.
	require.Equal(t, Quadratic.NextDue(5, firstStart, lastEnd, time.Minute), Schedule("BOGUS").NextDue(5, firstStart, lastEnd, time.Minute))
}

// DueOffsets is each schedule as a person reads it: attempts due after the first, were each to fail at once.
func TestDueOffsets(t *testing.T) {
	t.Parallel()
	mins := func(ms ...float64) []time.Duration {
		out := make([]time.Duration, len(ms))
		for i, m := range ms {
			out[i] = time.Duration(m * float64(time.Minute))
		}
		return out
	}
	require.Equal(t, mins(0, 4, 13, 29, 54, 90, 139, 203, 284, 384), Quadratic.DueOffsets(10, time.Minute))
	require.Equal(t, mins(0, 1, 2, 4, 9, 19, 39, 59, 119, 179), Stepped.DueOffsets(10, time.Minute))
	exp := Exponential.DueOffsets(11, time.Minute)
	require.Len(t, exp, 11)
	require.Equal(t, 84800*time.Millisecond, exp[1])
	require.Equal(t, time.Duration(1023*84.8*float64(time.Second)), exp[10])
	require.Equal(t, mins(0, 4, 13), Quadratic.DueOffsets(3, time.Minute), "as many as asked")
	require.Equal(t, []time.Duration{0}, Stepped.DueOffsets(0, time.Minute), "at least the first")
	require.Len(t, Quadratic.DueOffsets(99, time.Minute), 10, "at most the schedule's maximum")
	require.Equal(t, 4*time.Second, Quadratic.DueOffsets(2, time.Second)[1], "in the unit given")
}

// TestNextAttemptHeedsRetryAfter: a Retry-After moves the next attempt to no earlier than the schedule and no
// later than twice the scheduled wait after the attempt; the attempt still counts.
func TestNextAttemptHeedsRetryAfter(t *testing.T) {
	t.Parallel()
	first := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	end := first.Add(time.Second)
	failed := func(retryAfter time.Time) Outcome {
		return Outcome{StartedAt: first, FinishedAt: end, HTTPStatus: 429, ErrorKind: ErrHTTPStatus, RetryAfter: retryAfter}
	}
	// QUADRATIC, attempt 2 of 10: the schedule waits 4 minutes after the end of attempt 1.
	scheduled := end.Add(4 * time.Minute)
	for _, tt := range []struct {
		name       string
		retryAfter time.Time
		want       time.Time
	}{
		{"none", time.Time{}, scheduled},
		{"earlier than the schedule", end.Add(30 * time.Second), scheduled},
		{"in the past", end.Add(-time.Hour), scheduled},
		{"exactly the schedule", scheduled, scheduled},
		{"between", end.Add(6 * time.Minute), end.Add(6 * time.Minute)},
		{"exactly twice", end.Add(8 * time.Minute), end.Add(8 * time.Minute)},
		{"beyond twice", end.Add(8*time.Minute + time.Second), end.Add(8 * time.Minute)},
		{"days away", end.Add(72 * time.Hour), end.Add(8 * time.Minute)},
	} {
		succeeded, due := NextAttempt(1, 10, Quadratic, first, failed(tt.retryAfter), time.Minute)
		require.False(t, succeeded, tt.name)
		require.NotNil(t, due, tt.name)
		require.True(t, tt.want.Equal(*due), "%s: due %v, want %v", tt.name, *due, tt.want)
	}

	// EXPONENTIAL counts from the first attempt: retry 3 is due 593.6 s after it, a wait of 592.6 s after an
	// attempt that ended 1 s in, so the cap is 2·592.6 s after that end.
	expDue := first.Add(593600 * time.Millisecond)
	capAt := end.Add(2 * 592600 * time.Millisecond)
	_, due := NextAttempt(3, 12, Exponential, first, failed(end.Add(time.Hour)), time.Minute)
	require.True(t, capAt.Equal(*due), "due %v, want %v", *due, capAt)
	_, due = NextAttempt(3, 12, Exponential, first, failed(expDue.Add(time.Minute)), time.Minute)
	require.True(t, expDue.Add(time.Minute).Equal(*due), "due %v", *due)

	// The attempt still counts: the last one fails the delivery whatever the recipient asked.
	succeeded, due := NextAttempt(10, 10, Quadratic, first, failed(end.Add(time.Minute)), time.Minute)
	require.False(t, succeeded)
	require.Nil(t, due)
}
