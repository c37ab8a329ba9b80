package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/handlers"
)

// config is every setting of DESIGN.md's configuration table. Environment variables set
// the defaults; flags of the same name (lower case, dashes) override them.
type config struct {
	DatabaseURL        string
	DataDir            string
	Addr               string
	SecretKey          string
	LogLevel           string
	AdminEmail         string
	AdminPassword      string
	BootstrapAPIToken  string
	BootstrapClientKey string
	RedisURL           string
	ClusterFailMode    string
	ClusterLeaseTTL    string
	BudgetFail         string
	TrustedProxies     string
	UpstreamDeny       string
	MetricsAddr        string
	ShutdownTimeout    string
	BodyReadTimeout    string
	MaxBodyInFlight    string
	Outbound           string
	RequestLog         string
	RequestLogRet      string
	Demo               bool
}

// newFlagSet returns a flag set for a command whose flags mirror the environment, with
// defaults read through getenv.
func newFlagSet(name string, cfg *config, getenv func(string) string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&cfg.DatabaseURL, "database-url", env("GATEHOUSE_DATABASE_URL", ""), "Postgres URL (GATEHOUSE_DATABASE_URL); unset = managed local Postgres")
	fs.StringVar(&cfg.DataDir, "data-dir", env("GATEHOUSE_DATA_DIR", "./gatehouse-data"), "managed Postgres cluster and generated secrets (GATEHOUSE_DATA_DIR)")
	fs.StringVar(&cfg.LogLevel, "log-level", env("GATEHOUSE_LOG_LEVEL", "info"), "debug, info, warn or error (GATEHOUSE_LOG_LEVEL)")
	fs.StringVar(&cfg.SecretKey, "secret-key", env("GATEHOUSE_SECRET_KEY", ""), "32 bytes, hex or base64 (GATEHOUSE_SECRET_KEY); generated into the data dir when managed")
	return fs
}

