package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/store"
)

const (
	// reloadDebounce merges a burst of NOTIFYs into one reload.
	reloadDebounce = 50 * time.Millisecond
	// fullReloadEvery is the safety net for a notification lost while reconnecting.
	fullReloadEvery = 30 * time.Second
)

// configLoader keeps the gateway's configuration and the client-key set (a
// store.KeyCache) in step with the database: a full load at start, one per NOTIFY
// gatehouse_config (debounced), one after every reconnect of the listener and one
// every fullReloadEvery. While the database is away the last good snapshot stays in
// force.
type configLoader struct {
	st  *store.Store
	gw  *gateway.Gateway
	log *slog.Logger

	// keys is the client-key set the gateway authenticates against.
	keys     *store.KeyCache[gateway.ClientKey]
	loadedAt atomic.Int64 // unix nanos of the last successful load
	failing  atomic.Bool  // the last load attempt failed

	mu sync.Mutex // serialises reloads
}

// newConfigLoader returns a loader over st.
func newConfigLoader(st *store.Store, log *slog.Logger) *configLoader {
	return &configLoader{st: st, log: log, keys: store.NewKeyCache(st, nil, gatewayKey)}
}

// gatewayKey is a stored client key as the gateway needs it, its limits read
// fail-open (the config load logs what is malformed).
func gatewayKey(k store.ClientKey) gateway.ClientKey {
	l, _ := limits.NormalizeClientKeyLimits(k.Limits)
	return gateway.ClientKey{ID: k.ID, Name: k.Name, Enabled: k.Enabled, Limits: l}
}

// authenticate returns the client key of secret, disabled ones included (the
// gateway's Options.Authenticate).
func (l *configLoader) authenticate(ctx context.Context, secret string) (gateway.ClientKey, bool) {
	return l.keys.Authenticate(ctx, secret)
}

// reload loads everything and applies it.
func (l *configLoader) reload(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Connections, settings and client keys come from one snapshot.
	cfg, err := l.st.LoadGatewayConfig(ctx)
	if err == nil {
		err = l.keys.Load(ctx)
	}
	if err != nil {
		l.failing.Store(true)
		return fmt.Errorf("reload config: %w", err)
	}
	l.gw.Apply(l.gatewayConfig(cfg, cfg.ClientKeys))
	l.loadedAt.Store(time.Now().UnixNano())
	l.failing.Store(false)
	// Today's rpd/tpd counts: right after a restart, and in step with other
	// replicas' traffic on every reload. The store stays the judge at
	// dispatch, so a failure here only leaves the dashboard's budgets stale.
	if err := l.gw.LoadUsage(ctx); err != nil {
		l.log.Warn("load today's usage counts", slog.Any("error", err))
	}
	return nil
}

// gatewayConfig turns store rows into the gateway's snapshot. Stored overrides are read
// fail-open: a malformed part means "no cap" and a warning, never a failed load.
func (l *configLoader) gatewayConfig(cfg store.GatewayConfig, keys []store.ClientKey) gateway.Config {
	settings, warnings := limits.NormalizeSettings(cfg.Settings.Data)
	for _, w := range warnings {
		l.log.Warn("stored settings are malformed; ignoring the bad part", slog.String("problem", w))
	}
	out := gateway.Config{Settings: settings, Connections: make([]gateway.Connection, 0, len(cfg.Connections))}
	for _, c := range cfg.Connections {
		ov, warnings := limits.Normalize(c.RateLimitOverrides)
		for _, w := range warnings {
			l.log.Warn("stored rate-limit overrides are malformed; ignoring the bad part",
				slog.String("connection", c.Name), slog.String("problem", w))
		}
		out.Connections = append(out.Connections, gateway.Connection{
			ID: c.ID, Name: c.Name, Provider: c.Provider, APIStyle: c.APIStyle, BaseURL: c.BaseURL,
			APIKey: c.APIKey, Models: c.Models, Priority: c.Priority, Enabled: c.Enabled, Overrides: ov,
		})
	}
	for _, k := range keys {
		lim, warnings := limits.NormalizeClientKeyLimits(k.Limits)
		for _, w := range warnings {
			l.log.Warn("stored client key limits are malformed; ignoring the bad part",
				slog.String("client_key", k.Name), slog.String("problem", w))
		}
		out.ClientKeys = append(out.ClientKeys, gateway.ClientKey{ID: k.ID, Name: k.Name, Enabled: k.Enabled, Limits: lim})
	}
	return out
}

