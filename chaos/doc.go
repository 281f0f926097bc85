// Package chaos holds Adal's fault tests: real server processes killed with SIGKILL mid-delivery and right after
// a 202, and PostgreSQL backends terminated under load. They are slow and brutal, so they only build with the
// chaos tag:
//
//	ADAL_TEST_DATABASE_URL=postgres://… go test -tags chaos -count=1 ./chaos/
//
// Without ADAL_TEST_DATABASE_URL the process tests run on SQLite and the PostgreSQL test is skipped. Every test
// is bounded and stops what it started; all traffic stays on loopback.
package chaos
