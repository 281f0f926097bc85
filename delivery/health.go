package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/adal-relay/adal/alert"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/storage"
)

// HealthRules are the rules that disable and freeze a recipient that keeps failing. The defaults are the
// product's; tests make them small.
type HealthRules struct {
	// DisableRatio and DisableMinAttempts: DISABLED when more than DisableRatio of the attempts in the window
	// failed and the window holds more than DisableMinAttempts attempts.
	DisableRatio       float64
	DisableMinAttempts int64
	// DisableConsecutive: DISABLED after this many consecutive failures.
	DisableConsecutive int64
	// FreezeConsecutive and FreezeSilence: FROZEN after more than FreezeConsecutive consecutive failures when
	// the last success is older than FreezeSilence.
	FreezeConsecutive int64
	FreezeSilence     time.Duration
	// FreezeHard: FROZEN after this many consecutive failures, whatever the last success.
	FreezeHard int64
	// ProbeUnits: a DISABLED recipient gets one probe attempt every ProbeUnits schedule units.
	ProbeUnits int
	// Window is the attempts window: when it holds 2×Window attempts both counters are halved, so the ratio
	// follows recent behaviour at O(1) cost per attempt.
	Window int64
}

// DefaultHealthRules are the product's rules: disabled past 70% failures over more than 100 attempts or
// after 2,000 consecutive failures; frozen past 2,000 with no success for 72 h, or after 50,000.
var DefaultHealthRules = HealthRules{
	DisableRatio:       0.7,
	DisableMinAttempts: 100,
	DisableConsecutive: 2000,
	FreezeConsecutive:  2000,
	FreezeSilence:      72 * time.Hour,
	FreezeHard:         50000,
	ProbeUnits:         10,
	Window:             200,
}

// ProbeEvery is how long a DISABLED recipient waits between probe attempts.
func (s *Service) ProbeEvery() time.Duration {
	return time.Duration(s.cfg.Health.ProbeUnits) * s.cfg.Unit
}

// countsForHealth says whether an outcome says something about the recipient. An attempt interrupted by our
// own process dying does not, and CLI recipients' failures are the developer's local service.
func countsForHealth(o Outcome) bool { return o.ErrorKind != ErrInterrupted && !o.Cancelled }

// updateHealth applies one attempt outcome to the recipient's health in the attempt's transaction: it reads
// the health under the row's lock, lets applyHealth decide, and writes the result back — two statements, the
// rule decided in Go as RecordBatch decides it for a batch — and, when the recipient changed state, the alert
// event of the change.
func (s *Service) updateHealth(ctx context.Context, tx *ent.Client, recipientID int, o Outcome) error {
	if !countsForHealth(o) {
		return nil
	}
	q := tx.Recipient.Query().Where(recipient.ID(recipientID), recipient.MethodNEQ(recipient.MethodCLI))
	// The lock recordBatchSQL takes: it does not block intake, which reads recipients unlocked.
	q.Modify(s.locks.NoKeyUpdate)
	r, err := q.Only(ctx)
	if ent.IsNotFound(err) {
		return nil // a CLI recipient: the health rules are for direct delivery
	}
	if err != nil {
		return fmt.Errorf("recipient %d health: %w", recipientID, err)
	}
	was := r.State
	s.applyHealth(r, o)
	u := tx.Recipient.Update().Where(recipient.ID(r.ID))
	setHealth(u.Mutation(), r)
	if err := u.Exec(ctx); err != nil {
		return fmt.Errorf("recipient %d health: %w", recipientID, err)
	}
	if e, ok := healthEvent(r, was, r.TenantID); ok {
		return s.recordAlerts(ctx, tx, e)
	}
	return nil
}

// healthEvent is the alert event of r's move from state was to its state now, if the move is one alerts are
// about: to DISABLED or FROZEN, or back to ACTIVE from either.
func healthEvent(r *ent.Recipient, was recipient.State, tenantID int) (alert.Event, bool) {
	var t alert.Type
	switch {
	case r.State == was:
		return alert.Event{}, false
	case r.State == recipient.StateDISABLED:
		t = alert.RecipientDisabled
	case r.State == recipient.StateFROZEN:
		t = alert.RecipientFrozen
	case r.State == recipient.StateACTIVE && (was == recipient.StateDISABLED || was == recipient.StateFROZEN):
		t = alert.RecipientRecovered
	default:
		return alert.Event{}, false
	}
	return alert.Event{TenantID: tenantID, Type: t, RecipientID: r.ID, At: *r.StateChangedAt,
		Data: alert.RecipientState{State: string(r.State), Reason: r.StateReason}}, true
}

// failedEvent is the delivery.failed event of the delivery c claimed, whose attempt o was its last.
func failedEvent(c Claim, o Outcome) alert.Event {
	return alert.Event{TenantID: c.TenantID, Type: alert.DeliveryFailed, RecipientID: c.RecipientID, At: o.FinishedAt,
		Data: alert.Failure{DeliveryID: c.DeliveryID, RequestID: c.RequestID, ErrorKind: string(o.ErrorKind),
			HTTPStatus: o.HTTPStatus, Error: o.ErrorMessage}}
}

// recordAlerts records events in the caller's transaction and wakes the alert dispatcher once it commits.
func (s *Service) recordAlerts(ctx context.Context, tx *ent.Client, events ...alert.Event) error {
	if err := alert.Record(ctx, tx, events...); err != nil {
		return err
	}
	s.alerted(ctx)
	return nil
}

