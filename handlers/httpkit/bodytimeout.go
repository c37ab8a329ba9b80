package httpkit

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// errBodyTimeout wraps the error of a request body read that ran into the body read
// bound (Deps.BodyReadTimeout); every surface answers it with 408.
var errBodyTimeout = errors.New("handlers: the request body did not arrive in time")

// BodyDeadline bounds how long a request's body may take to arrive: a read deadline
// on the connection from the moment the handler starts, lifted as soon as the body has
// been read to its end, so that a long streaming response afterwards is not cut (a
// whole-request http.Server.ReadTimeout would stay in force during the response, and
// net/http cancels the request's context when the connection's background read hits
// it). A read that hits the deadline fails with an error wrapping errBodyTimeout and
// os.ErrDeadlineExceeded (the gateway looks for the latter); the connection is then
// closed after the answer, since the rest of the body cannot be skipped. Requests
// without a body are passed through untouched.
func BodyDeadline(d time.Duration, next http.Handler) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, w: w, rc: rc, http1: r.ProtoMajor == 1}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody is a request body under BodyDeadline's read deadline.
type deadlineBody struct {
	io.ReadCloser
	w     http.ResponseWriter
	rc    *http.ResponseController
	http1 bool
	done  bool // the deadline has been lifted or has struck
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil || b.done:
	case err == io.EOF:
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.done = true
		if b.http1 {
			// HTTP/2 has no Connection header; there the stream is reset instead.
			b.w.Header().Set("Connection", "close")
		}
		err = fmt.Errorf("%w: %w", errBodyTimeout, err)
	}
	return n, err
}

// IsBodyTimeout reports whether err comes from a body read that hit the deadline.
func IsBodyTimeout(err error) bool { return errors.Is(err, errBodyTimeout) }
