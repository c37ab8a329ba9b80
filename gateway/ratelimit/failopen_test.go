package ratelimit

import (
	"errors"
	"log/slog"
	"testing"
	"time"
)

// TestFailOpenSwitch: a failure keeps the store unasked for the retry
// period, and repeated failures log one warning a minute, not one each.
func TestFailOpenSwitch(t *testing.T) {
	t.Parallel()
	logs := &recordingHandler{}
	f := &failOpen{log: slog.New(logs), retry: time.Hour, msg: "store away"}
	if !f.up() {
		t.Fatal("up() = false before any failure")
	}
	f.failed(errors.New("refused"))
	if f.up() {
		t.Error("up() = true right after a failure with an hour's retry")
	}
	f.downUntil.Store(0) // the retry period is over
	if !f.up() {
		t.Error("up() = false once the retry period is over")
	}
	f.failed(errors.New("refused again"))
	if got := logs.count(); got != 1 {
		t.Errorf("%d warnings for two failures within a minute, want 1", got)
	}
}