// addServeFlags adds the flags only serve has.
func addServeFlags(fs *flag.FlagSet, cfg *config, getenv func(string) string) {
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&cfg.Addr, "addr", env("GATEHOUSE_ADDR", "127.0.0.1:8080"), "listen address (GATEHOUSE_ADDR)")
	fs.StringVar(&cfg.AdminEmail, "admin-email", env("GATEHOUSE_ADMIN_EMAIL", "admin@localhost"), "the admin --demo creates (GATEHOUSE_ADMIN_EMAIL)")
	fs.StringVar(&cfg.AdminPassword, "admin-password", env("GATEHOUSE_ADMIN_PASSWORD", ""), "its password; generated and printed once when unset (GATEHOUSE_ADMIN_PASSWORD)")
	fs.StringVar(&cfg.BootstrapAPIToken, "bootstrap-api-token", env("GATEHOUSE_BOOTSTRAP_API_TOKEN", ""), "make sure an admin API token with this secret exists (GATEHOUSE_BOOTSTRAP_API_TOKEN)")
	fs.StringVar(&cfg.BootstrapClientKey, "bootstrap-client-key", env("GATEHOUSE_BOOTSTRAP_CLIENT_KEY", ""), "make sure a client key with this secret exists (GATEHOUSE_BOOTSTRAP_CLIENT_KEY)")
	fs.StringVar(&cfg.RedisURL, "redis-url", env("GATEHOUSE_REDIS_URL", ""), "cluster mode: redis://, rediss:// or unix:// URL of the Redis shared by the replicas (GATEHOUSE_REDIS_URL)")
	fs.StringVar(&cfg.ClusterFailMode, "cluster-fail-mode", env("GATEHOUSE_CLUSTER_FAIL_MODE", "fail-open"), "fail-open or fail-closed (GATEHOUSE_CLUSTER_FAIL_MODE)")
	fs.StringVar(&cfg.BudgetFail, "budget-fail", env("GATEHOUSE_BUDGET_FAIL", budgetFailClosed), "cluster mode, Postgres unreachable: closed (day and money budgets answer 503 USAGE_STORE_UNAVAILABLE) or open (each replica counts them in memory) (GATEHOUSE_BUDGET_FAIL)")
	fs.StringVar(&cfg.ClusterLeaseTTL, "cluster-lease-ttl", env("GATEHOUSE_CLUSTER_LEASE_TTL", ""), "cluster mode: how long a dead replica's slots stay taken, e.g. 15s (GATEHOUSE_CLUSTER_LEASE_TTL; default 15s)")
	fs.StringVar(&cfg.TrustedProxies, "trusted-proxies", env("GATEHOUSE_TRUSTED_PROXIES", ""), "comma-separated CIDRs of reverse proxies whose X-Forwarded-For names the client (GATEHOUSE_TRUSTED_PROXIES)")
	fs.StringVar(&cfg.UpstreamDeny, "upstream-deny", env("GATEHOUSE_UPSTREAM_DENY", handlers.DefaultUpstreamDeny), "comma-separated CIDRs, addresses and host names a connection's baseUrl may not resolve to; none = no list (GATEHOUSE_UPSTREAM_DENY)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", env("GATEHOUSE_METRICS_ADDR", ""), "a second listener serving only /metrics, without auth (GATEHOUSE_METRICS_ADDR); unset = none")
	fs.StringVar(&cfg.ShutdownTimeout, "shutdown-timeout", env("GATEHOUSE_SHUTDOWN_TIMEOUT", "30s"), "after SIGTERM/SIGINT, how long in-flight requests and streams may finish (GATEHOUSE_SHUTDOWN_TIMEOUT)")
	fs.StringVar(&cfg.BodyReadTimeout, "body-read-timeout", env("GATEHOUSE_BODY_READ_TIMEOUT", "30s"), "a request body not fully arrived by then gets 408 (GATEHOUSE_BODY_READ_TIMEOUT)")
	fs.StringVar(&cfg.MaxBodyInFlight, "max-body-bytes-in-flight", env("GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT", "256MiB"), "request-body bytes held at once, every request together; beyond it 503 OVERLOADED (GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT)")
	fs.StringVar(&cfg.Outbound, "outbound", env("GATEHOUSE_OUTBOUND", gateway.OutboundFastHTTP), "upstream client: fasthttp or net/http (GATEHOUSE_OUTBOUND)")
	fs.StringVar(&cfg.RequestLog, "request-log", env("GATEHOUSE_REQUEST_LOG", "on"), "log every gateway request in Postgres: on or off (GATEHOUSE_REQUEST_LOG)")
	fs.StringVar(&cfg.RequestLogRet, "request-log-retention", env("GATEHOUSE_REQUEST_LOG_RETENTION", "7d"), "how long request log rows are kept, e.g. 7d or 36h (GATEHOUSE_REQUEST_LOG_RETENTION)")
	fs.BoolVar(&cfg.Demo, "demo", false, "managed Postgres, an admin, a client key, a fake upstream with demo connections")
}

// serveTimeouts parses GATEHOUSE_SHUTDOWN_TIMEOUT and GATEHOUSE_BODY_READ_TIMEOUT.
func serveTimeouts(cfg *config) (shutdown, bodyRead time.Duration, err error) {
	parse := func(name, v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%s %q: want a positive duration such as 30s", name, v)
		}
		return d, nil
	}
	if shutdown, err = parse("GATEHOUSE_SHUTDOWN_TIMEOUT", cfg.ShutdownTimeout); err != nil {
		return 0, 0, err
	}
	if bodyRead, err = parse("GATEHOUSE_BODY_READ_TIMEOUT", cfg.BodyReadTimeout); err != nil {
		return 0, 0, err
	}
	return shutdown, bodyRead, nil
}

// parseByteSize reads GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT: a positive number of
// bytes, or of KiB, MiB or GiB with that suffix.
func parseByteSize(name, v string) (int64, error) {
	num, unit := v, int64(1)
	for suffix, u := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if n, ok := strings.CutSuffix(v, suffix); ok {
			num, unit = n, u
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%s %q: want a positive number of bytes, or of KiB, MiB or GiB such as 256MiB", name, v)
	}
	return n * unit, nil
}

// newLogger returns the process logger: JSON unless stderr is a terminal.
func newLogger(level string, stderr io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToLower(level))); err != nil {
		return nil, fmt.Errorf("GATEHOUSE_LOG_LEVEL %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		return slog.New(slog.NewTextHandler(stderr, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(stderr, opts)), nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
