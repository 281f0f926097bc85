package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// ledgerScan is how many of the newest ledger entries are searched for the one a retry or replay wrote.
const ledgerScan = 100

// charge is what an action cost, from the tenant's ledger.
type charge struct {
	// Cost is the credits the action's ledger entry debited; nil when the entry was not among the newest
	// (a busy tenant): Balance is then the balance now.
	Cost    *int
	Balance int
}

// charged finds the ledger entry an action wrote (by reason and reference) and returns its cost and the
// balance right after it.
func charged(ctx context.Context, api *apiClient, reason, reference string) (charge, error) {
	var out struct {
		Ledger struct {
			Edges []struct {
				Node struct {
					Reason, Reference    string
					Amount, BalanceAfter int
				}
			}
		}
		Viewer struct{ Tenant *struct{ CreditBalance int } }
	}
	err := api.do(ctx, `query($n: Int!) { ledger(first: $n) { edges { node { reason reference amount balanceAfter } } } viewer { tenant { creditBalance } } }`,
		map[string]any{"n": ledgerScan}, &out)
	if err != nil {
		return charge{}, err
	}
	for _, e := range out.Ledger.Edges {
		if e.Node.Reason == reason && e.Node.Reference == reference {
			cost := -e.Node.Amount
			return charge{Cost: &cost, Balance: e.Node.BalanceAfter}, nil
		}
	}
	var c charge
	if out.Viewer.Tenant != nil {
		c.Balance = out.Viewer.Tenant.CreditBalance
	}
	return c, nil
}

func (c charge) String() string {
	if c.Cost == nil {
		return fmt.Sprintf("Balance now: %s.", credits(c.Balance))
	}
	return fmt.Sprintf("Cost: %s. Balance: %s.", credits(*c.Cost), credits(c.Balance))
}

func credits(n int) string {
	if n == 1 || n == -1 {
		return fmt.Sprintf("%d credit", n)
	}
	return fmt.Sprintf("%d credits", n)
}

// action is what retry and replay share: a paid mutation on the one ID the command line gives.
type action struct {
	name, noun, past string // the command, what its ID names, and what became of that
	mutation         string // takes $id
	reason           string // of the ledger entry it writes
}

// run parses the command line, runs the mutation into res and finds what it cost; found(id), called once res
// holds the answer, names the new object and the reference of the ledger entry.
func (a action) run(ctx context.Context, args []string, stdout, stderr io.Writer, res any, found func(id string) (newID, reference string)) (*output, string, charge, error) {
	in, err := begin(a.name, args, 1, stderr)
	if err != nil {
		return nil, "", charge{}, err
	}
	id := strings.TrimSpace(in.args[0])
	if !isID(id) {
		in.problemf("%q is not an ID (a number, as adal requests shows)", id)
	}
	client, out, err := in.finish(stdout, stderr)
	if err != nil {
		return nil, "", charge{}, err
	}
	if err := client.do(ctx, a.mutation, map[string]any{"id": id}, res); err != nil {
		return nil, "", charge{}, out.fail(fmt.Errorf("cannot %s %s %s: %w", a.name, a.noun, id, explainAuth(err)))
	}
	newID, reference := found(id)
	c, err := charged(ctx, client, a.reason, reference)
	if err != nil {
		return nil, "", charge{}, out.fail(fmt.Errorf("%s %s was %s as %s %s, but reading the balance failed: %w", a.noun, id, a.past, a.noun, newID, err))
	}
	return out, id, c, nil
}

// retryEvent is the result of adal retry.
type retryEvent struct {
	eventHead
	DeliveryID    string `json:"deliveryId"`
	NewDeliveryID string `json:"newDeliveryId"`
	RequestID     string `json:"requestId"`
	RecipientID   string `json:"recipientId"`
	Recipient     string `json:"recipient"`
	Status        string `json:"status"`
	Cost          *int   `json:"cost"`
	Balance       int    `json:"balance"`
}

func retry(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var res struct {
		RetryDelivery struct {
			ID, Status string
			Request    struct{ ID string }
			Recipient  struct{ ID, Name string }
		}
	}
	d := &res.RetryDelivery
	out, id, c, err := action{name: "retry", noun: "delivery", past: "retried", reason: "MANUAL_RETRY",
		mutation: `mutation($id: ID!) { retryDelivery(id: $id) { id status request { id } recipient { id name } } }`,
	}.run(ctx, args, stdout, stderr, &res, func(id string) (string, string) { return d.ID, "delivery:" + id })
	if err != nil {
		return err
	}
	out.record(retryEvent{eventHead: head("retry", time.Time{}), DeliveryID: id, NewDeliveryID: d.ID, RequestID: d.Request.ID,
		RecipientID: d.Recipient.ID, Recipient: d.Recipient.Name, Status: d.Status, Cost: c.Cost, Balance: c.Balance},
		fmt.Sprintf("Retried delivery %s of request %s: new delivery %s to %q (%s).\n%s\n", id, d.Request.ID, d.ID, d.Recipient.Name, d.Status, c))
	return nil
}

// replayEvent is the result of adal replay.
type replayEvent struct {
	eventHead
	RequestID    string          `json:"requestId"`
	NewRequestID string          `json:"newRequestId"`
	Deliveries   []replayedToOne `json:"deliveries"`
	Cost         *int            `json:"cost"`
	Balance      int             `json:"balance"`
}

type replayedToOne struct {
	DeliveryID  string `json:"deliveryId"`
	RecipientID string `json:"recipientId"`
	Recipient   string `json:"recipient"`
}

func replay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var res struct {
		ReplayRequest struct {
			ID         string
			Deliveries []struct {
				ID        string
				Recipient struct{ ID, Name string }
			}
		}
	}
	r := &res.ReplayRequest
	out, id, c, err := action{name: "replay", noun: "request", past: "replayed", reason: "REPLAY",
		mutation: `mutation($id: ID!) { replayRequest(id: $id) { id deliveries { id recipient { id name } } } }`,
	}.run(ctx, args, stdout, stderr, &res, func(string) (string, string) { return r.ID, "request:" + r.ID })
	if err != nil {
		return err
	}
	ev := replayEvent{eventHead: head("replay", time.Time{}), RequestID: id, NewRequestID: r.ID, Deliveries: []replayedToOne{}, Cost: c.Cost, Balance: c.Balance}
	var names []string
	for _, d := range r.Deliveries {
		ev.Deliveries = append(ev.Deliveries, replayedToOne{DeliveryID: d.ID, RecipientID: d.Recipient.ID, Recipient: d.Recipient.Name})
		names = append(names, fmt.Sprintf("%q (delivery %s)", d.Recipient.Name, d.ID))
	}
	to := "no recipient (the server has none now)"
	if len(names) > 0 {
		to = fmt.Sprintf("%d recipient(s): %s", len(names), strings.Join(names, ", "))
	}
	out.record(ev, fmt.Sprintf("Replayed request %s as request %s, delivered to %s.\n%s\n", id, r.ID, to, c))
	return nil
}