// run keeps the configuration current until ctx is done.
func (l *configLoader) run(ctx context.Context) {
	kick := make(chan struct{}, 1)
	trigger := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = l.st.ListenConfig(ctx, trigger) })
	defer wg.Wait()

	ticker := time.NewTicker(fullReloadEvery)
	defer ticker.Stop()
	// The keys' last use is written with every reload and once more on the way
	// out, so lastUsedAt lags a request by at most fullReloadEvery.
	defer l.flushKeyUse(context.WithoutCancel(ctx))
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-kick:
			// Debounce: a burst of writes becomes one reload.
			t := time.NewTimer(reloadDebounce)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		l.flushKeyUse(ctx)
		if err := l.reload(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("config reload failed; serving the last good config", slog.Any("error", err))
		}
	}
}

// flushKeyUse writes the last use of the client keys that authenticated since
// the previous flush (store.KeyCache.FlushUsed); a failure keeps them for the next.
func (l *configLoader) flushKeyUse(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := l.keys.FlushUsed(ctx); err != nil && ctx.Err() == nil {
		l.log.Warn("record the client keys' last use", slog.Any("error", err))
	}
}

// ready reports readiness for /readyz: ready once a config has been loaded, also while
// the database is away (the detail says how stale the config is).
func (l *configLoader) ready() (bool, string) {
	at := l.loadedAt.Load()
	if at == 0 {
		return false, "not ready: no gateway config loaded yet"
	}
	age := time.Since(time.Unix(0, at)).Round(time.Second)
	if l.failing.Load() {
		return true, fmt.Sprintf("ready: database unreachable; serving the config loaded %s ago", age)
	}
	return true, fmt.Sprintf("ready: config loaded %s ago", age)
}

// gatesView is the live view the handlers read: the gateway's snapshot and, in
// cluster mode (cluster non-nil), the cluster's state.
type gatesView struct {
	gw      *gateway.Gateway
	cluster *clusterMode
}

func (v gatesView) Snapshot() live.Snapshot {
	snap := v.gw.Snapshot()
	if v.cluster != nil {
		snap.Cluster = v.cluster.ctrl.Live()
	}
	return snap
}

func (v gatesView) ResetHealth(ctx context.Context, id string) bool {
	return v.gw.ResetHealth(ctx, id)
}

// usageCounter adapts the store's usage_daily table to gateway.UsageCounter: the
// source of truth for rpd and tpd, shared by every replica.
type usageCounter struct{ st *store.Store }

func (u usageCounter) CountRequest(ctx context.Context, connID string, day time.Time, limit int64) (int64, bool, error) {
	n, ok, err := u.st.TryCountRequest(ctx, connID, day, limit)
	return n, ok, usageErr(err)
}

func (u usageCounter) AddUsage(ctx context.Context, connID string, day time.Time, requests, tokens int64) (gateway.DayUsage, error) {
	t, err := u.st.AddUsageTotals(ctx, connID, day, requests, tokens)
	return dayUsage(t), usageErr(err)
}

func (u usageCounter) ReserveTokens(ctx context.Context, connID string, day time.Time, tokens, limit int64) (int64, bool, error) {
	n, ok, err := u.st.ReserveTokens(ctx, connID, day, tokens, limit)
	return n, ok, usageErr(err)
}

func (u usageCounter) DayUsage(ctx context.Context, day time.Time) (map[string]gateway.DayUsage, error) {
	return dayUsages(u.st.UsageForDay(ctx, day))
}

