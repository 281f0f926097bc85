package resolvers

import (
	"context"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/bulkjob"
	"github.com/adal-relay/adal/events"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// watchBulkJob streams a bulk job: first as it stands, read once the subscription is in place so no change
// between is missed, then afresh under the subscriber's viewer on each of its events, until it has ended.
func (r *Resolver) watchBulkJob(ctx context.Context, v viewer.Viewer, id int) (<-chan *ent.BulkJob, error) {
	const op = "bulkJobUpdated"
	job, err := r.Client.BulkJob.Get(ctx, id)
	if err != nil {
		return nil, storage.Err(op, "bulk job", err)
	}
	in, err := r.Events.Subscribe(ctx, events.Filter{TenantID: v.TenantID, BulkJobID: job.ID})
	if err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	out := make(chan *ent.BulkJob, 4)
	go func() {
		defer close(out)
		for {
			job, err := r.Client.BulkJob.Get(ctx, id)
			if err != nil {
				return // purged, or the subscriber is gone
			}
			select {
			case out <- job:
			case <-ctx.Done():
				return
			}
			if job.Status != bulkjob.StatusRUNNING {
				return
			}
			select {
			case <-ctx.Done():
				return
			case _, ok := <-in:
				if !ok {
					return
				}
				for range len(in) { // one read answers every event queued
					<-in
				}
			}
		}
	}()
	return out, nil
}
