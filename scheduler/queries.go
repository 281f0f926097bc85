package scheduler

import "github.com/adal-relay/adal/storage"

// queries are the engine's statements in one dialect, chosen through storage (statements.For) so that the
// engine never asks which database it runs on.
type queries struct {
	// claim: $1 now, $2 limit, $3 lease end, $4 owner, $5 the tenants busy here (a JSON array of [tenant, room,
	// attempts in flight]), $6 the room of any other tenant, $7 the most one tenant or capped recipient may get.
	claim string
	// claimProbe: $1 now, $2 limit, $3 lease end, $4 owner, $5 the probed recipient.
	claimProbe string
	// claimJoined says the claim returns each delivery's request and recipient with it (one round trip), and
	// whether it left due deliveries of the delivery's tenant (scanClaims); otherwise load reads them after
	// the claim, and what it left is not known.
	claimJoined bool
	// claimCounted, when set, raises a capped recipient's in_flight after the claim, in its transaction ($1 the
	// number claimed, $2 the recipient); otherwise the claim raises it itself.
	claimCounted  string
	claimOutbound string // as claim
	// claimCLI is a template: %[1]s the SET list, %[2]s the VALUES of (recipient, since), each written with
	// cliValue from its two parameter numbers.
	claimCLI, claimCLISet, cliValue string
	param                           string // the prefix of a numbered parameter, for statements built per call
	nextDue, nextDueWithOutbound    string // $1 now
	dueCount                        string // $1 now
	probeTurn                       string // $1 next probe, $2 now
	releaseCLI                      string // $1 delivery, $2 attempt, $3 owner
	laneMoves                       []string
}

var statements = storage.PerDialect[*queries]{Postgres: &postgresQueries, SQLite: &sqliteQueries}

// Statements that differ between the dialects only by their parameters.
var (
	nextDueSQL             = storage.Numbered(`SELECT MIN(next_attempt_at) FROM deliveries WHERE status = 'PENDING' AND next_attempt_at > $1`)
	nextDueWithOutboundSQL = storage.Numbered(`SELECT MIN(t) FROM (
		SELECT MIN(next_attempt_at) AS t FROM deliveries WHERE status = 'PENDING' AND next_attempt_at > $1
		UNION ALL
		SELECT MIN(next_attempt_at) AS t FROM outbound_jobs WHERE status = 'PENDING' AND next_attempt_at > $1
	) due`)
	dueCountSQL  = storage.Numbered(`SELECT COUNT(*) FROM deliveries WHERE status = 'PENDING' AND next_attempt_at <= $1`)
	probeTurnSQL = storage.Numbered(`UPDATE recipients SET next_probe_at = $1 WHERE state = 'DISABLED' AND method <> 'CLI'
		AND deleted_at IS NULL AND next_probe_at <= $2
		AND EXISTS (SELECT 1 FROM deliveries d WHERE d.recipient_id = recipients.id AND d.status = 'PENDING' AND d.next_attempt_at <= $2)
		RETURNING id`)
	releaseCLISQL = storage.Numbered(`UPDATE deliveries SET status = 'PENDING', attempt_count = attempt_count - 1,
	first_attempt_at = CASE WHEN attempt_count = 1 THEN NULL ELSE first_attempt_at END,
	attempt_started_at = NULL, lease_expires_at = NULL, lease_owner = ''
WHERE id = $1 AND status = 'IN_PROGRESS' AND attempt_count = $2 AND lease_owner = $3`)
)
