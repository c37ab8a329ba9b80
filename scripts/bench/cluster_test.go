package main

import (
	"strings"
	"testing"
)

// TestCostOf: Redis's side of a run per request, from two INFO
// commandstats readings: the scripts' and transactions' time, the script
// calls and transactions less the
// shared-limits reads (two HGETALLs each), and the commands inside.
func TestCostOf(t *testing.T) {
	before := map[string]cmdStat{"evalsha": {calls: 10, usec: 100}, "zadd": {calls: 4}}
	after := map[string]cmdStat{
		"evalsha": {calls: 10 + 2*1000 + 5, usec: 100 + 30000}, // 1000 requests, 5 reads
		"zadd":    {calls: 4 + 4000}, "zrem": {calls: 4000}, "hgetall": {calls: 10},
		"info": {calls: 3},
	}
	c := costOf(before, after, 1000)
	if c.Us != 30 {
		t.Errorf("µs per request = %v, want 30", c.Us)
	}
	if c.RoundTrips != 2 {
		t.Errorf("round trips per request = %v, want 2 (2005 script calls, 5 of them shared-limits reads)", c.RoundTrips)
	}
	if c.Commands != 8.01 {
		t.Errorf("commands per request = %v, want 8.01", c.Commands)
	}
	if !strings.Contains(c.Mix, "zadd 4.00") || strings.Contains(c.Mix, "info") {
		t.Errorf("mix %q: want zadd 4.00 and no info", c.Mix)
	}
	// A release as a transaction: EXEC's time (its commands included) and
	// MULTI's count; EXEC counts as a round trip, MULTI does not.
	before["exec"], before["multi"] = cmdStat{calls: 1, usec: 5}, cmdStat{calls: 1}
	after["evalsha"] = cmdStat{calls: 10 + 1000 + 5, usec: 100 + 20000}
	after["exec"], after["multi"] = cmdStat{calls: 1 + 1000, usec: 5 + 4000}, cmdStat{calls: 1 + 1000, usec: 1000}
	if c := costOf(before, after, 1000); c.Us != 25 || c.RoundTrips != 2 || c.Commands != 8.01 {
		t.Errorf("with transactions: %v µs, %v round trips, %v commands per request; want 25, 2, 8.01", c.Us, c.RoundTrips, c.Commands)
	}
	if z := costOf(before, after, 0); z.RoundTrips != 0 || z.Us != 0 {
		t.Errorf("no requests: %+v, want zero", z)
	}
}

// TestClusterTargets: a round-trip count a hair above 2 is a miss, not
// rounded into a pass, and an unclean run fails its ratio.
func TestClusterTargets(t *testing.T) {
	sc := scenario{name: "non-streaming c=16", minCluster: 0.7}
	c := &clusterSummary{Ratio: 0.75, RedisUs: 24.9, RoundTrips: 2.004, Clean: true}
	got := c.targets(sc)
	if len(got) != 3 || !got[0].Pass || !got[1].Pass || got[2].Pass {
		t.Errorf("targets %+v: want ratio and Redis time met, round trips missed", got)
	}
	c.Clean = false
	if c.targets(sc)[0].Pass {
		t.Error("an unclean cluster run met its ratio target")
	}
}
