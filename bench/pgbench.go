package bench

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"
)

// pgbenchDatabase is the database pgbench runs in: its own, never Adal's.
const pgbenchDatabase = "adal_bench_pgbench"

// pgbenchTPS runs `pgbench -N` (the TPC-B-like script without the teller and branch updates: per transaction
// one UPDATE, one SELECT, one INSERT, one commit) against the same PostgreSQL server for d and returns its TPS,
// the server's physical reference for short write transactions.
func (b *Runner) pgbenchTPS(d time.Duration) (float64, string, error) {
	u, err := url.Parse(b.cfg.DatabaseURL)
	if err != nil {
		return 0, "", err
	}
	env := os.Environ()
	env = append(env, "PGHOST="+u.Hostname(), "PGUSER="+u.User.Username())
	if port := u.Port(); port != "" {
		env = append(env, "PGPORT="+port)
	}
	if pw, ok := u.User.Password(); ok {
		env = append(env, "PGPASSWORD="+pw)
	}
	admin, err := sql.Open("postgres", b.cfg.DatabaseURL)
	if err != nil {
		return 0, "", err
	}
	defer admin.Close()
	var exists bool
	if err := admin.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, pgbenchDatabase).Scan(&exists); err != nil {
		return 0, "", err
	}
	if !exists {
		if _, err := admin.Exec("CREATE DATABASE " + pq.QuoteIdentifier(pgbenchDatabase)); err != nil {
			return 0, "", err
		}
		cmd := exec.Command("pgbench", "-i", "-q", "-s", strconv.Itoa(b.cfg.PgbenchScale), pgbenchDatabase)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			_, _ = admin.Exec("DROP DATABASE " + pq.QuoteIdentifier(pgbenchDatabase))
			return 0, "", fmt.Errorf("pgbench -i: %v: %s", err, out)
		}
	}
	args := []string{"-N", "-n", "-c", strconv.Itoa(b.cfg.PgbenchClients), "-j", "2",
		"-T", strconv.Itoa(max(1, int(d.Seconds()))), pgbenchDatabase}
	cmd := exec.Command("pgbench", args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, "", fmt.Errorf("pgbench: %v: %s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindSubmatch(out)
	if m == nil {
		return 0, "", fmt.Errorf("pgbench: no tps in output: %s", out)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	settings := fmt.Sprintf("pgbench %s (scale %d)", strings.Join(args[:len(args)-1], " "), b.cfg.PgbenchScale)
	return tps, settings, nil
}
