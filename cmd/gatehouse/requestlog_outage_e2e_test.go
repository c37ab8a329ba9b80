package main

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestRequestLogThroughDatabaseOutage: under steady load through a gatehouse
// process, Postgres is stopped for 10 s and started again. Every request in the
// outage is served (the log never makes a request wait); afterwards the writer
// resumes by itself, and rows written + rows dropped = requests answered, exactly,
// with the table holding the rows written.
func TestRequestLogThroughDatabaseOutage(t *testing.T) {
	t.Parallel()
	cluster := storetest.Cluster(t)
	ctx := t.Context()
	if err := ensureDatabase(ctx, cluster.URL("postgres"), "gatehouse"); err != nil {
		t.Fatal(err)
	}
	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5"}})
	p := serveOnURL(t, cluster.URL("gatehouse"), store.GenerateSecretKey())
	createConnection(t, p, up.URL(), `{}`)
	var answered, failed atomic.Int64 // every request answered is logged, the first ones too
	waitFor(t, 10*time.Second, "the connection to load", func() bool {
		st, err := chat(ctx, p, "glm-5")
		if err == nil {
			answered.Add(1)
		}
		return err == nil && st == http.StatusOK
	})

	var (
		firstFailure atomic.Value
		stop         = make(chan struct{})
		load         sync.WaitGroup
	)
	for range 6 {
		load.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				st, err := chat(ctx, p, "glm-5")
				if err != nil || st != http.StatusOK {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, strconv.Itoa(st)+" "+errString(err))
				}
				if err == nil {
					answered.Add(1)
				}
			}
		})
	}
	stopLoad := sync.OnceFunc(func() { close(stop); load.Wait() })
	t.Cleanup(stopLoad)

	waitFor(t, 30*time.Second, "the first rows written", func() bool {
		return metricValue(t, p, "gatehouse_request_log_written_total") >= 50
	})
	if err := cluster.Stop(ctx); err != nil {
		t.Fatalf("stop Postgres: %v", err)
	}
	before := answered.Load()
	// The outage: 10 s (the scenario's length, not a synchronisation) and at
	// least 300 requests answered in it.
	outageEnds := time.Now().Add(10 * time.Second)
	waitFor(t, 120*time.Second, "10 s and 300 requests with Postgres away", func() bool {
		return time.Now().After(outageEnds) && answered.Load()-before >= 300
	})
	during := answered.Load() - before
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of the requests failed (first: %v): the request log must not make a request wait for the database", n, firstFailure.Load())
	}
	if err := cluster.Start(ctx); err != nil {
		t.Fatalf("start Postgres: %v", err)
	}
	writtenAtRestart := metricValue(t, p, "gatehouse_request_log_written_total")
	waitFor(t, 60*time.Second, "rows written again after the outage", func() bool {
		return metricValue(t, p, "gatehouse_request_log_written_total") > writtenAtRestart
	})
	stopLoad()
	total := answered.Load()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d requests failed (first: %v)", n, firstFailure.Load())
	}
	var written, dropped float64
	waitFor(t, 60*time.Second, "every answered request written or dropped", func() bool {
		written = metricValue(t, p, "gatehouse_request_log_written_total")
		dropped = metricValue(t, p, "gatehouse_request_log_dropped_total")
		return int64(written+dropped) >= total
	})
	if int64(written+dropped) != total {
		t.Fatalf("written %v + dropped %v != %d requests answered", written, dropped, total)
	}
	conn, err := pgx.Connect(ctx, cluster.URL("gatehouse"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var rows int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM requests`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != int64(written) {
		t.Errorf("rows in requests = %d, written_total = %v", rows, written)
	}
	t.Logf("%d requests (%d with Postgres away), %v written, %v dropped", total, during, written, dropped)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// metricValue is the sum of the samples of one metric on /metrics (the
// bootstrap API token reads it on the main listener).
func metricValue(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}
