package inbound

import "sync/atomic"

// PanicOnNextCommit makes the next batch h commits panic, as a bug in intake would: before it stores anything,
// or, with afterStore, once it has stored and answered its requests. Call it before sending what it is for:
// committers read the hook under the batcher's lock, after the request that wakes them is queued.
func PanicOnNextCommit(h *Handler, afterStore bool) {
	commit := h.batch.commitBatch
	var done atomic.Bool
	h.batch.commitBatch = func(batch []*pendingAccept) {
		if done.Swap(true) {
			commit(batch)
			return
		}
		if afterStore {
			commit(batch)
		}
		panic("intake bug")
	}
}
