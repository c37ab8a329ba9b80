//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestTranslateUnavailable: the errors a pooled connection meets while the server stops,
// crashes or recovers are ErrUnavailable (503 with Retry-After), not an internal error;
// statement errors keep their meaning.
func TestTranslateUnavailable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want error // nil: neither ErrUnavailable nor another sentinel
	}{
		{name: "postmaster killed", err: &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to unexpected postmaster exit"}, want: ErrUnavailable},
		{name: "fast shutdown", err: &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}, want: ErrUnavailable},
		{name: "another backend crashed", err: &pgconn.PgError{Code: "57P02"}, want: ErrUnavailable},
		{name: "in recovery", err: &pgconn.PgError{Code: "57P03", Message: "the database system is in recovery mode"}, want: ErrUnavailable},
		{name: "socket reset", err: fmt.Errorf("read: %w", &net.OpError{Op: "read", Net: "unix", Err: syscall.ECONNRESET}), want: ErrUnavailable},
		{name: "unexpected EOF", err: fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), want: ErrUnavailable},
		{name: "unique violation", err: &pgconn.PgError{Code: "23505"}, want: ErrConflict},
		{name: "syntax error", err: &pgconn.PgError{Code: "42601"}},
		{name: "other", err: errors.New("boom")},
	}
	for _, tc := range tests {
		got := translate(tc.err)
		if tc.want == nil {
			if errors.Is(got, ErrUnavailable) || errors.Is(got, ErrConflict) {
				t.Errorf("%s: translate = %v, want no sentinel", tc.name, got)
			}
			continue
		}
		if !errors.Is(got, tc.want) {
			t.Errorf("%s: translate = %v, want %v", tc.name, got, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("%s: translate lost the cause: %v", tc.name, got)
		}
	}
}
