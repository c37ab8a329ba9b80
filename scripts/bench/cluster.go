package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster mode: the same build as a one-replica cluster on a
// redis-server of the harness's own (unix socket, no persistence), with its
// own managed Postgres, measured in the same repetitions as the single
// process. DESIGN.md "Cluster mode: cost per request" sets the targets.
const (
	pathCluster = "cluster"
	// maxRedisUsPerReq: Redis time per request (INFO commandstats, the
	// usec of the scripts and transactions, their commands included).
	maxRedisUsPerReq = 25
	// maxRoundTripsPerReq: script calls (EVALSHA/EVAL) and EXECs per
	// request. The coalescer sends the transactions of the calls made at the
	// same moment as one MULTI/EXEC, so under load this is below the two
	// transactions (admit, release) each request still makes.
	maxRoundTripsPerReq = 2
)

// startRedis starts redis-server on a unix socket in dir, logging to out,
// and waits until it answers PING.
func startRedis(ctx context.Context, dir, out string) (*child, string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "", errors.New("bench: redis-server not found (apt-get install redis-server), needed for the cluster-mode runs; -cluster=false skips them")
	}
	sock := filepath.Join(dir, "redis.sock")
	logf, err := os.Create(filepath.Join(out, "redis.log"))
	if err != nil {
		return nil, "", fmt.Errorf("bench: redis log: %w", err)
	}
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "notice")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, "", fmt.Errorf("bench: start redis-server: %w", err)
	}
	c := &child{name: "redis-server", cmd: cmd, stop: syscall.SIGTERM, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pingSocket(sock) == nil {
			return c, sock, nil
		}
		select {
		case <-c.done:
			return nil, "", fmt.Errorf("bench: redis-server exited before it was ready (%v); see %s", c.err, filepath.Join(out, "redis.log"))
		case <-ctx.Done():
			_ = c.shutdown(5 * time.Second)
			return nil, "", ctx.Err()
		case <-time.After(20 * time.Millisecond): // polling a child's socket
		}
		if time.Now().After(deadline) {
			_ = c.shutdown(5 * time.Second)
			return nil, "", errors.New("bench: redis-server did not answer PING within 10s")
		}
	}
}

func pingSocket(sock string) error {
	conn, err := net.DialTimeout("unix", sock, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// startCluster starts redis-server and a cluster-mode Gatehouse on it.
func (e *env) startCluster(ctx context.Context, o options, tmp, out, bin string, childEnv []string) error {
	rs, sock, err := startRedis(ctx, tmp, out)
	if err != nil {
		return err
	}
	e.redis = rs
	e.rdb = redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
	// A long lease TTL keeps the heartbeat (every TTL/3) out of the measured
	// windows: it is not a per-request cost.
	env := append(slices.Clone(childEnv), "GATEHOUSE_CLUSTER_LEASE_TTL=30m")
	gh, url, err := e.startGatehouse(ctx, o, "gatehouse-cluster", filepath.Join(tmp, "data-cluster"), "unix://"+sock, o.logOn(), out, bin, env)
	if gh != nil {
		e.cluster, e.clusterURL = gh, url
	}
	return err
}

// stopCluster stops what startCluster started, Gatehouse first.
func (e *env) stopCluster(tmp string) error {
	var errs []error
	if e.cluster != nil {
		errs = append(errs, e.cluster.shutdown(30*time.Second))
		errs = append(errs, removeOutsideCluster(filepath.Join(tmp, "data-cluster"), tmp))
	}
	if e.rdb != nil {
		_ = e.rdb.Close()
	}
	if e.redis != nil {
		errs = append(errs, e.redis.shutdown(10*time.Second))
	}
	return errors.Join(errs...)
}

// cmdStat is one line of INFO commandstats.
type cmdStat struct{ calls, usec int64 }

// redisStats reads INFO commandstats by command name.
func (e *env) redisStats(ctx context.Context) map[string]cmdStat {
	out := make(map[string]cmdStat)
	info, err := e.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return out
	}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var s cmdStat
		for f := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				s.calls = n
			case "usec":
				s.usec = n
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = s
	}
	return out
}

