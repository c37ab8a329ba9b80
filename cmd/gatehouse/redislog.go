package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisLogging routes go-redis's own log lines (a pool that cannot dial while Redis
// is away, and the like) through slog, so that stderr stays one JSON object a line.
type redisLogging struct{ logger *slog.Logger }

// Printf logs one go-redis message as a warning, marked as the Redis client's.
func (r redisLogging) Printf(ctx context.Context, format string, v ...any) {
	r.logger.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)), slog.String("component", "go-redis"))
}

// setRedisLogger points go-redis's process-wide logger at stderr in the format of the
// command's own logs (JSON unless stderr is a terminal).
func setRedisLogger(stderr io.Writer) {
	logger, err := newLogger("info", stderr)
	if err != nil {
		return // "info" always parses
	}
	redis.SetLogger(redisLogging{logger: logger})
}
