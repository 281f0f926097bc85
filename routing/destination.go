package routing

import (
	"net/url"

	"github.com/adal-relay/adal/destination"
	"github.com/adal-relay/adal/ent"
)

// Destination is a broker recipient's settings as the API shows them: as stored, and of its URL only whether
// it asks for TLS and carries a password — the password itself is never returned.
type Destination struct {
	Exchange      *string
	RoutingKey    *string
	Subject       *string
	Stream        *string
	MaxLen        *int
	Topic         *string
	TLS           bool
	CACertificate *string
	HasPassword   bool
}

// DestinationOf is r's destination, nil for a DIRECT_HTTP or CLI recipient.
func DestinationOf(r *ent.Recipient) *Destination {
	if r.Destination == nil || !destination.IsBroker(r.Method.String()) {
		return nil
	}
	s := r.Destination
	t := destination.Target{Method: destination.Method(r.Method), URL: r.DestinationURL, Settings: *s}
	d := &Destination{
		Exchange: nonEmpty(s.Exchange), RoutingKey: nonEmpty(s.RoutingKey), Subject: nonEmpty(s.Subject),
		Stream: nonEmpty(s.Stream), Topic: nonEmpty(s.Topic), CACertificate: nonEmpty(s.CACertificate),
		TLS: t.TLS(),
	}
	if s.MaxLen != 0 {
		n := int(s.MaxLen)
		d.MaxLen = &n
	}
	if u, err := url.Parse(r.DestinationURL); err == nil && u.User != nil {
		_, d.HasPassword = u.User.Password()
	}
	return d
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