// keyUsageCounter adapts the store's usage_daily_keys table to gateway.UsageCounter,
// keyed by client key id: the source of truth for a key's tpd. Keys have no rpd, so
// CountRequest only counts.
type keyUsageCounter struct{ st *store.Store }

func (u keyUsageCounter) CountRequest(ctx context.Context, keyID string, day time.Time, _ int64) (int64, bool, error) {
	t, err := u.st.AddClientKeyUsage(ctx, keyID, day, 1, 0)
	return t.Requests, err == nil, usageErr(err)
}

func (u keyUsageCounter) AddUsage(ctx context.Context, keyID string, day time.Time, requests, tokens int64) (gateway.DayUsage, error) {
	t, err := u.st.AddClientKeyUsage(ctx, keyID, day, requests, tokens)
	return dayUsage(t), usageErr(err)
}

func (u keyUsageCounter) ReserveTokens(ctx context.Context, keyID string, day time.Time, tokens, limit int64) (int64, bool, error) {
	n, ok, err := u.st.ReserveClientKeyTokens(ctx, keyID, day, tokens, limit)
	return n, ok, usageErr(err)
}

func (u keyUsageCounter) DayUsage(ctx context.Context, day time.Time) (map[string]gateway.DayUsage, error) {
	return dayUsages(u.st.ClientKeyUsageForDay(ctx, day))
}

// dayUsage is a store.Usage as the gateway counts it.
func dayUsage(u store.Usage) gateway.DayUsage {
	return gateway.DayUsage{Requests: u.Requests, Tokens: u.Tokens}
}

// dayUsages is a day's store.Usage by id as the gateway counts it.
func dayUsages(m map[string]store.Usage, err error) (map[string]gateway.DayUsage, error) {
	if err != nil {
		return nil, err
	}
	out := make(map[string]gateway.DayUsage, len(m))
	for id, v := range m {
		out[id] = dayUsage(v)
	}
	return out, nil
}

// ReserveSpend reserves a client key's money (key_spend_reserved): with this,
// keyUsageCounter is the gateway's ratelimit.SpendCounter too.
func (u keyUsageCounter) ReserveSpend(ctx context.Context, keyID string, at time.Time, micros, dayLimit, monthLimit int64) (ratelimit.Spend, ratelimit.SpendPeriod, error) {
	sp, p, err := u.st.ReserveClientKeySpend(ctx, keyID, at, micros, dayLimit, monthLimit)
	blocked := ratelimit.SpendFits
	switch p {
	case store.SpendDay:
		blocked = ratelimit.SpendDay
	case store.SpendMonth:
		blocked = ratelimit.SpendMonth
	}
	return ratelimit.Spend{Day: sp.Day, Month: sp.Month}, blocked, usageErr(err)
}

var _ ratelimit.SpendCounter = keyUsageCounter{}

func (u keyUsageCounter) AddSpend(ctx context.Context, keyID string, at time.Time, micros int64) (ratelimit.Spend, error) {
	sp, err := u.st.AddClientKeySpend(ctx, keyID, at, micros)
	return ratelimit.Spend{Day: sp.Day, Month: sp.Month}, usageErr(err)
}

func (u keyUsageCounter) Spend(ctx context.Context, keyID string, at time.Time) (ratelimit.Spend, error) {
	sp, err := u.st.ClientKeyBudgetSpend(ctx, keyID, at)
	return ratelimit.Spend{Day: sp.Day, Month: sp.Month}, usageErr(err)
}

// usageErr translates a store error for the budgets once: unreachable
// (ErrUnavailable) is ratelimit.ErrStoreUnavailable, the only error that
// switches them to memory; a row that is not there (a connection or key
// deleted meanwhile) is ratelimit.ErrUnknownID, settled quietly; anything
// else fails the one request.
func usageErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrUnavailable):
		return fmt.Errorf("%w: %w", ratelimit.ErrStoreUnavailable, err)
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %w", ratelimit.ErrUnknownID, err)
	}
	return err
}
