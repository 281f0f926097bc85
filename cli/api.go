package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// apiTimeout bounds one GraphQL round trip over HTTP.
const apiTimeout = 15 * time.Second

// maxAPIResponse bounds what the CLI reads of one answer: a page of requests with their deliveries fits.
const maxAPIResponse = 16 << 20

// apiClient runs GraphQL operations over HTTP against one Adal API with one token.
type apiClient struct {
	base     string // as the user gave it
	endpoint string
	token    string
	http     *http.Client
}

func newAPIClient(base, token string) (*apiClient, error) {
	endpoint, err := httpURL(base)
	if err != nil {
		return nil, err
	}
	return &apiClient{base: base, endpoint: endpoint, token: token, http: &http.Client{Timeout: apiTimeout}}, nil
}

// httpURL is the server's GraphQL HTTP endpoint.
func httpURL(server string) (string, error) {
	u, err := wsURL(server)
	if err != nil {
		return "", err
	}
	p, _ := url.Parse(u)
	p.Scheme = map[string]string{"ws": "http", "wss": "https"}[p.Scheme]
	return p.String(), nil
}

// do runs one operation and decodes its data into out (when not nil). GraphQL errors come back as gqlErrors;
// a server that cannot be reached, or answers with something other than GraphQL, as a *lostError.
func (a *apiClient) do(ctx context.Context, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.http.Do(req)
	if err != nil {
		return &lostError{fmt.Errorf("cannot reach the server at %s: %s", a.base, localError(err))}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIResponse))
	if err != nil {
		return &lostError{fmt.Errorf("reading the answer of %s: %w", a.base, err)}
	}
	var res result
	if err := json.Unmarshal(raw, &res); err != nil {
		return &lostError{fmt.Errorf("%s answered HTTP %d, not GraphQL: does it run Adal?", a.base, resp.StatusCode)}
	}
	if len(res.Errors) > 0 {
		return res.Errors
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(res.Data, out); err != nil {
		return fmt.Errorf("undecodable answer from %s: %w", a.base, err)
	}
	return nil
}

// explainAuth adds what to do about a refused token.
func explainAuth(err error) error {
	var gql gqlErrors
	if errors.As(err, &gql) && gql.has("UNAUTHENTICATED") {
		return fmt.Errorf("the server refused the token: %w; get a fresh token and run adal login", err)
	}
	return err
}
