package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/alert"
	"github.com/gatehouse-dev/gatehouse/gateway/wsbridge"
	"github.com/gatehouse-dev/gatehouse/handlers"
	"github.com/gatehouse-dev/gatehouse/store"
)

// cutGrace is how long the requests cut when the shutdown timeout has run out get to
// send their last words (a stream's SSE error event) before their connections close.
const cutGrace = 2 * time.Second

// traceFlushGrace bounds the export of the spans still buffered at exit.
const traceFlushGrace = 5 * time.Second

// GC defaults of a serving process when GOGC / GOMEMLIMIT are not set: a proxy's
// live heap is small and its garbage is per-request, so collecting at 5× the live
// heap instead of 2× saves CPU on every request (docs/BENCHMARKS.md), and the soft
// memory limit makes the collector work harder instead of letting a burst of queued
// requests grow the heap fivefold.
const (
	defaultGCPercent   = 400
	defaultMemoryLimit = 512 << 20
)

// tuneGC applies the GC defaults for whichever of GOGC and GOMEMLIMIT the
// environment leaves unset (the runtime has already applied those that are set).
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cfg config
	fs := newFlagSet("serve", &cfg, getenv, stderr)
	addServeFlags(fs, &cfg, getenv)
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger, err := newLogger(cfg.LogLevel, stderr)
	if err != nil {
		return err
	}
	budgetClosed, err := budgetFailsClosed(&cfg)
	if err != nil {
		return err
	}
	if _, _, err := clusterSettings(&cfg); err != nil {
		return err
	}
	trusted, err := handlers.ParseTrustedProxies(cfg.TrustedProxies)
	if err != nil {
		return fmt.Errorf("GATEHOUSE_TRUSTED_PROXIES: %w", err)
	}
	deny, err := upstreamDeny(cfg.UpstreamDeny)
	if err != nil {
		return err
	}
	shutdownTimeout, bodyReadTimeout, err := serveTimeouts(&cfg)
	if err != nil {
		return err
	}
	maxBodyInFlight, err := parseByteSize("GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT", cfg.MaxBodyInFlight)
	if err != nil {
		return err
	}
	logOn, logRetention, err := requestLogSettings(&cfg)
	if err != nil {
		return err
	}
	if !gateway.ValidOutbound(cfg.Outbound) {
		return fmt.Errorf("GATEHOUSE_OUTBOUND %q: want %s or %s", cfg.Outbound, gateway.OutboundNetHTTP, gateway.OutboundFastHTTP)
	}
	tuneGC(getenv)
	var shared *clusterMode
	if cfg.RedisURL != "" {
		// Cluster mode: the gates' slots live in Redis, so a cap holds across every
		// replica. Closed last (deferred first): after the HTTP server has drained and
		// the config loader has stopped.
		if shared, err = startCluster(ctx, &cfg, logger); err != nil {
			return err
		}
		defer shared.close(context.WithoutCancel(ctx), logger)
	}
	if cfg.Demo && cfg.DatabaseURL != "" {
		logger.Info("demo mode with GATEHOUSE_DATABASE_URL: using that database instead of a managed one")
	}

	db, err := openDatabase(ctx, &cfg, false, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := db.Close(context.WithoutCancel(ctx)); err != nil {
			logger.Error("stop database", slog.Any("error", err))
		}
	}()
	st := db.store

	var bg sync.WaitGroup
	defer bg.Wait()
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	if db.cluster != nil {
		// A managed Postgres that exits under us is started again; meanwhile the store
		// answers ErrUnavailable (503) and the gateway keeps its last config.
		bg.Go(func() { db.cluster.Supervise(runCtx) })
	}

	// Listen before the demo starts, so that its hints name the address bound (a port
	// of 0 becomes a real one); requests wait in the backlog until Serve below.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	defer ln.Close() // Serve closes it; this covers the returns before Serve
	var metricsLn net.Listener
	if cfg.MetricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return fmt.Errorf("GATEHOUSE_METRICS_ADDR: listen on %s: %w", cfg.MetricsAddr, err)
		}
		defer metricsLn.Close()
	}

	// The admin and bootstrap secrets once both listeners are bound: a start that fails
	// on a taken port has created nothing, so the next start still prints (or takes from
	// GATEHOUSE_ADMIN_PASSWORD) a password that works.
	if err := bootstrap(ctx, st, &cfg, stdout); err != nil {
		return err
	}

	if cfg.Demo {
		demo, err := startDemo(runCtx, st, &cfg, ln.Addr().String(), stdout, logger)
		if err != nil {
			return err
		}
		defer demo.Close()
	}

	stopLog := func() {}
	var droppedRows func() int64 // the request log's dropped rows, nil when it is off
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	loader := newConfigLoader(st, logger)
	tp, stopTracing, err := startTracing(ctx, getenv, logger)
	if err != nil {
		return err
	}
	defer func() { // after the HTTP server's shutdown: the last spans have ended
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushGrace)
		defer cancel()
		if err := stopTracing(fctx); err != nil {
			logger.Warn("flush traces", slog.Any("error", err))
		}
	}()
	// One throttle of failed bearer authentication for /v1, /api/v1 and /metrics.
	authThrottle := handlers.NewAuthThrottle(trusted, nil)
	gwOpts := gateway.Options{Logger: logger, Registerer: reg, Authenticate: loader.authenticate,
		AuthThrottle: authThrottle,
		Usage:        usageCounter{st: st}, KeyUsage: keyUsageCounter{st: st}, TracerProvider: tp, Outbound: cfg.Outbound,
		MaxBodyBytesInFlight: maxBodyInFlight, UpstreamDeny: deny.Deny}
	ready := loader.ready
	if shared != nil {
		gwOpts.Admission = shared.ctrl
		gwOpts.SharedLimits = shared.limits
		// Replicas cannot see each other's memory: with Postgres away, day and
		// money budgets refuse unless GATEHOUSE_BUDGET_FAIL=open.
		gwOpts.BudgetFailClosed = budgetClosed
		gwOpts.SharedAffinity = shared.affinity
		gwOpts.SharedSessions = shared.limits
		ready = func() (bool, string) {
			ok, detail := loader.ready()
			return ok, detail + "; " + shared.status()
		}
	}
	// From the shutdown signal on, /readyz answers 503 so that a balancer stops sending.
	var stopping atomic.Bool
	loaded := ready
	ready = func() (bool, string) {
		if stopping.Load() {
			return false, "shutting down"
		}
		return loaded()
	}
	gwOpts.Replica = hostName()
	if shared != nil {
		gwOpts.Replica = shared.id
	}
	if logOn {
		// Stopped after the HTTP server has drained (below), so the last requests are
		// logged; the deferred stop covers the early returns.
		reqlog := startRequestLog(ctx, st, logRetention, reg, logger)
		defer reqlog.stop()
		gwOpts.RequestLog = reqlog
		stopLog = reqlog.stop
		droppedRows = func() int64 { return reqlog.log.Stats().Dropped }
	}
	notifier := alert.New(runCtx, alert.Options{Logger: logger, Registerer: reg, Claims: alertClaims{st: st},
		Open: st.OpenAlertSecret, Deny: deny.Deny,
		DashboardURL: cmp.Or(getenv("GATEHOUSE_PUBLIC_URL"), "http://"+ln.Addr().String())})
	defer notifier.Close() // after the gateway's Close: its last events are queued
	gwOpts.Alerts = notifier
	gw := gateway.New(gwOpts)
	defer gw.Close()
	loader.gw = gw
	if err := loader.reload(ctx); err != nil {
		logger.Warn("initial config load failed; retrying in the background", slog.Any("error", err))
	}
	bg.Go(func() { loader.run(runCtx) })
	watch := &alertWatch{emit: notifier.Emit, snapshot: gw.Snapshot}
	if shared != nil {
		watch.degraded = shared.ctrl.Degraded
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gatehouse_cluster_degraded",
			Help: "Cluster mode: 1 while Redis is away (replicas run in their fail mode), else 0."},
			func() float64 {
				if shared.ctrl.Degraded() {
					return 1
				}
				return 0
			}))
	}
	watch.dropped = droppedRows
	bg.Go(func() { watch.run(runCtx) })

	// The Responses API's WebSocket mode (Codex) in front of the gateway: each turn is
	// one gateway request.
	bridge := wsbridge.New(gw, wsbridge.Options{Registerer: reg, Logger: logger})
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	srv := handlers.New(handlers.Deps{
		Store:           st,
		Logger:          logger,
		SecretKey:       db.secretKey,
		Gateway:         bridge,
		Gates:           gatesView{gw: gw, cluster: shared},
		Sessions:        gw,
		Alerts:          alertSource{n: notifier, st: st},
		Prober:          prober{gw: gw},
		Metrics:         metrics,
		Ready:           ready,
		BodyReadTimeout: bodyReadTimeout,
		TrustedProxies:  trusted,
		AuthThrottle:    authThrottle,
		UpstreamDeny:    deny,
		RequestLogOff:   !logOn,
	})
	// Every request's context derives from base: when the shutdown timeout has run out,
	// cancelling it with gateway.ErrShuttingDown ends streams with an SSE error event.
	base, cutRequests := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cutRequests(nil)
	errorLog := slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	httpSrv := &http.Server{
		Addr:              cfg.Addr,
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          errorLog,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	servers := []*http.Server{httpSrv}
	logger.Info("gatehouse serving", slog.String("addr", ln.Addr().String()))
	fmt.Fprintf(stdout, "Gatehouse is listening on http://%s\n", ln.Addr())

	serveErr := make(chan error, 2)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	if metricsLn != nil {
		// Only /metrics, without auth: for a scraper on a private network.
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics)
		metricsSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, ErrorLog: errorLog}
		servers = append(servers, metricsSrv)
		logger.Info("gatehouse metrics", slog.String("addr", metricsLn.Addr().String()))
		fmt.Fprintf(stdout, "Gatehouse metrics on http://%s/metrics\n", metricsLn.Addr())
		go func() { serveErr <- metricsSrv.Serve(metricsLn) }()
	}
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	// Graceful shutdown (DESIGN.md, Processes): readiness off; the queued requests get
	// 503 SHUTTING_DOWN now (waiting out a shutdown helps nobody); the listeners stop
	// accepting while in-flight requests and streams finish within the timeout; then
	// whatever still runs is cut, a stream with an SSE error event first.
	logger.Info("shutting down", slog.Duration("timeout", shutdownTimeout))
	stopping.Store(true)
	gw.Drain()
	bridge.Shutdown()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	var stopped sync.WaitGroup
	for _, hs := range servers {
		stopped.Go(func() {
			if err := hs.Shutdown(shutCtx); err == nil {
				return
			}
			logger.Warn("graceful shutdown timed out; cutting the requests still running",
				slog.Duration("timeout", shutdownTimeout))
			cutRequests(gateway.ErrShuttingDown)
			cutCtx, cancelCut := context.WithTimeout(context.WithoutCancel(ctx), cutGrace)
			defer cancelCut()
			if err := hs.Shutdown(cutCtx); err != nil {
				// Permits are released as the remaining handlers return.
				_ = hs.Close()
			}
		})
	}
	stopped.Wait()
	// WebSockets are no longer the servers' once upgraded: wait for their last turns
	// here, within the same bound, then cut them like the requests above.
	if err := bridge.Wait(shutCtx); err != nil {
		cutRequests(gateway.ErrShuttingDown)
		cutCtx, cancelCut := context.WithTimeout(context.WithoutCancel(ctx), cutGrace)
		_ = bridge.Wait(cutCtx)
		cancelCut()
	}
	stopLog()
	cancelRun()
	return nil
}

