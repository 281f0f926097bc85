package scheduler

// sqliteQueries are the engine's statements on SQLite.
var sqliteQueries = queries{
	claim:               claimSQLite,
	claimProbe:          claimProbeSQLite,
	claimOutbound:       claimOutboundSQLite,
	claimCLI:            claimCLISQLiteTmpl,
	claimCLISet:         claimCLISetSQLite,
	cliValue:            "(?%d, ?%d)",
	param:               "?",
	nextDue:             nextDueSQL.SQLite,
	nextDueWithOutbound: nextDueWithOutboundSQL.SQLite,
	dueCount:            dueCountSQL.SQLite,
	probeTurn:           probeTurnSQL.SQLite,
	releaseCLI:          releaseCLISQL.SQLite,
	laneMoves:           laneStatements("?1", "?2", ""),
}
