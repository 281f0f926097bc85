package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
)

// HealthRules are the S3 rules that disable and freeze a recipient that keeps failing. The defaults are the
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

// DefaultHealthRules are the rules of the product brief (S3).
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
func countsForHealth(o Outcome) bool { return o.ErrorKind != ErrInterrupted }

// updateHealth applies one attempt outcome to the recipient's counters and state, in the attempt's
// transaction: the counters change by atomic increments under the row lock, so they are exact however many
// attempts finish at once.
func (s *Service) updateHealth(ctx context.Context, tx *ent.Client, recipientID int, o Outcome) error {
	if !countsForHealth(o) {
		return nil
	}
	rules := s.cfg.Health
	u := tx.Recipient.UpdateOneID(recipientID).Where(recipient.MethodEQ(recipient.MethodDIRECT_HTTP)).AddWindowAttempts(1)
	if o.Succeeded() {
		u.SetConsecutiveFailures(0).SetLastSuccessAt(o.FinishedAt)
	} else {
		u.AddConsecutiveFailures(1).AddWindowFailures(1)
	}
	r, err := u.Save(ctx)
	if ent.IsNotFound(err) {
		return nil // a CLI recipient: the health rules are for direct delivery
	}
	if err != nil {
		return fmt.Errorf("recipient %d health: %w", recipientID, err)
	}
	next := tx.Recipient.UpdateOneID(r.ID)
	changed := false
	if r.WindowAttempts >= 2*rules.Window {
		next.SetWindowAttempts(r.WindowAttempts / 2).SetWindowFailures(r.WindowFailures / 2)
		changed = true
	}
	now := o.FinishedAt
	state, reason := s.judge(r, now)
	if state != r.State {
		next.SetState(state).SetStateReason(reason).SetStateChangedAt(now)
		if state == recipient.StateDISABLED {
			next.SetNextProbeAt(now.Add(s.ProbeEvery()))
		} else {
			next.ClearNextProbeAt()
		}
		if state == recipient.StateACTIVE {
			next.SetWindowAttempts(0).SetWindowFailures(0)
		}
		changed = true
	}
	if !changed {
		return nil
	}
	if err := next.Exec(ctx); err != nil {
		return fmt.Errorf("recipient %d state: %w", recipientID, err)
	}
	return nil
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
