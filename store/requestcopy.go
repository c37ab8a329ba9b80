package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse-dev/gatehouse/internal/scrub"
)

// copyRequestsSQL is the COPY of the request log's rows, in RequestRow's order
// (appendRequestRow), in Postgres's binary format.
const copyRequestsSQL = `COPY requests (id, started_at, key_id, key_name, connection_id, connection_name,
provider, model, upstream_model, route, stream, status, code, gate, priority, attempts, queue_ms, ttft_ms,
upstream_ms, total_ms, input_tokens, output_tokens, cached_tokens, cache_write_tokens, cost_micros,
trace_id, replica, session, affinity, attempts_detail, upstream_error) FROM STDIN (FORMAT binary)`

// requestFields is the number of columns copyRequestsSQL writes.
const requestFields = 31

// copyHeader starts a binary COPY: the signature, no flags, no header extension.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// pgEpochMicros is 2000-01-01 00:00:00 UTC, Postgres's timestamp epoch, in Unix
// microseconds.
const pgEpochMicros = 946_684_800_000_000

// copyRequests COPYs rows (with ids, in step) on tx by sql (copyRequestsSQL or its
// staging twin), encoded into *buf (reused, so a flush allocates nothing per row). The encoding is done here rather than by pgx's
// generic CopyFrom, which boxes every value and, for a uuid given as a string,
// fails a plan and builds an error before it parses it: the log's writer took a
// tenth of the gateway's CPU under load that way (docs/BENCHMARKS.md).
func copyRequests(ctx context.Context, tx pgx.Tx, sql string, rows []RequestRow, ids [][16]byte, buf *[]byte) error {
	b := append((*buf)[:0], copyHeader...)
	for i := range rows {
		b = appendRequestRow(b, &ids[i], &rows[i])
	}
	b = binary.BigEndian.AppendUint16(b, 0xffff) // the trailer: a field count of -1
	*buf = b
	_, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(b), sql)
	return err
}

// appendRequestRow appends r with id as one binary COPY tuple. The writer keeps a
// row's id as 16 bytes beside it (RequestLog.ids) and never formats one.
func appendRequestRow(b []byte, id *[16]byte, r *RequestRow) []byte {
	b = binary.BigEndian.AppendUint16(b, requestFields)
	b = appendBytes(b, id[:])
	b = appendInt64(b, r.StartedAt.UnixMicro()-pgEpochMicros)
	b = appendUUID(b, r.KeyID)
	b = appendText(b, r.KeyName, 64)
	b = appendUUID(b, r.ConnectionID)
	b = appendText(b, r.ConnectionName, 64)
	b = appendText(b, r.Provider, 32)
	b = appendText(b, r.Model, 128)
	b = appendText(b, r.UpstreamModel, 128)
	if r.Route == "" {
		b = appendBytes(b, nil) // NOT NULL: an empty route stays empty
	} else {
		b = appendText(b, r.Route, 32)
	}
	b = binary.BigEndian.AppendUint32(b, 1)
	if r.Stream {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendInt32(b, int32(r.Status))
	b = appendText(b, r.Code, 64)
	b = appendText(b, r.Gate, 256)
	b = appendText(b, r.Priority, 16)
	b = appendInt32(b, int32(r.Attempts))
	b = appendInt32(b, clampMs(r.QueueMs))
	if r.TTFTMs >= 0 {
		b = appendInt32(b, clampMs(r.TTFTMs))
	} else {
		b = appendNull(b)
	}
	b = appendInt32(b, clampMs(r.UpstreamMs))
	b = appendInt32(b, clampMs(r.TotalMs))
	b = appendInt64(b, r.InputTokens)
	b = appendInt64(b, r.OutputTokens)
	b = appendInt64(b, r.CachedTokens)
	b = appendInt64(b, r.CacheWriteTokens)
	b = appendInt64(b, r.CostMicros)
	b = appendText(b, r.TraceID, 64)
	b = appendText(b, r.Replica, 128)
	b = appendText(b, r.Session, 16)
	b = appendText(b, r.Affinity, 16)
	b = appendAttempts(b, r.AttemptsDetail)
	if r.UpstreamError == "" {
		return appendNull(b)
	}
	return appendText(b, scrub.Secrets(r.UpstreamError), scrub.MaxMessage+64)
}

// maxLoggedAttempts bounds the attempts a row keeps (the gateway makes a few).
const maxLoggedAttempts = 16

// appendAttempts appends attempts as a jsonb value (binary format: version 1,
// then the JSON text), NULL when there are none.
func appendAttempts(b []byte, attempts []RequestAttempt) []byte {
	if len(attempts) == 0 {
		return appendNull(b)
	}
	at := len(b)
	b = append(b, 0, 0, 0, 0, 1, '[')
	for i := range attempts[:min(len(attempts), maxLoggedAttempts)] {
		a := &attempts[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"connectionId":`...)
		if _, ok := parseUUID(a.ConnectionID); ok {
			b = appendJSONString(b, a.ConnectionID)
		} else {
			b = append(b, `""`...)
		}
		b = append(b, `,"connection":`...)
		b = appendJSONString(b, cleanText(a.ConnectionName, 64))
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(a.Status), 10)
		b = append(b, `,"ms":`...)
		b = strconv.AppendInt(b, int64(clampMs(a.Ms)), 10)
		if a.Code != "" {
			b = append(b, `,"code":`...)
			b = appendJSONString(b, cleanText(a.Code, 64))
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// appendJSONString appends s (valid UTF-8 without NUL) as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

func appendNull(b []byte) []byte { return binary.BigEndian.AppendUint32(b, 0xffffffff) }

func appendBytes(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

func appendInt32(b []byte, v int32) []byte {
	b = binary.BigEndian.AppendUint32(b, 4)
	return binary.BigEndian.AppendUint32(b, uint32(v))
}

func appendInt64(b []byte, v int64) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(v))
}

// appendUUID appends s as a uuid, NULL when empty or not a uuid (as nullUUID).
func appendUUID(b []byte, s string) []byte {
	u, ok := parseUUID(s)
	if !ok {
		return appendNull(b)
	}
	return appendBytes(b, u[:])
}

// appendText appends s fit for a text column (as nullText: NULL when empty, cut to
// max bytes, without NUL bytes, valid UTF-8). The common clean string is copied as
// it is; cleanText's allocation is only for a dirty one.
func appendText(b []byte, s string, max int) []byte {
	if s == "" {
		return appendNull(b)
	}
	if len(s) > max || strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
		s = cleanText(s, max)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// parseUUID decodes a uuid in its text form (isUUID's), without allocating.
func parseUUID(s string) (u [16]byte, ok bool) {
	if !isUUID(s) {
		return u, false
	}
	j := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			continue
		}
		u[j/2] |= unhex(s[i]) << (4 * (1 - j%2))
		j++
	}
	return u, true
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// newRequestUUID returns a UUIDv7 (RFC 9562) for a row started at t: time-ordered,
// so the indexes on the id grow at their end, and its time names the row's day
// (GetRequest).
func newRequestUUID(t time.Time) (b [16]byte) {
	ms := uint64(t.UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	binary.LittleEndian.PutUint16(b[6:8], uint16(rand.Uint32()))
	binary.LittleEndian.PutUint64(b[8:16], rand.Uint64())
	b[6] = 0x70 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	return b
}
