// Package delivery holds what happens to one delivery of an accepted request to one recipient: when its
// attempts are due (retry schedules) and how a direct HTTP attempt is made and judged (the sender).
package delivery

import "time"

// Schedule names a recipient's retry schedule. The values are the GraphQL enum values, so they can be stored
// and exposed as they are.
type Schedule string

// The three retry schedules. QUADRATIC is the default: it reaches a recipient that is down for a few hours
// without giving up, and stops within the day.
const (
	// Quadratic waits n² units before attempt n: 4, 9, …, 100 (6 h 24 min over 10 attempts).
	Quadratic Schedule = "QUADRATIC"
	// Stepped waits 1, 1, 2, 5, 10, 20, 20, 60, 60 units after the 1st..9th consecutive failure.
	Stepped Schedule = "STEPPED"
	// Exponential follows Workfront's formula, which numbers the retries: retry k (attempt k+1) is due
	// ((2^k)−1)·84.8 s after the first attempt, k = 1..11.
	Exponential Schedule = "EXPONENTIAL"

	// DefaultSchedule is used when a recipient does not choose one.
	DefaultSchedule = Quadratic
)

// DefaultUnit is one schedule "minute" unless ADAL_RETRY_UNIT says otherwise; tests compress it to run a
// whole schedule in milliseconds.
const DefaultUnit = time.Minute

// MinAttempts is the smallest allowed maxAttempts: the first attempt alone, no retries.
const MinAttempts = 1

// steppedWaits are the STEPPED pauses, in units, after the 1st..9th consecutive failure.
var steppedWaits = [...]int64{1, 1, 2, 5, 10, 20, 20, 60, 60}

// Valid reports whether s is one of the known schedules, so input validation does not need its own list.
func (s Schedule) Valid() bool {
	switch s {
	case Quadratic, Stepped, Exponential:
		return true
	}
	return false
}

// MaxAttempts returns the largest allowed maxAttempts (first attempt included) for the schedule: 10, or 12
// for EXPONENTIAL, whose source (Workfront) retries 11 times after the first attempt, for 48 hours. An
// unknown schedule gets 10 so that a caller that forgot to validate still gets a bounded number.
func (s Schedule) MaxAttempts() int {
	if s == Exponential {
		return 12
	}
	return 10
}

// NextDue returns the earliest time attempt number next (2, 3, …) may start. A due time is a lower bound:
// the scheduler may start later, never earlier.
//
// firstStart is when attempt 1 started and lastEnd when attempt next-1 ended. QUADRATIC and STEPPED count
// their wait from lastEnd; EXPONENTIAL counts from firstStart but is never earlier than lastEnd, because an
// attempt cannot start before the previous one ended.
//
// unit is one schedule "minute" (ADAL_RETRY_UNIT); a unit <= 0 means DefaultUnit. Beyond the schedule's
// MaxAttempts the last wait repeats, so an out-of-range number can never overflow or shrink the wait.
// An unknown schedule is treated as DefaultSchedule. For next <= 1 there is no wait: lastEnd is returned.
//
// EXPONENTIAL, for the record, with unit = 1 min (retry k = attempt k+1, k = attempts already made):
//
//	retry  1, attempt  2:    1·84.8 s =     84.8 s (≈1.4 min)
//	retry  2, attempt  3:    3·84.8 s =    254.4 s (≈4.2 min)
//	retry  3, attempt  4:    7·84.8 s =    593.6 s (≈9.9 min)
//	retry 10, attempt 11: 1023·84.8 s =  86750.4 s (≈24.1 h)
//	retry 11, attempt 12: 2047·84.8 s = 173585.6 s (≈48.2 h) after the first attempt
//
// Each due time counts from the first attempt, as the formula is written; the eleventh retry is what makes
// the 48 hours its source promises.
func (s Schedule) NextDue(next int, firstStart, lastEnd time.Time, unit time.Duration) time.Time {
	if next <= 1 {
		return lastEnd
	}
	if unit <= 0 {
		unit = DefaultUnit
	}
	if next > s.MaxAttempts() {
		next = s.MaxAttempts()
	}
	switch s {
	case Exponential:
		k := int64(next - 1) // attempts already made
		due := firstStart.Add(exponentialDelay(k, unit))
		if due.Before(lastEnd) {
			return lastEnd
		}
		return due
	case Stepped:
		return lastEnd.Add(time.Duration(steppedWaits[next-2]) * unit)
	default: // Quadratic and anything unknown
		n := int64(next)
		return lastEnd.Add(time.Duration(n*n) * unit)
	}
}

// DueOffsets returns when each of the first attempts attempts is due, as offsets from the start of the first,
// were every attempt to fail the instant it started: the schedule as a person reads it. The first offset is
// 0; attempts is bounded to 1..MaxAttempts.
func (s Schedule) DueOffsets(attempts int, unit time.Duration) []time.Duration {
	attempts = min(max(attempts, MinAttempts), s.MaxAttempts())
	var first time.Time
	out := make([]time.Duration, 1, attempts)
	last := first
	for next := 2; next <= attempts; next++ {
		last = s.NextDue(next, first, last, unit)
		out = append(out, last.Sub(first))
	}
	return out
}

// exponentialDelay is ((2^k)−1)·84.8 s scaled by unit/1 min, i.e. ((2^k)−1)·unit·106/75, rounded down to
// the nanosecond. The division is split into quotient and remainder so that the product stays far from
// int64 overflow for any sensible unit while the result stays exact.
func exponentialDelay(k int64, unit time.Duration) time.Duration {
	factor := ((int64(1) << k) - 1) * 106
	q, r := int64(unit)/75, int64(unit)%75
	return time.Duration(factor*q + factor*r/75)
}
