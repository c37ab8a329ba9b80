package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/store"
)

// requestLogSettings parses GATEHOUSE_REQUEST_LOG (on | off) and
// GATEHOUSE_REQUEST_LOG_RETENTION (days such as 7d, or a Go duration such as 36h).
func requestLogSettings(cfg *config) (on bool, retention time.Duration, err error) {
	switch strings.ToLower(strings.TrimSpace(cfg.RequestLog)) {
	case "on", "":
		on = true
	case "off":
	default:
		return false, 0, fmt.Errorf("GATEHOUSE_REQUEST_LOG %q: want on or off", cfg.RequestLog)
	}
	retention, err = parseRetention(cfg.RequestLogRet)
	if err != nil {
		return false, 0, fmt.Errorf("GATEHOUSE_REQUEST_LOG_RETENTION %q: want a number of days such as 7d, or a duration such as 36h, of at least 1h", cfg.RequestLogRet)
	}
	return on, retention, nil
}

func parseRetention(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return store.DefaultRequestLogRetention, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 3650 {
			return 0, fmt.Errorf("bad days")
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, err
		}
	}
	if d < time.Hour {
		return 0, fmt.Errorf("too short")
	}
	return d, nil
}

// requestLog is the running request log: the gateway's sink and the writer's
// goroutine, stopped after the HTTP server has drained (its last requests logged).
type requestLog struct {
	log     *store.RequestLog
	logger  *slog.Logger
	cancel  context.CancelFunc
	done    sync.WaitGroup
	stopped sync.Once
}

// startRequestLog starts the writer and registers its metrics on reg.
func startRequestLog(ctx context.Context, st *store.Store, retention time.Duration, reg prometheus.Registerer, logger *slog.Logger) *requestLog {
	l := &requestLog{log: st.NewRequestLog(store.RequestLogOptions{Retention: retention}), logger: logger}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gatehouse_request_log_dropped_total",
			Help: "Request log rows dropped: the buffer was full (the database away or slow) or the database refused them."},
			func() float64 { return float64(l.log.Stats().Dropped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gatehouse_request_log_written_total",
			Help: "Request log rows written to the database."},
			func() float64 { return float64(l.log.Stats().Written) }),
	)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	l.done.Go(func() { l.log.Run(runCtx) })
	return l
}

// stop flushes what is buffered, ends the writer and logs its counts (every row
// added was written or dropped). Idempotent.
func (l *requestLog) stop() {
	l.cancel()
	l.done.Wait()
	l.stopped.Do(func() {
		st := l.log.Stats()
		l.logger.Info("request log stopped", slog.Int64("added", st.Added), slog.Int64("written", st.Written),
			slog.Int64("dropped", st.Dropped))
	})
}

// Record hands the gateway's record to the writer's buffer, which copies it once
// (never waits): both are the request log's row (package requestlog).
func (l *requestLog) Record(r *gateway.RequestRecord) {
	l.log.Add(r)
}

// hostName names a single replica in the request log.
func hostName() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "gatehouse"
}
