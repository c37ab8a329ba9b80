package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Affinity shares the gateway's affinity bindings (a session's affinity key →
// the connection holding its prompt cache) between replicas: one string per
// binding, <prefix>:aff:<key in hex> = connection id, expiring after the
// affinityTtlMs it was written with. The gateway keeps its own bindings as a
// cache in front of it and asks only on a miss, and writes only new or moved
// bindings (or one last written more than half its TTL ago), so an
// uncontended request makes no round trip of its own for affinity. It
// implements gateway.AffinityStore; every call is one command bounded by
// OpTimeout. Safe for concurrent use; runs no goroutines.
type Affinity struct {
	rdb       redis.UniversalClient
	prefix    string
	opTimeout time.Duration
}

// NewAffinity returns Affinity over opts.Client (the options of Limits: the
// same prefix and timeout).
func NewAffinity(opts LimitsOptions) (*Affinity, error) {
	if opts.Client == nil {
		return nil, errors.New("cluster: LimitsOptions.Client is nil")
	}
	prefix := cmp.Or(opts.Prefix, DefaultPrefix)
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("cluster: prefix %q contains a brace", prefix)
	}
	return &Affinity{rdb: opts.Client, prefix: prefix + ":aff:", opTimeout: cmp.Or(opts.OpTimeout, DefaultOpTimeout)}, nil
}

func (a *Affinity) key(k uint64) string { return a.prefix + strconv.FormatUint(k, 16) }

// GetBinding returns the connection key is bound to, and false when it has
// no binding (or it expired).
func (a *Affinity) GetBinding(ctx context.Context, key uint64) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opTimeout)
	defer cancel()
	conn, err := a.rdb.Get(ctx, a.key(key)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("cluster: get binding: %w", err)
	}
	return conn, true, nil
}

// SetBinding binds key to conn for ttl (at least a millisecond).
func (a *Affinity) SetBinding(ctx context.Context, key uint64, conn string, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, a.opTimeout)
	defer cancel()
	if err := a.rdb.Set(ctx, a.key(key), conn, max(ttl, time.Millisecond)).Err(); err != nil {
		return fmt.Errorf("cluster: set binding: %w", err)
	}
	return nil
}
