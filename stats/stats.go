// Package stats reads the aggregates behind the console's charts: per recipient and UTC hour its attempts,
// successes and a histogram of their durations; per server and hour the requests it stored; per tenant and UTC
// day the credits its ledger debited.
//
// The aggregates are kept by database triggers (migrations/*/…_charts_aggregates.sql) in the statement that
// records the work, so they are exact, commit or roll back with it, and cost the hot paths no code and no
// statement of their own; nothing here ever scans attempts, requests or the ledger. Reads fill every hour or
// day of the range asked for, zeros where nothing happened, so charts have no gaps. Tenancy is the data
// layer's: a viewer of another tenant reads zeros. Rows older than Retention are deleted by Purge, which the
// retention purge runs.
package stats

import (
	"context"
	"time"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipienthourstat"
	"github.com/adal-relay/adal/ent/serverhourstat"
	"github.com/adal-relay/adal/ent/tenantdaystat"
	"github.com/adal-relay/adal/fault"
)

// Bounds are the upper bounds, in milliseconds, of the attempt duration buckets: bucket i counts durations
// above Bounds[i-1] (or from zero) up to Bounds[i], and one more bucket counts those above the last. The
// triggers spell the same bounds out in SQL.
var Bounds = [...]int64{10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}

// Buckets is the number of duration buckets: one per bound and one beyond the last.
const Buckets = len(Bounds) + 1

// Bucket returns the bucket a duration of ms milliseconds is counted in.
func Bucket(ms int64) int {
	for i, b := range Bounds {
		if ms <= b {
			return i
		}
	}
	return len(Bounds)
}

// Retention is how long aggregates are kept; the charts read at most MaxHours or MaxDays back from it.
const Retention = 8 * 24 * time.Hour

// Bounds of the ranges the charts ask for.
const (
	// MaxHours is the longest range of hourly figures: 7 days.
	MaxHours = 7 * 24
	// MaxDays is the longest range of daily figures.
	MaxDays = 7
)

// RecipientHour is one UTC hour of a recipient's attempts, counted by the hour they finished in.
type RecipientHour struct {
	Hour      time.Time
	Attempts  int64
	Successes int64
	// Durations counts the attempts by duration bucket (Bounds).
	Durations [Buckets]int64
}

// Failures is the number of attempts that did not succeed.
func (h RecipientHour) Failures() int64 { return h.Attempts - h.Successes }

// SuccessRate is the share of the attempts that succeeded, from 0 to 1; nil in an hour without attempts.
func (h RecipientHour) SuccessRate() *float64 {
	if h.Attempts == 0 {
		return nil
	}
	r := float64(h.Successes) / float64(h.Attempts)
	return &r
}

// P50Ms is the median attempt duration in milliseconds (Quantile); nil in an hour without attempts.
func (h RecipientHour) P50Ms() *float64 { return Quantile(h.Durations, 0.5) }

// P95Ms is the 95th percentile of the attempt durations in milliseconds (Quantile); nil in an hour without
// attempts.
func (h RecipientHour) P95Ms() *float64 { return Quantile(h.Durations, 0.95) }

// Quantile estimates the q-quantile (0 < q ≤ 1) of the durations counted in buckets: it finds the bucket the
// quantile's rank falls in and interpolates linearly between its bounds, as if its durations were spread
// evenly across it. The first bucket starts at zero; the last has no upper bound, so a quantile in it is its
// lower bound. It is nil when nothing is counted.
func Quantile(buckets [Buckets]int64, q float64) *float64 {
	var total int64
	for _, n := range buckets {
		total += n
	}
	if total == 0 {
		return nil
	}
	rank := q * float64(total)
	var below int64
	for i, n := range buckets {
		if n == 0 || float64(below+n) < rank {
			below += n
			continue
		}
		lo := 0.0
		if i > 0 {
			lo = float64(Bounds[i-1])
		}
		if i == len(Bounds) {
			return &lo
		}
		v := lo + (float64(Bounds[i])-lo)*(rank-float64(below))/float64(n)
		return &v
	}
	last := float64(Bounds[len(Bounds)-1])
	return &last // unreachable: the rank never exceeds the total
}

// ServerHour is one UTC hour of a server's stored requests, by the time they were received.
type ServerHour struct {
	Hour time.Time
	// Requests counts every request stored: accepted by intake, replays and alerts.
	Requests int64
	// Replays counts the replays among them.
	Replays int64
}

