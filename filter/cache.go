package filter

import (
	"sync"
	"sync/atomic"
)

// maxCached bounds the compiled rules a process keeps; past it the cache starts over, which costs a compile per
// rule once more.
const maxCached = 4096

// cache holds compiled rules by their text: intake reads its recipients with every batch, and a rule's text
// changes only when its recipient is saved, so each is compiled once rather than once per batch.
var cache struct {
	m sync.Map // text → cached
	n atomic.Int64
}

type cached struct {
	f   *Filter
	err error
}

// Cached is Compile of text, compiled once per process for the same text.
func Cached(text string) (*Filter, error) {
	if v, ok := cache.m.Load(text); ok {
		c := v.(cached)
		return c.f, c.err
	}
	f, err := Compile([]byte(text))
	if cache.n.Add(1) > maxCached {
		cache.m.Clear()
		cache.n.Store(1)
	}
	cache.m.Store(text, cached{f: f, err: err})
	return f, err
}
