package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adal-relay/adal/inbound"
	"github.com/adal-relay/adal/viewer"
)

// graphql measures the server's memory while one tenant sends the worst query the API lets it send: a page of
// as many bodies as one operation may read, each a full-size body of control bytes (which grow sixfold as
// JSON), from GraphQLClients connections at once for the measured duration. The budget: peak RSS ≤ 150 MiB. The
// clients run in the bench process, beside the server: the cost per query answered includes their share.
func (b *Runner) graphql(ctx context.Context) error {
	p, srv, err := b.startStoreOnly("graphql")
	if err != nil {
		return err
	}
	defer p.Close()
	body := bytes.Repeat([]byte{1}, inbound.DefaultMaxBody)
	const stored = 8
	for range stored {
		resp, err := p.client.Post(srv.InboundURL, "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("post a body: status %d", resp.StatusCode)
		}
	}
	token, err := p.Relay.Auth.Issue(viewer.Viewer{Role: viewer.Owner, TenantID: int(srv.TenantID), Subject: "bench"}, time.Hour)
	if err != nil {
		return err
	}
	worst, page, err := worstQuery(p, token, srv.ID, stored)
	if err != nil {
		return err
	}

	b.startMeasure()
	cost := b.startCosts(ctx, p.admin)
	var responses, refused, failed, bytesRead atomic.Int64
	deadline := time.Now().Add(b.cfg.Duration)
	var wg sync.WaitGroup
	for range b.cfg.GraphQLClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				n, ok, err := postGraphQL(p, token, worst)
				switch {
				case err != nil:
					failed.Add(1)
				case ok:
					responses.Add(1)
					bytesRead.Add(n)
				default:
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	spent := cost.stop(ctx, responses.Load(), "response")
	rss := peakRSS()
	row := Row{
		Scenario: "graphql",
		Figure:   fmt.Sprintf("peak RSS %s", mib(rss)),
		Detail: fmt.Sprintf("%d responses to pages of %d bodies of %s (%s of JSON each), %d refused, %d failed, from %d connections",
			responses.Load(), page, mib(int64(len(body))), mib(bytesRead.Load()/max(responses.Load(), 1)), refused.Load(),
			failed.Load(), b.cfg.GraphQLClients),
		Target:   fmt.Sprintf("≤ 150 MiB: %s", met(rss <= 150<<20)),
		Settings: fmt.Sprintf("%s measured; bodies of control bytes; cost§ per query answered, its clients' share included: they run in the bench process", b.cfg.Duration),
		PeakRSS:  rss,
		Cost:     spent,
	}
	if responses.Load() == 0 {
		row.Void = "no query was answered"
	}
	b.add(row)
	return nil
}

// worstQuery finds the largest page of bodies the complexity limit lets one operation ask for, and returns the
// query for it. The server reads every body of the page, though the response's cap lets only some of them
// through.
func worstQuery(p *Process, token string, serverID int64, stored int) (query string, page int, err error) {
	for page = stored; page > 0; page-- {
		query = `{ requests(serverId: "` + strconv.FormatInt(serverID, 10) + `", first: ` + strconv.Itoa(page) +
			`) { edges { node { id body } } } }`
		_, ok, err := postGraphQL(p, token, query)
		if err != nil {
			return "", 0, err
		}
		if ok {
			return query, page, nil
		}
	}
	return "", 0, fmt.Errorf("no page of bodies is allowed")
}

// postGraphQL sends query and reads the answer as a client that does not keep it would. ok is whether the
// operation ran (data came back, perhaps with errors for some fields); n is the size of the response.
func postGraphQL(p *Process, token, query string) (n int64, ok bool, err error) {
	payload, _ := json.Marshal(map[string]any{"query": query})
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/graphql", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	// Errors come first: the head says whether the operation was refused; the rest is counted, not kept.
	head := make([]byte, 4096)
	k, _ := io.ReadFull(resp.Body, head)
	rest, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, false, err
	}
	refused := !strings.Contains(string(head[:k]), `"data":{`)
	return int64(k) + rest, !refused, nil
}
