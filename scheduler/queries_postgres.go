package scheduler

// postgresQueries are the engine's statements on PostgreSQL.
var postgresQueries = queries{
	claim:               claimPostgres,
	claimProbe:          claimProbePostgres,
	claimJoined:         true,
	claimOutbound:       claimOutboundPostgres,
	claimCLI:            claimCLIPostgresTmpl,
	claimCLISet:         claimCLISetPostgres,
	cliValue:            "($%d::bigint, $%d::timestamptz)",
	param:               "$",
	nextDue:             nextDueSQL.Postgres,
	nextDueWithOutbound: nextDueWithOutboundSQL.Postgres,
	dueCount:            dueCountSQL.Postgres,
	probeTurn:           probeTurnSQL.Postgres,
	releaseCLI:          releaseCLISQL.Postgres,
	laneMoves:           laneStatements("$1", "$2", " FOR UPDATE OF d SKIP LOCKED"),
}