// CreditDay is one UTC day of a tenant's debits.
type CreditDay struct {
	Day time.Time
	// Credits is what the day's debits took, whatever they paid for.
	Credits int64
	// Requests, Retries, Replays and Outbound are the credits of Credits that paid for accepted requests,
	// manual retries, replays and outbound jobs.
	Requests, Retries, Replays, Outbound int64
}

// RecipientHours returns the recipient's last hours hours (1 to MaxHours), oldest first, the hour now falls
// in last.
func RecipientHours(ctx context.Context, client *ent.Client, recipientID int, now time.Time, hours int) ([]RecipientHour, error) {
	const op = "stats.RecipientHours"
	first, err := hourRange(op, now, hours)
	if err != nil {
		return nil, err
	}
	rows, err := client.RecipientHourStat.Query().
		Where(recipienthourstat.RecipientID(recipientID), recipienthourstat.HourGTE(first)).
		All(ctx)
	if err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	out := make([]RecipientHour, hours)
	for i := range out {
		out[i].Hour = first.Add(time.Duration(i) * time.Hour)
	}
	for _, r := range rows {
		i, ok := slot(first, r.Hour, time.Hour, hours)
		if !ok {
			continue
		}
		h := &out[i]
		h.Attempts += r.Attempts
		h.Successes += r.Successes
		for k, n := range [Buckets]int64{r.Le10, r.Le25, r.Le50, r.Le100, r.Le250, r.Le500, r.Le1000, r.Le2500,
			r.Le5000, r.Le10000, r.Le30000, r.Gt30000} {
			h.Durations[k] += n
		}
	}
	return out, nil
}

// ServerHours returns the server's last hours hours (1 to MaxHours), oldest first, the hour now falls in last.
func ServerHours(ctx context.Context, client *ent.Client, serverID int, now time.Time, hours int) ([]ServerHour, error) {
	const op = "stats.ServerHours"
	first, err := hourRange(op, now, hours)
	if err != nil {
		return nil, err
	}
	rows, err := client.ServerHourStat.Query().
		Where(serverhourstat.ServerID(serverID), serverhourstat.HourGTE(first)).
		All(ctx)
	if err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	out := make([]ServerHour, hours)
	for i := range out {
		out[i].Hour = first.Add(time.Duration(i) * time.Hour)
	}
	for _, r := range rows {
		if i, ok := slot(first, r.Hour, time.Hour, hours); ok {
			out[i].Requests += r.Requests
			out[i].Replays += r.Replays
		}
	}
	return out, nil
}

// CreditDays returns the tenant's last days days (1 to MaxDays), oldest first, the day now falls in last.
func CreditDays(ctx context.Context, client *ent.Client, tenantID int, now time.Time, days int) ([]CreditDay, error) {
	const op = "stats.CreditDays"
	if days < 1 || days > MaxDays {
		return nil, fault.E(op, fault.InvalidInput, "days must be between 1 and %d", MaxDays)
	}
	const day = 24 * time.Hour
	first := now.UTC().Truncate(day).Add(-time.Duration(days-1) * day)
	rows, err := client.TenantDayStat.Query().
		Where(tenantdaystat.TenantID(tenantID), tenantdaystat.DayGTE(first)).
		All(ctx)
	if err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	out := make([]CreditDay, days)
	for i := range out {
		out[i].Day = first.Add(time.Duration(i) * day)
	}
	for _, r := range rows {
		if i, ok := slot(first, r.Day, day, days); ok {
			d := &out[i]
			d.Credits += r.Credits
			d.Requests += r.Requests
			d.Retries += r.Retries
			d.Replays += r.Replays
			d.Outbound += r.Outbound
		}
	}
	return out, nil
}

// hourRange checks hours and returns the first hour of the range that ends with the hour now falls in.
func hourRange(op string, now time.Time, hours int) (time.Time, error) {
	if hours < 1 || hours > MaxHours {
		return time.Time{}, fault.E(op, fault.InvalidInput, "hours must be between 1 and %d", MaxHours)
	}
	return now.UTC().Truncate(time.Hour).Add(-time.Duration(hours-1) * time.Hour), nil
}

// slot is the index of the period of length step that t starts, counted from first; false outside the n
// periods from first (a row written for a time ahead of now's clock).
func slot(first, t time.Time, step time.Duration, n int) (int, bool) {
	d := t.Sub(first)
	if d < 0 {
		return 0, false
	}
	i := int(d / step)
	return i, i < n
}