// redisCost is Redis's side of a measured run, per request.
type redisCost struct {
	// Us is the time inside script calls (EVALSHA/EVAL) and transactions
	// (MULTI/EXEC: the release), their commands included, RoundTrips the
	// script calls and transactions less the shared-limits reads
	// (peek.lua, at most one per connection per 250 ms, not per request; it
	// is the only script that runs HGETALL, twice a call), Commands the
	// commands the scripts ran (and any other data command).
	Us, RoundTrips, Commands float64
	// Mix is the commands per request by name, "zadd 4.00 …".
	Mix string
}

// costOf is Redis's side of requests requests between two readings.
func costOf(before, after map[string]cmdStat, requests uint64) redisCost {
	var c redisCost
	if requests == 0 {
		return c
	}
	n := float64(requests)
	var mix []string
	for name, a := range after {
		d := cmdStat{a.calls - before[name].calls, a.usec - before[name].usec}
		if d.calls == 0 {
			continue
		}
		switch name {
		case "evalsha", "eval", "evalsha_ro", "eval_ro", "exec":
			// EXEC's time includes the commands it ran, as a script's does.
			c.Us += float64(d.usec) / n
			c.RoundTrips += float64(d.calls) / n
			mix = append(mix, fmt.Sprintf("%s %.2f", name, float64(d.calls)/n))
		case "multi":
			c.Us += float64(d.usec) / n
		case "info", "hello", "client|setinfo", "client|setname", "subscribe", "unsubscribe", "ping":
		default:
			c.Commands += float64(d.calls) / n
			mix = append(mix, fmt.Sprintf("%s %.2f", name, float64(d.calls)/n))
		}
	}
	if d := after["hgetall"].calls - before["hgetall"].calls; d > 0 {
		c.RoundTrips -= float64(d) / 2 / n
	}
	slices.Sort(mix)
	c.Mix = strings.Join(mix, ", ")
	return c
}

// clusterSummary is the medians of a scenario's cluster-mode runs, against
// the single-process runs of the same repetitions.
type clusterSummary struct {
	RPS         float64 `json:"requestsPerSecond"`
	Ratio       float64 `json:"ratioToSingle"` // median of per-repetition cluster ÷ single
	P50Ms       float64 `json:"p50Ms"`
	CPUPerReqUs float64 `json:"gatehouseCpuPerRequestUs"`
	SingleCPUUs float64 `json:"singleGatehouseCpuPerRequestUs"`
	RedisUs     float64 `json:"redisUsPerRequest"`
	RoundTrips  float64 `json:"redisScriptCallsPerRequest"`
	Commands    float64 `json:"redisCommandsPerRequest"`
	RedisCPUUs  float64 `json:"redisCpuPerRequestUs"`
	Mix         string  `json:"redisCommandMix"` // of the last repetition
	Clean       bool    `json:"clean"`
}

func summarizeCluster(sc scenario, runs []runRecord, byRep map[int]map[string]runRecord) *clusterSummary {
	var rps, p50, cpu, single, us, rt, cmds, rcpu, ratio []float64
	c := &clusterSummary{Clean: true}
	last := 0
	for _, r := range runs {
		if r.Scenario != sc.name || r.Path != pathCluster {
			continue
		}
		if r.OK != int(r.Requests) || r.Requests == 0 {
			c.Clean = false
		}
		rps, p50, cpu = append(rps, r.RPS), append(p50, r.P50Ms), append(cpu, r.GatehouseCPUUs)
		us, rt, cmds, rcpu = append(us, r.RedisUs), append(rt, r.RedisRoundTrips), append(cmds, r.RedisCommands), append(rcpu, r.RedisCPUUs)
		if r.Rep >= last {
			last, c.Mix = r.Rep, r.RedisMix
		}
		if g, ok := byRep[r.Rep][pathGatehouse]; ok && g.RPS > 0 {
			ratio = append(ratio, r.RPS/g.RPS)
			single = append(single, g.GatehouseCPUUs)
		}
	}
	if len(rps) == 0 {
		return nil
	}
	c.RPS, c.P50Ms, c.CPUPerReqUs, c.SingleCPUUs = median(rps), median(p50), median(cpu), median(single)
	c.RedisUs, c.RoundTrips, c.Commands, c.RedisCPUUs = median(us), median(rt), median(cmds), median(rcpu)
	c.Ratio = median(ratio)
	return c
}

