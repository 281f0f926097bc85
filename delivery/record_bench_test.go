package delivery_test

import "testing"

// BenchmarkRecordBatch records the attempts of intake-sized batches as the dispatcher's completer does: 32
// deliveries handed off at intake, each answered 200, their outcomes recorded in one RecordBatch. ns/op is per
// batch of outcomes; storing the batch is outside the timer.
func BenchmarkRecordBatch(b *testing.B) {
	f := newIntakeBatch(b)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		claimed := f.store(b)
		b.StartTimer()
		f.deliver(b, claimed)
	}
}
