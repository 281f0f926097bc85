package retention

import "time"

// A request's expiry is fixed when it is accepted, from its tenant's plan and its server's setting; retries
// never extend it, and from the moment it passes the request is gone for every purpose (no retry, no replay,
// no further attempt) even before the purge deletes it. These are the rule's Go form, the spec, and beside
// each its SQL rendering for the statements that apply it set-wise; the conformance tests hold them together.

// Days is how long a request is kept: its plan's retention, or its server's when set and shorter.
func Days(planDays int, serverDays *int) int {
	if serverDays != nil && *serverDays < planDays {
		return *serverDays
	}
	return planDays
}

// ExpiresAt is when a request received at receivedAt and kept for days expires.
func ExpiresAt(receivedAt time.Time, days int) time.Time {
	return receivedAt.Add(time.Duration(days) * 24 * time.Hour)
}

// Expired reports whether a request that expires at expiresAt is expired at now.
func Expired(expiresAt, now time.Time) bool { return !expiresAt.After(now) }

// DaysSQL is Days of the SQL expressions planDays and serverDays (NULL when the server sets none), on
// PostgreSQL, whose least() passes over a NULL.
func DaysSQL(planDays, serverDays string) string {
	return "least(" + planDays + ", " + serverDays + ")"
}

// ExpiresAtSQL is ExpiresAt of the SQL expressions receivedAt (a timestamptz) and days, on PostgreSQL.
func ExpiresAtSQL(receivedAt, days string) string {
	return receivedAt + " + " + days + " * interval '24 hours'"
}

// ExpiredSQL is Expired of the SQL expressions expiresAt and now, a condition both databases evaluate.
func ExpiredSQL(expiresAt, now string) string { return expiresAt + " <= " + now }

// LiveSQL is the negation of ExpiredSQL: the request may still be attempted. The claims join on it.
func LiveSQL(expiresAt, now string) string { return expiresAt + " > " + now }
