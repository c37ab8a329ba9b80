package ratelimit

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// failOpenLogEvery rate-limits the log line about an unavailable store.
const failOpenLogEvery = time.Minute

// failOpen is the fail-open switch in front of a store the gateway can do
// without for a while (the usage store, the shared limits): after a failure
// the store is not asked for retry, and the failure is logged at most once
// per failOpenLogEvery. It works on the real clock and is safe for
// concurrent use.
type failOpen struct {
	log       *slog.Logger
	retry     time.Duration
	msg       string       // the warning logged on failure
	downUntil atomic.Int64 // unix nanos until which the store is not asked
	loggedAt  atomic.Int64 // unix nanos of the latest warning
}

// up reports whether the store should be asked.
func (f *failOpen) up() bool { return time.Now().UnixNano() >= f.downUntil.Load() }

// failed switches away from the store for f.retry, logging err unless that
// was done within failOpenLogEvery.
func (f *failOpen) failed(err error) {
	now := time.Now().UnixNano()
	f.downUntil.Store(now + int64(f.retry))
	last := f.loggedAt.Load()
	if now-last >= int64(failOpenLogEvery) && f.loggedAt.CompareAndSwap(last, now) {
		f.log.Warn(f.msg, slog.Any("error", err))
	}
}
