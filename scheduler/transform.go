package scheduler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/transform"
	"github.com/adal-relay/adal/viewer"
	"github.com/adal-relay/adal/webhook"
)

// programs keeps the compiled transformations the attempts of this process run, by version: a version never
// changes once saved, so an entry never goes stale; the cache is only bounded.
type programs struct {
	client *ent.Client

	mu sync.Mutex
	by map[int]*program
}

type program struct {
	ready  chan struct{}
	p      *transform.Program
	number int
	err    error
}

// maxPrograms bounds the versions kept compiled; past it the cache starts again, which costs one read and
// one compile per version in use.
const maxPrograms = 4096

func newPrograms(client *ent.Client) *programs {
	return &programs{client: client, by: map[int]*program{}}
}

// get returns version id compiled, reading and compiling it on first use; concurrent callers wait for one.
func (c *programs) get(ctx context.Context, id int) (*program, error) {
	c.mu.Lock()
	e, ok := c.by[id]
	if !ok {
		if len(c.by) >= maxPrograms {
			c.by = map[int]*program{}
		}
		e = &program{ready: make(chan struct{})}
		c.by[id] = e
	}
	c.mu.Unlock()
	if ok {
		select {
		case <-e.ready:
			return e, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	tv, err := c.client.TransformVersion.Get(viewer.SystemContext(ctx), id)
	if err == nil {
		e.number = tv.Number
		e.p, err = transform.Compile(tv.Source)
	}
	e.err = err
	close(e.ready)
	if err != nil {
		c.mu.Lock()
		delete(c.by, id) // read again next time: the failure may have been the database's
		c.mu.Unlock()
	}
	return e, err
}

// transformed runs the recipient's transformation on out, changing it in place, and returns the version that
// ran (nil: none). ended is the outcome that ends the attempt instead of a send — a failed transformation
// (TRANSFORM) or one that cancelled the delivery —, nil to go on and send.
func (s *Scheduler) transformed(ctx context.Context, j job, out *delivery.Outgoing) (version *int, ended *delivery.Outcome) {
	if j.recipient.TransformVersionID == nil {
		return nil, nil
	}
	started := s.cfg.Now()
	fail := func(number int, format string, args ...any) *delivery.Outcome {
		o := &delivery.Outcome{StartedAt: started, FinishedAt: s.cfg.Now(), ErrorKind: delivery.ErrTransform,
			ErrorMessage: fmt.Sprintf(format, args...)}
		if number > 0 {
			o.TransformVersion = &number
		}
		return o
	}
	e, err := s.programs.get(ctx, *j.recipient.TransformVersionID)
	if err != nil {
		return nil, fail(0, "the transformation could not be loaded: %s", err.Error())
	}
	n := e.number
	in := transform.Request{Method: out.Method, Path: "/" + strings.TrimPrefix(j.request.Path, "/"),
		Query: j.request.Query, Header: http.Header(out.Header), Body: out.Body}
	res, cancel, err := e.p.Run(ctx, in, transform.Limits{})
	var terr *transform.Error
	switch {
	case errors.As(err, &terr):
		return &n, fail(n, "transformation version %d: %s", n, terr.Message)
	case err != nil:
		return &n, fail(n, "transformation version %d: %s", n, err.Error())
	case cancel:
		return &n, &delivery.Outcome{StartedAt: started, FinishedAt: s.cfg.Now(), Cancelled: true, TransformVersion: &n,
			ErrorKind: delivery.ErrTransform, ErrorMessage: fmt.Sprintf("transformation version %d cancelled the delivery", n)}
	}
	out.Method, out.Header, out.Body = res.Method, res.Header, res.Body
	if out.Destination != nil {
		out.Path = webhook.PathWithQuery(res.Path, res.Query)
		return &n, nil
	}
	target, err := webhook.JoinTarget(j.recipient.URL, res.Path, res.Query)
	if err != nil {
		return &n, fail(n, "transformation version %d made an invalid target: %s", n, err.Error())
	}
	out.URL = target
	return &n, nil
}
