// Package chaos holds Adal's fault tests: real server processes killed with SIGKILL mid-delivery, right after
// a 202 and mid bulk job, PostgreSQL backends terminated under load, and PostgreSQL restarted under load. They are slow and
// brutal, so they only build with the chaos tag:
//
//	ADAL_TEST_DATABASE_URL=postgres://… [ADAL_CHAOS_PG_RESTART='pg_ctlcluster … restart'] go test -tags chaos -count=1 ./chaos/
//
// The restart test runs only when ADAL_CHAOS_PG_RESTART names the command that restarts the cluster (CI sets
// it): it stops a cluster other work may share.
//
// Without ADAL_TEST_DATABASE_URL the process tests run on SQLite and the PostgreSQL test is skipped. Every test
// is bounded and stops what it started; all traffic stays on loopback.
package chaos
