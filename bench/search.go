package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/adal-relay/adal/search"
)

// searchTerms are what the search scenario looks for: a term in every request (the page fills from the
// newest ones), one in one request of 100,000 (spread through the history: the search stops at its bound and
// goes on page after page), and one in none (every page stops at the bound).
var searchTerms = []struct{ name, term string }{
	{"common", "ORDER.CREATED"},
	{"rare", "needle-7f3a"},
	{"absent", "no-such-text"},
}

// searchRuns is how many times each term's first page is asked for; the figures are over them.
const searchRuns = 5

// search measures requests(search:) on one server holding SearchRequests stored requests of about 1 KiB: the
// latency of the first page of a common, a rare and an absent term, and how fast paging on ("search older")
// walks the whole history, and the cost of a call. The budget: every call answers within 2 s.
func (b *Runner) search(ctx context.Context) error {
	p, srv, err := b.startStoreOnly("search")
	if err != nil {
		return err
	}
	defer p.Close()
	b.logf("search: inserting %d requests", b.cfg.SearchRequests)
	if err := insertSearchable(ctx, p, srv, b.cfg.SearchRequests); err != nil {
		return err
	}

	b.startMeasure()
	cost := b.startCosts(ctx, p.admin)
	var details []string
	slowest := time.Duration(0)
	for _, t := range searchTerms {
		var lat []time.Duration
		var page searchPage
		for range searchRuns {
			started := time.Now()
			page, err = searchOnce(p, srv.ID, t.term, nil)
			if err != nil {
				return fmt.Errorf("search %q: %w", t.term, err)
			}
			lat = append(lat, time.Since(started))
		}
		slices.Sort(lat)
		slowest = max(slowest, lat[len(lat)-1])
		details = append(details, fmt.Sprintf("%s: median %s, max %s (%d found, %d examined, stopped early %v)",
			t.name, ms(lat[len(lat)/2]), ms(lat[len(lat)-1]), len(page.Requests.Edges), page.Requests.Search.Scanned,
			page.Requests.Search.StoppedEarly))
	}

	// Search older, page after page, until the rare term's history is walked to its oldest request.
	started := time.Now()
	var after *string
	calls, found, examined := 0, 0, 0
	longest := time.Duration(0)
	for {
		callStarted := time.Now()
		page, err := searchOnce(p, srv.ID, "needle-7f3a", after)
		if err != nil {
			return fmt.Errorf("search older: %w", err)
		}
		longest = max(longest, time.Since(callStarted))
		calls++
		found += len(page.Requests.Edges)
		examined += page.Requests.Search.Scanned
		if !page.Requests.PageInfo.HasNextPage || ctx.Err() != nil {
			break
		}
		after = page.Requests.PageInfo.EndCursor
	}
	walk := time.Since(started)
	spent := cost.stop(ctx, int64(len(searchTerms)*searchRuns+calls), "call")
	slowest = max(slowest, longest)
	rss := peakRSS()
	row := Row{
		Scenario: "search",
		Figure:   fmt.Sprintf("first page ≤ %s", ms(slowest)),
		Detail: strings.Join(details, "; ") + fmt.Sprintf("; the whole history for the rare term: %d calls in %v (longest %s), %d requests examined (%.0f/s), %d found",
			calls, walk.Round(time.Millisecond), ms(longest), examined, float64(examined)/walk.Seconds(), found),
		Target: fmt.Sprintf("every call ≤ 2 s: %s", met(slowest <= 2*time.Second)),
		Settings: fmt.Sprintf("%d requests of ~1 KiB on one server; bounds %d requests or %v per call; first: 50; cost§ per call, first pages and paging on alike (the client runs in the bench process, one call at a time)",
			b.cfg.SearchRequests, search.DefaultMaxRows, search.DefaultBudget),
		PeakRSS: rss,
		Cost:    spent,
	}
	if examined != b.cfg.SearchRequests {
		row.Void = fmt.Sprintf("paging examined %d of %d requests", examined, b.cfg.SearchRequests)
	}
	if want := (b.cfg.SearchRequests + 100_000 - 1 - 7) / 100_000; found != max(want, 0) {
		row.Void = fmt.Sprintf("found %d rare requests, want %d", found, want)
	}
	b.add(row)
	return nil
}

// searchPage is the part of a requests(search:) answer the scenario reads.
type searchPage struct {
	Requests struct {
		Edges    []struct{ Node struct{ ID string } }
		PageInfo struct {
			HasNextPage bool
			EndCursor   *string
		}
		Search struct {
			Scanned      int
			StoppedEarly bool
		}
	}
}

func searchOnce(p *Process, serverID int64, term string, after *string) (searchPage, error) {
	var out searchPage
	err := p.graphQL(`query($s: ID!, $q: String!, $after: Cursor) {
		requests(serverId: $s, search: $q, first: 50, after: $after) {
			edges { node { id } } pageInfo { hasNextPage endCursor } search { scanned stoppedEarly } } }`,
		map[string]any{"s": strconv.FormatInt(serverID, 10), "q": term, "after": after}, &out)
	return out, err
}

// insertSearchable stores n requests for the server, straight into the table, received one every 100 ms up to
// now: JSON bodies of about 1 KiB naming one of four event types, every 100,000th (from the 7th) carrying the
// rare term.
func insertSearchable(ctx context.Context, p *Process, srv FixtureServer, n int) error {
	now := time.Now().UTC()
	const chunk = 50_000
	for from := 0; from < n; from += chunk {
		to := min(from+chunk, n) - 1
		_, err := p.DB.ExecContext(ctx, `
			INSERT INTO requests (key, method, path, query, headers, body, source_addr, received_at, expires_at,
			                      status, tenant_id, server_id)
			SELECT 'search-' || g, 'POST', '/hooks/' || (ARRAY['shop', 'billing', 'crm'])[1 + g % 3], '',
			       convert_to('{"Content-Type":["application/json"],"User-Agent":["bench-sender/1.0"]}', 'UTF8'),
			       convert_to('{"seq":' || g || ',"event":"' ||
			           (ARRAY['order.created', 'invoice.paid', 'customer.updated', 'refund.issued'])[1 + g % 4] ||
			           '","note":"' || CASE WHEN g % 100000 = 7 THEN 'needle-7f3a' ELSE 'nothing to see' END ||
			           '","pad":"' || repeat(md5(g::text), 28) || '"}', 'UTF8'),
			       '127.0.0.1', $1::timestamptz - ($2::bigint - g) * interval '100 milliseconds',
			       $1::timestamptz + interval '7 days', 'DELIVERED', $3, $4
			FROM generate_series($5::bigint, $6::bigint) AS g`,
			now, n, srv.TenantID, srv.ID, from, to)
		if err != nil {
			return fmt.Errorf("insert requests: %w", err)
		}
	}
	_, err := p.DB.ExecContext(ctx, `ANALYZE`)
	return err
}