// alerted wakes the alert dispatcher once ctx's transaction commits.
func (s *Service) alerted(ctx context.Context) {
	if s.cfg.Alerted != nil {
		storage.AfterCommit(ctx, s.cfg.Alerted)
	}
}

// applyHealth is the health rule: it applies one outcome to r in memory — count the attempt, judge the
// counters as they now stand, halve a full window, then move to the judged state. Record and RecordBatch
// both decide with it, from the health they read under the recipient's lock.
func (s *Service) applyHealth(r *ent.Recipient, o Outcome) {
	if !countsForHealth(o) {
		return
	}
	rules := s.cfg.Health
	r.WindowAttempts++
	if o.Succeeded() {
		r.ConsecutiveFailures = 0
		at := o.FinishedAt
		r.LastSuccessAt = &at
	} else {
		r.ConsecutiveFailures++
		r.WindowFailures++
	}
	now := o.FinishedAt
	state, reason := s.judge(r, now)
	if r.WindowAttempts >= 2*rules.Window {
		r.WindowAttempts, r.WindowFailures = r.WindowAttempts/2, r.WindowFailures/2
	}
	if state != r.State {
		moveTo(r, state, reason, now, s.ProbeEvery())
	}
}

// moveTo puts r in state, for reason, at now: what every change of a recipient's state does, whether the rules
// or an owner make it. A DISABLED recipient is probed every probeEvery; a recipient brought back to ACTIVE from
// DISABLED or FROZEN starts with a clean record, its failures forgotten.
func moveTo(r *ent.Recipient, state recipient.State, reason string, now time.Time, probeEvery time.Duration) {
	recovered := state == recipient.StateACTIVE &&
		(r.State == recipient.StateDISABLED || r.State == recipient.StateFROZEN)
	r.State, r.StateReason, r.StateChangedAt = state, reason, &now
	r.NextProbeAt = nil
	if state == recipient.StateDISABLED {
		probe := now.Add(probeEvery)
		r.NextProbeAt = &probe
	}
	if recovered {
		r.ConsecutiveFailures, r.WindowAttempts, r.WindowFailures = 0, 0, 0
	}
}

// MoveRecipient applies an owner's change of r's state (pause, resume, enable; an owner never disables) as
// the health rules apply their own, and sets on m the health columns to write.
func MoveRecipient(m *ent.RecipientMutation, r *ent.Recipient, state recipient.State, reason string, now time.Time) {
	moveTo(r, state, reason, now, 0)
	setHealth(m, r)
}

// setHealth sets on m every health column of r.
func setHealth(m *ent.RecipientMutation, r *ent.Recipient) {
	m.SetState(r.State)
	m.SetStateReason(r.StateReason)
	m.SetConsecutiveFailures(r.ConsecutiveFailures)
	m.SetWindowAttempts(r.WindowAttempts)
	m.SetWindowFailures(r.WindowFailures)
	for _, c := range []struct {
		at         *time.Time
		set        func(time.Time)
		clearValue func()
	}{
		{r.StateChangedAt, m.SetStateChangedAt, m.ClearStateChangedAt},
		{r.LastSuccessAt, m.SetLastSuccessAt, m.ClearLastSuccessAt},
		{r.NextProbeAt, m.SetNextProbeAt, m.ClearNextProbeAt},
	} {
		if c.at != nil {
			c.set(*c.at)
		} else {
			c.clearValue()
		}
	}
}

// judge returns the state the rules put r in after its counters changed, and why.
func (s *Service) judge(r *ent.Recipient, now time.Time) (recipient.State, string) {
	rules := s.cfg.Health
	switch r.State {
	case recipient.StatePAUSED, recipient.StateFROZEN:
		return r.State, r.StateReason // only an owner moves these
	}
	lastSuccess := r.CreatedAt
	if r.LastSuccessAt != nil {
		lastSuccess = *r.LastSuccessAt
	}
	switch {
	case r.ConsecutiveFailures >= rules.FreezeHard:
		return recipient.StateFROZEN, fmt.Sprintf("%d consecutive failures", r.ConsecutiveFailures)
	case r.ConsecutiveFailures > rules.FreezeConsecutive && now.Sub(lastSuccess) > rules.FreezeSilence:
		return recipient.StateFROZEN, fmt.Sprintf("%d consecutive failures and no success since %s",
			r.ConsecutiveFailures, lastSuccess.UTC().Format(time.RFC3339))
	case r.State == recipient.StateDISABLED && r.ConsecutiveFailures == 0:
		return recipient.StateACTIVE, "probe succeeded"
	case r.State == recipient.StateDISABLED:
		return r.State, r.StateReason
	case r.ConsecutiveFailures >= rules.DisableConsecutive:
		return recipient.StateDISABLED, fmt.Sprintf("%d consecutive failures", r.ConsecutiveFailures)
	case r.WindowAttempts > rules.DisableMinAttempts &&
		float64(r.WindowFailures) > rules.DisableRatio*float64(r.WindowAttempts):
		return recipient.StateDISABLED, fmt.Sprintf("%d of the last %d attempts failed", r.WindowFailures, r.WindowAttempts)
	}
	return r.State, r.StateReason
}
