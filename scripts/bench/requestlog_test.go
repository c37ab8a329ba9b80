package main

import (
	"slices"
	"strings"
	"testing"
)

// TestRunOrder: with -request-log both, the log-off run of a scenario with a log
// target sits right beside its log-on run, first in odd repetitions and second
// in even ones, with direct on its other side; scenarios without the target (or
// runs without both) keep the plain alternation.
func TestRunOrder(t *testing.T) {
	c16 := scenario{name: "non-streaming c=16", conc: 16, minCluster: 0.7, minLogRatio: 0.9}
	c1 := scenario{name: "non-streaming c=1", conc: 1}
	for _, tc := range []struct {
		sc   scenario
		o    options
		rep  int
		want []string
	}{
		{c16, options{requestLog: "both", cluster: true}, 1, []string{pathDirect, pathNoLog, pathGatehouse, pathCluster}},
		{c16, options{requestLog: "both", cluster: true}, 2, []string{pathCluster, pathGatehouse, pathNoLog, pathDirect}},
		{c16, options{requestLog: "both"}, 1, []string{pathDirect, pathNoLog, pathGatehouse}},
		{c16, options{requestLog: "both"}, 2, []string{pathGatehouse, pathNoLog, pathDirect}},
		{c16, options{requestLog: "on", cluster: true}, 1, []string{pathDirect, pathGatehouse, pathCluster}},
		{c16, options{requestLog: "on", cluster: true}, 2, []string{pathCluster, pathGatehouse, pathDirect}},
		{c1, options{requestLog: "both", cluster: true}, 1, []string{pathDirect, pathGatehouse}},
		{c1, options{requestLog: "both", cluster: true}, 2, []string{pathGatehouse, pathDirect}},
	} {
		if got := runOrder(tc.sc, tc.rep, tc.o); !slices.Equal(got, tc.want) {
			t.Errorf("runOrder(%s, rep %d, %+v) = %v, want %v", tc.sc.name, tc.rep, tc.o, got, tc.want)
		}
	}
}

// TestSummarizeLog: the on ÷ off ratio is taken per repetition and its median
// is checked against the target, and shown by which run went first; the log-on
// Postgres's CPU during a log-off run that came second is shown; a run with a
// non-200 answer fails the target; a miss says what stands in the way.
func TestSummarizeLog(t *testing.T) {
	sc := scenario{name: "non-streaming c=16", conc: 16, minLogRatio: 0.9}
	rec := func(path string, rep int, rps, cpu, pg float64) runRecord {
		return runRecord{Scenario: sc.name, Path: path, Rep: rep, Requests: 100, OK: 100, RPS: rps, GatehouseCPUUs: cpu, PostgresCPUUs: pg}
	}
	runs := []runRecord{
		rec(pathDirect, 1, 20000, 0, 0), rec(pathNoLog, 1, 10000, 80, 0.5), rec(pathGatehouse, 1, 9500, 83, 10),
		rec(pathGatehouse, 2, 8500, 84, 11), rec(pathNoLog, 2, 10000, 81, 0.4), rec(pathDirect, 2, 21000, 0, 0),
		rec(pathDirect, 3, 20000, 0, 0), rec(pathNoLog, 3, 9000, 82, 0.6), rec(pathGatehouse, 3, 8280, 85, 9),
	}
	runs[4].LogPostgresCPUUs = 0.7 // rep 2's log-off run came after the log-on one
	s := summarize(sc, runs)
	if s.Log == nil {
		t.Fatal("no request log summary")
	}
	if want := []float64{0.95, 0.85, 0.92}; !slices.EqualFunc(s.Log.Ratios, want, func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }) {
		t.Errorf("ratios = %v, want %v", s.Log.Ratios, want)
	}
	if s.Log.Ratio < 0.919 || s.Log.Ratio > 0.921 || s.Log.OffRPS != 10000 || s.Log.OnRPS != 8500 || s.Log.OnPostgresCPUUs != 10 || s.Log.OffCPUUs != 81 ||
		s.Log.OffFirst < 0.934 || s.Log.OffFirst > 0.936 || s.Log.OnFirst < 0.849 || s.Log.OnFirst > 0.851 || s.Log.SpillCPUUs != 0.7 {
		t.Errorf("summary = %+v", *s.Log)
	}
	got := s.Targets[len(s.Targets)-1]
	if got.What != "non-streaming c=16 request log on ÷ off req/s" || got.Got != "0.92" || !got.Pass {
		t.Errorf("target = %+v, want met at 0.92", got)
	}
	md := (&report{Scenarios: []scenarioSummary{s}, Targets: s.Targets}).markdown()
	if !strings.Contains(md, "| non-streaming c=16 | 10000 | 8500 | 0.92 (0.95, 0.85, 0.92) | 0.94 / 0.85 | 81.0 → 84.0 µs | 0.5 → 10.0 µs | 0.7 µs |") {
		t.Errorf("no request log row in\n%s", md)
	}

	runs[1].OK = 99 // one answer of the log-off run was not a 200
	if got := summarize(sc, runs).Targets[len(s.Targets)-1]; got.Got != "0.92" || got.Pass {
		t.Errorf("target with a non-200 answer = %+v, want missed", got)
	}
	runs[1].OK = 100
	runs[3].RPS = 8000 // rep 2: 0.80
	runs[8].RPS = 7900 // rep 3: 0.88, the median of 0.95, 0.80 and 0.88
	s = summarize(sc, runs)
	got = s.Targets[len(s.Targets)-1]
	if got.Got != "0.88" || got.Pass {
		t.Errorf("target = %+v, want missed at 0.88", got)
	}
	md = (&report{Scenarios: []scenarioSummary{s}, Targets: s.Targets}).markdown()
	if !strings.Contains(md, "**non-streaming c=16 request log on ÷ off req/s** (want ≥ 0.90, got 0.88): every request becomes a row") {
		t.Errorf("the miss is not explained in\n%s", md)
	}

	// Which went first is read from the order the runs ran in, not assumed from
	// the repetition's number.
	runs[3], runs[4] = runs[4], runs[3]
	if l := summarize(sc, runs).Log; l.OffFirst < 0.877 || l.OffFirst > 0.878 || l.OnFirst != 0 {
		t.Errorf("with the log off first in every repetition: off first %.3f, on first %.3f; want 0.878 (the median of 0.95, 0.80, 0.88) and none", l.OffFirst, l.OnFirst)
	}

	if s := summarize(scenario{name: sc.name, conc: 16}, runs); s.Log != nil {
		t.Errorf("a scenario without a log target got a log summary: %+v", *s.Log)
	}
}
