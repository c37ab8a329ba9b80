package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway/cluster"
)

// clusterStartTimeout bounds the replica's first registration in Redis. A Redis that
// does not answer in time does not stop serve: the controller starts in its fail mode
// and switches to shared caps when Redis answers.
const clusterStartTimeout = 5 * time.Second

// clusterMode is cluster mode's shared admission controller and its Redis client.
type clusterMode struct {
	ctrl   *cluster.Controller
	limits *cluster.Limits // rpm/minTime spacing, tpm window, cooldowns and suspensions
	// affinity shares the sessions' affinity bindings.
	affinity *cluster.Affinity
	rdb      *redis.Client
	mode     cluster.FailMode
	id       string // this replica's id
}

// clusterSettings checks GATEHOUSE_CLUSTER_FAIL_MODE and GATEHOUSE_CLUSTER_LEASE_TTL
// (serve checks them with and without GATEHOUSE_REDIS_URL). A zero ttl means
// cluster.DefaultLeaseTTL.
func clusterSettings(cfg *config) (cluster.FailMode, time.Duration, error) {
	mode, err := cluster.ParseFailMode(cfg.ClusterFailMode)
	if err != nil {
		return mode, 0, fmt.Errorf("GATEHOUSE_CLUSTER_FAIL_MODE: %w", err)
	}
	var ttl time.Duration
	if cfg.ClusterLeaseTTL != "" {
		if ttl, err = time.ParseDuration(cfg.ClusterLeaseTTL); err != nil || ttl < 10*time.Millisecond {
			return mode, 0, fmt.Errorf("GATEHOUSE_CLUSTER_LEASE_TTL %q: want a duration of at least 10ms, such as 15s", cfg.ClusterLeaseTTL)
		}
	}
	return mode, ttl, nil
}

// GATEHOUSE_BUDGET_FAIL's values.
const (
	budgetFailClosed = "closed"
	budgetFailOpen   = "open"
)

// budgetFailsClosed checks GATEHOUSE_BUDGET_FAIL: whether, in cluster mode,
// day and money budgets refuse requests while Postgres is unreachable
// (closed, the default) rather than each replica counting them in memory.
func budgetFailsClosed(cfg *config) (bool, error) {
	switch cfg.BudgetFail {
	case budgetFailClosed, "":
		return true, nil
	case budgetFailOpen:
		return false, nil
	}
	return false, fmt.Errorf("GATEHOUSE_BUDGET_FAIL %q: want %s or %s", cfg.BudgetFail, budgetFailClosed, budgetFailOpen)
}

// startCluster connects to GATEHOUSE_REDIS_URL and starts the shared admission
// controller under a replica id made of host name, process id and a random suffix.
func startCluster(ctx context.Context, cfg *config, logger *slog.Logger) (*clusterMode, error) {
	mode, ttl, err := clusterSettings(cfg)
	if err != nil {
		return nil, err
	}
	ropts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		// The URL may hold a password: never echo it.
		return nil, fmt.Errorf("GATEHOUSE_REDIS_URL is not a valid redis://, rediss:// or unix:// URL: %w", redactedURLError(err))
	}
	// One dial per attempt: go-redis's default of 5 dials 100 ms apart, times its command
	// retries, outlasts the controller's 1 s bound on every call, so a dead Redis would
	// only be noticed by that timeout. The command retries (max_retries in the URL)
	// still ride out a dropped connection.
	ropts.DialerRetries = 1
	rdb := redis.NewClient(ropts)
	id := replicaID()
	startCtx, cancel := context.WithTimeout(ctx, clusterStartTimeout)
	defer cancel()
	ctrl, err := cluster.New(startCtx, cluster.Options{
		Client:    rdb,
		ReplicaID: id,
		FailMode:  mode,
		LeaseTTL:  ttl,
		Logger:    logger,
	})
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("cluster mode: %w", err)
	}
	lim, err := cluster.NewLimits(cluster.LimitsOptions{Client: rdb})
	if err != nil {
		_ = ctrl.Close(ctx)
		_ = rdb.Close()
		return nil, fmt.Errorf("cluster mode: %w", err)
	}
	aff, err := cluster.NewAffinity(cluster.LimitsOptions{Client: rdb})
	if err != nil {
		_ = ctrl.Close(ctx)
		_ = rdb.Close()
		return nil, fmt.Errorf("cluster mode: %w", err)
	}
	state := "redis ok"
	if ctrl.Degraded() {
		state = "redis unreachable; " + mode.String() + " until it answers"
	}
	logger.Info("cluster mode", slog.String("replica", id), slog.String("fail_mode", mode.String()),
		slog.String("state", state))
	return &clusterMode{ctrl: ctrl, limits: lim, affinity: aff, rdb: rdb, mode: mode, id: id}, nil
}

// redactedURLError keeps go-redis's reason but not the URL, which may hold a
// password: url.Parse's errors quote the whole URL.
func redactedURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// replicaID names this process among the replicas: host, pid and 4 random bytes, so a
// restarted process with a recycled pid is still a new replica.
func replicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "gatehouse"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// status is the /readyz line for cluster mode.
func (c *clusterMode) status() string {
	if c.ctrl.Degraded() {
		return "cluster mode: redis unavailable (" + c.mode.String() + ")"
	}
	return "cluster mode: redis ok"
}

// close gives back this replica's leases, unregisters it and closes the Redis client.
// Call it after the HTTP server has drained.
func (c *clusterMode) close(ctx context.Context, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.ctrl.Close(ctx); err != nil {
		logger.Warn("cluster mode: close", slog.Any("error", err))
	}
	if err := c.rdb.Close(); err != nil {
		logger.Warn("cluster mode: close redis client", slog.Any("error", err))
	}
}