// targets are DESIGN.md's cluster-mode targets for one scenario's runs.
func (c *clusterSummary) targets(sc scenario) []targetCheck {
	return []targetCheck{
		{What: sc.name + " cluster ÷ single req/s", Want: fmt.Sprintf("≥ %.2f", sc.minCluster),
			Got: fmt.Sprintf("%.2f", c.Ratio), Pass: c.Clean && c.Ratio >= sc.minCluster},
		{What: sc.name + " cluster Redis time per request", Want: fmt.Sprintf("≤ %d µs", maxRedisUsPerReq),
			Got: fmt.Sprintf("%.1f µs", c.RedisUs), Pass: c.RedisUs <= maxRedisUsPerReq},
		{What: sc.name + " cluster round trips per request", Want: fmt.Sprintf("≤ %d", maxRoundTripsPerReq),
			Got: fmt.Sprintf("%.2f", c.RoundTrips), Pass: c.RoundTrips <= maxRoundTripsPerReq},
	}
}

// writeCluster renders the cluster-mode table.
func (r *report) writeCluster(b *strings.Builder) {
	var rows []scenarioSummary
	for _, s := range r.Scenarios {
		if s.Cluster != nil {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nCluster mode (the same build, one replica on a local redis-server over a unix socket; medians):\n\n")
	b.WriteString("| scenario | single req/s | cluster req/s | cluster ÷ single | Gatehouse CPU/req single → cluster | Redis µs/req | script calls + EXECs/req | Redis commands/req | redis-server CPU/req |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range rows {
		c := s.Cluster
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.2f | %.1f → %.1f µs | %.1f | %.2f | %.1f | %.1f µs |\n",
			s.Name, s.GatehouseRPS, c.RPS, c.Ratio, c.SingleCPUUs, c.CPUPerReqUs, c.RedisUs, c.RoundTrips, c.Commands, c.RedisCPUUs)
	}
	for _, s := range rows {
		fmt.Fprintf(b, "\nRedis commands per request, %s: %s\n", s.Name, s.Cluster.Mix)
	}
}

// writeClusterProfile says what remains of a missed cluster target.
func (r *report) writeClusterProfile(b *strings.Builder, what string) {
	for _, s := range r.Scenarios {
		if s.Cluster != nil && strings.HasPrefix(what, s.Name+" ") {
			fmt.Fprintf(b, "  What Redis runs per request: %s; Gatehouse CPU per request %.1f µs single → %.1f µs cluster; redis-server %.1f µs CPU per request.\n",
				s.Cluster.Mix, s.Cluster.SingleCPUUs, s.Cluster.CPUPerReqUs, s.Cluster.RedisCPUUs)
			if len(r.ClusterTopCPU) > 0 && !r.clusterTopShown {
				r.clusterTopShown = true
				fmt.Fprintf(b, "  CPU profile of the cluster-mode Gatehouse (non-streaming c=16): %s; top (flat):\n", r.ClusterProfileNote)
				for _, l := range r.ClusterTopCPU {
					fmt.Fprintf(b, "    %s\n", l)
				}
			}
			return
		}
	}
}

// clusterInTheWay says what keeps a cluster-mode target out of reach.
func clusterInTheWay(what string) string {
	switch {
	case strings.Contains(what, "round trips"):
		return "a newcomer that finds somebody waiting (or a full gate) runs admit.lua and then acquire.lua; a run with no cap binding should not see it: look for a heartbeat or shared-limits read counted in the window."
	case strings.Contains(what, "Redis time"):
		return "Redis time is wall time inside the scripts and transactions: on a loaded 2-core machine redis-server is descheduled mid-script and the stall counts; the per-call floor is EVALSHA's own cost (several µs, the admit script's) or EXEC's (about 1 µs, the release), plus ~0.3 µs per argument and per command (docs/BENCHMARKS.md, \"Cluster mode\")."
	default:
		return "every request waits for the admit's Redis round trip (shared with the calls made at the same moment; a non-streaming answer goes out before the release's), which the single process does not make, the Gatehouse CPU of both transactions (go-redis's pipeline, the hand-offs) comes on top, and redis-server's CPU comes out of the same 2 cores as Gatehouse, the load generator and the fake upstream."
	}
}