// bootstrap makes sure the demo admin and the bootstrap API token and client key exist.
func bootstrap(ctx context.Context, st *store.Store, cfg *config, stdout io.Writer) error {
	if cfg.Demo {
		password := cfg.AdminPassword
		generated := password == ""
		if generated {
			password = randomPassword()
		}
		created, err := st.EnsureUser(ctx, cfg.AdminEmail, password, store.RoleAdmin)
		if err != nil {
			return fmt.Errorf("demo admin: %w", err)
		}
		switch {
		case created && generated:
			fmt.Fprintf(stdout, "Admin user: %s  password: %s  (shown once; set GATEHOUSE_ADMIN_PASSWORD to choose it)\n", cfg.AdminEmail, password)
		case created:
			fmt.Fprintf(stdout, "Admin user: %s (password from GATEHOUSE_ADMIN_PASSWORD)\n", cfg.AdminEmail)
		default:
			// GATEHOUSE_ADMIN_PASSWORD only chooses the first password: say how to set another.
			fmt.Fprintf(stdout, "Admin user: %s (exists already; its password is unchanged: gatehouse user passwd --email %s sets a new one)\n", cfg.AdminEmail, cfg.AdminEmail)
		}
	}
	if cfg.BootstrapAPIToken != "" {
		if _, err := st.EnsureAPIToken(ctx, "bootstrap", cfg.BootstrapAPIToken, store.RoleAdmin); err != nil {
			return fmt.Errorf("GATEHOUSE_BOOTSTRAP_API_TOKEN: %w", err)
		}
	}
	if cfg.BootstrapClientKey != "" {
		if _, err := st.EnsureClientKey(ctx, "bootstrap", cfg.BootstrapClientKey); err != nil {
			return fmt.Errorf("GATEHOUSE_BOOTSTRAP_CLIENT_KEY: %w", err)
		}
	}
	return nil
}
