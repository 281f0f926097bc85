package scheduler

import (
	"time"

	"github.com/adal-relay/adal/delivery"
)

// The engine's defaults, for every lane: a zero field of Config or RescuerConfig takes these.
const (
	// DefaultWorkers is how many attempts a process has in flight at most. An attempt mostly waits on the
	// network, so the bound is on concurrency, not work; too few and dispatch falls behind intake under
	// load. Each attempt in flight holds its request's body: at most Workers × the body limit.
	DefaultWorkers = 256
	// DefaultTenantShare is the share of Workers one tenant may hold while it is the only one with work here:
	// the rest stays free for another tenant's new delivery, however slow the first one's recipients are.
	DefaultTenantShare = 0.5
	// DefaultPollInterval is the longest a lane's claim loop waits without being woken.
	DefaultPollInterval = time.Second
	// DefaultMinPollGap spaces the CLI lane's claims when wake-ups come in a burst.
	DefaultMinPollGap = 10 * time.Millisecond
	// DefaultLease is how long a direct or outbound claim is this process's before the rescuer may take it.
	DefaultLease = 60 * time.Second
	// DefaultCLILease is how long a CLI has to report a job: the local timeout plus room for the report, or
	// for a reconnect that reports from the CLI's journal.
	DefaultCLILease = delivery.DefaultTimeout + 30*time.Second
	// DefaultCLIMaxInFlight bounds the jobs one recipient's CLIs hold at a time in a process, so that a large
	// backlog is not leased all at once (leases would lapse while jobs queue).
	DefaultCLIMaxInFlight = 8
	// DefaultRescueInterval is the time between rescuer sweeps, so an expired lease is settled well within a
	// minute of lapsing.
	DefaultRescueInterval = 10 * time.Second
	// DefaultRescueBatch bounds the lapsed claims one rescuer statement reads.
	DefaultRescueBatch = 500
)
