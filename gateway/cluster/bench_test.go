package cluster

import (
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

var benchKeys = []string{
	"global",
	"provider:zai",
	"connection:6f1c2a9e-5b7d-4c1e-9a3f-2d8b7e6c5a41",
	"model:6f1c2a9e-5b7d-4c1e-9a3f-2d8b7e6c5a41:glm-5",
}

func benchController(b *testing.B) *Controller {
	b.Helper()
	c := newController(b, newClient(b, shared.sock), Options{Prefix: uniquePrefix(b)})
	c.SetCaps(map[string]int{benchKeys[0]: 1000, benchKeys[1]: 500, benchKeys[2]: 100, benchKeys[3]: 50})
	return c
}

// BenchmarkAcquireRelease: an uncontended 4-gate acquire and release,
// two round trips to a local Redis (unix socket).
func BenchmarkAcquireRelease(b *testing.B) {
	c := benchController(b)
	req := admission.Request{Gates: path(benchKeys...), MaxWait: 30 * time.Second}
	b.ReportAllocs()
	for b.Loop() {
		p, err := c.Acquire(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	}
}

// BenchmarkAcquireReleaseParallel: the same from many goroutines of one
// replica, below every cap.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	c := benchController(b)
	req := admission.Request{Gates: path(benchKeys...), MaxWait: 30 * time.Second}
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := c.Acquire(b.Context(), req)
			if err != nil {
				b.Error(err)
				return
			}
			p.Release()
		}
	})
}

// BenchmarkPing is the floor: two PINGs, the same round trips with no work.
func BenchmarkPing(b *testing.B) {
	rdb := newClient(b, shared.sock)
	for b.Loop() {
		for range 2 {
			if err := rdb.Ping(b.Context()).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkLocal is the in-process controller through admission.Local.
func BenchmarkLocal(b *testing.B) {
	c := admission.Local{C: admission.New(admission.Options{})}
	c.SetCaps(map[string]int{benchKeys[0]: 1000, benchKeys[1]: 500, benchKeys[2]: 100, benchKeys[3]: 50})
	req := admission.Request{Gates: path(benchKeys...), MaxWait: 30 * time.Second}
	b.ReportAllocs()
	for b.Loop() {
		p, err := c.Acquire(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	}
}
