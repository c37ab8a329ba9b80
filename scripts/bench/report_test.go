package main

import (
	"strings"
	"testing"
)

// TestTopLines: the entries of go tool pprof -top come out without its
// header, spaces squeezed, at most n of them.
func TestTopLines(t *testing.T) {
	top := []byte(`File: gatehouse
Type: cpu
Showing nodes accounting for 0.9s, 75% of 1.2s total
      flat  flat%   sum%        cum   cum%
     0.34s 27.87% 27.87%      0.34s 27.87%  internal/runtime/syscall/linux.Syscall6
     0.05s  4.10% 31.97%      0.05s  4.10%  internal/sync.(*Mutex).Lock (inline)
     0.04s  3.28% 35.25%      0.05s  4.10%  runtime.lock2
`)
	got := topLines(top, 2)
	want := []string{
		"0.34s 27.87% 27.87% 0.34s 27.87% internal/runtime/syscall/linux.Syscall6",
		"0.05s 4.10% 31.97% 0.05s 4.10% internal/sync.(*Mutex).Lock (inline)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("topLines = %q, want %q", got, want)
	}
	if got := topLines([]byte("no header here\n"), 5); len(got) != 0 {
		t.Errorf("topLines without a header = %q, want none", got)
	}
}

// TestReportMissed: every missed target is listed with what stands in the
// way, the CPU profile's top goes with the first CPU target, and met targets
// are not listed; with every target met the section is absent.
func TestReportMissed(t *testing.T) {
	r := &report{
		ProfileNote: "/out/gatehouse-cpu.pprof",
		TopCPU:      []string{"0.34s 27.87% 27.87% 0.34s 27.87% syscall"},
		Targets: []targetCheck{
			{What: "non-streaming c=16 through/direct req/s", Want: "≥ 0.45", Got: "0.50", Pass: true},
			{What: "non-streaming c=16 Gatehouse CPU per request", Want: "≤ 45 µs", Got: "50.0 µs"},
			{What: "Gatehouse RSS after the standard runs", Want: "≤ 50 MB", Got: "55.0 MB"},
			{What: "Gatehouse extra RSS with 10000 queued on a cap-1 gate", Want: "≤ 200 MB", Got: "336.0 MB"},
		},
	}
	md := r.markdown()
	_, missed, ok := strings.Cut(md, "Missed targets")
	if !ok {
		t.Fatalf("no missed-targets section in\n%s", md)
	}
	for _, want := range []string{
		"**non-streaming c=16 Gatehouse CPU per request** (want ≤ 45 µs, got 50.0 µs): the inbound net/http server tops the CPU profile",
		"CPU profile (non-streaming c=16): /out/gatehouse-cpu.pprof",
		"syscall",
		"**Gatehouse RSS after the standard runs** (want ≤ 50 MB, got 55.0 MB): Gatehouse is about 30 MB",
		"**Gatehouse extra RSS with 10000 queued on a cap-1 gate** (want ≤ 200 MB, got 336.0 MB): net/http's server keeps about 21 KB",
		"run with -queue-heap",
	} {
		if !strings.Contains(missed, want) {
			t.Errorf("missed-targets section lacks %q:\n%s", want, missed)
		}
	}
	if strings.Contains(missed, "through/direct req/s") {
		t.Errorf("a met target is listed as missed:\n%s", missed)
	}
	for i := range r.Targets {
		r.Targets[i].Pass = true
	}
	if md := r.markdown(); strings.Contains(md, "Missed targets") {
		t.Errorf("missed-targets section with every target met:\n%s", md)
	}
}
