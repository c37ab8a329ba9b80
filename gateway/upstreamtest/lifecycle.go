package upstreamtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Start listens on addr (e.g. "127.0.0.1:0") and serves in the background
// until Shutdown or Close. It returns the base URL without a path, e.g.
// "http://127.0.0.1:40123"; OpenAI clients use that plus "/v1". ctx bounds
// only the listen call, not the life of the server.
func (s *Server) Start(ctx context.Context, addr string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.httpSrv != nil {
		return "", errors.New("upstreamtest: server already started")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("upstreamtest: listen %s: %w", addr, err)
	}
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	done := make(chan struct{})
	s.httpSrv, s.serveDone, s.url = hs, done, "http://"+ln.Addr().String()
	go func() {
		defer close(done)
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.mu.Lock()
			s.serveErr = fmt.Errorf("upstreamtest: serve: %w", err)
			s.mu.Unlock()
		}
	}()
	return s.url, nil
}

// URL returns the base URL of a server started with Start, or "".
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Shutdown stops a server started with Start gracefully: it stops
// accepting, lets requests and streams in flight finish until ctx ends, and
// then closes whatever remains (hanging requests included).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	hs := s.httpSrv
	s.mu.Unlock()
	if hs != nil {
		if err := hs.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return errors.Join(fmt.Errorf("upstreamtest: shutdown: %w", err), s.Close())
		}
	}
	return s.Close()
}

// Close ends every wait (hang, latency, hold, chunk spacing) so handlers
// return; requests cut short this way get a connection reset, never an
// empty answer. For a server started with Start it also closes the
// listener and every connection and waits (up to 5 s) for handlers to
// return. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.mu.Lock()
	hs, done := s.httpSrv, s.serveDone
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	err := hs.Close()
	<-done
	// http.Server.Close does not wait for handlers; every wait has ended
	// and every connection is closed, so they finish promptly.
	if werr := s.waitIdle(closeWait); werr != nil {
		err = errors.Join(err, werr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("upstreamtest: close: %w", err)
	}
	return s.serveErr
}

// closeWait bounds how long Close waits for handlers to return.
const closeWait = 5 * time.Second

// waitIdle waits until no request is in flight, at most d.
func (s *Server) waitIdle(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		s.mu.Lock()
		n := s.total.inFlight
		if n == 0 {
			s.mu.Unlock()
			return nil
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return fmt.Errorf("%d requests still in flight after %v", n, d)
		}
	}
}
