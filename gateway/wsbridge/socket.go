package wsbridge

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// socket is one upgraded connection and its turns.
type socket struct {
	b *Bridge
	c *websocket.Conn
	// cork holds the messages of one write of the gateway back, to send
	// them in one go (cork.go).
	cork *corkConn
	up   *http.Request // the upgrade, the template of every turn's request
	// ctx is the socket's: cancelled when the client has gone (the reader
	// failed) or the socket ends; every turn's context derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	// free holds the message buffers the reader may read into: two, one
	// being read while the other's turn runs; a turn hands its buffer back
	// once prepared (the turn's body is a copy).
	free chan []byte
	// msgs carries the messages read, in order; readDone is closed when
	// the reader has stopped.
	msgs     chan []byte
	readDone chan struct{}
	conv     conversation
	// warmups numbers the answers to generate:false.
	warmups int
	// answered is set once the running turn has sent its last event
	// (response.completed, .failed, .incomplete, or an error); grace is the
	// timer that cancels such a turn when its client has gone meanwhile.
	answered atomic.Bool
	grace    *time.Timer
}

func newSocket(b *Bridge, c *websocket.Conn, cork *corkConn, up *http.Request) *socket {
	ctx, cancel := context.WithCancel(up.Context())
	s := &socket{b: b, c: c, cork: cork, up: up, ctx: ctx, cancel: cancel,
		free: make(chan []byte, 2), msgs: make(chan []byte, 1), readDone: make(chan struct{})}
	s.free <- nil
	s.free <- nil
	return s
}

// run reads messages and runs them as turns, one at a time, until the
// client goes, the socket sits idle for the gateway's bound, or the bridge
// shuts down.
func (s *socket) run() {
	go s.read()
	defer func() {
		s.cancel()
		_ = s.c.CloseNow()
		<-s.readDone
		if s.grace != nil {
			s.grace.Stop()
		}
	}()
	idle := time.NewTimer(s.b.gw.IdleBound())
	defer idle.Stop()
	for {
		select {
		case msg := <-s.msgs:
			idle.Stop()
			s.turn(msg)
			select {
			case <-s.b.stop:
				s.goAway("Gatehouse is shutting down")
				return
			default:
			}
			idle.Reset(s.b.gw.IdleBound())
		case <-s.readDone:
			return
		case <-idle.C:
			s.goAway("idle for " + s.b.gw.IdleBound().String())
			return
		case <-s.b.stop:
			s.goAway("Gatehouse is shutting down")
			return
		}
	}
}

// goAway closes the socket with 1001 (going away) and the close handshake;
// the reader receives the client's close and stops.
func (s *socket) goAway(reason string) {
	_ = s.c.Close(websocket.StatusGoingAway, reason)
}

// read reads messages into s.msgs until the connection fails or closes
// (the client's close, a message over the read limit — closed with 1009 by
// the library — or the socket's end); then it cancels the socket's
// context, and with it the turn running: a hang-up. A turn that has sent
// its last event already (a client closes as soon as it has its answer)
// is left to read the upstream's end, a few bytes, so that its permit goes
// back when the upstream is done rather than a moment before; it is
// cancelled after answeredGrace if that end does not come.
func (s *socket) read() {
	defer close(s.readDone)
	for {
		var buf []byte
		select {
		case buf = <-s.free:
		case <-s.ctx.Done():
			return
		}
		data, err := s.readMessage(buf)
		if err != nil {
			if s.answered.Load() {
				s.grace = time.AfterFunc(answeredGrace, s.cancel)
				return
			}
			s.cancel()
			return
		}
		select {
		case s.msgs <- data:
		case <-s.ctx.Done():
			return
		}
	}
}

// readMessage reads the next message into buf, grown as needed (a coding
// agent's messages grow turn by turn; a buffer is reused from turn to
// turn); the library enforces the read limit.
func (s *socket) readMessage(buf []byte) ([]byte, error) {
	_, r, err := s.c.Reader(s.ctx)
	if err != nil {
		return nil, err
	}
	buf = buf[:0]
	if cap(buf) == 0 {
		buf = make([]byte, 0, 4<<10)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// turn runs one message: a response.create as one gateway request, other
// message types as prepare says.
func (s *socket) turn(msg []byte) {
	body, act, aerr := s.conv.prepare(msg)
	if cap(msg) > maxKeptBuffer {
		msg = nil // an outsized message's buffer is not kept
	}
	s.free <- msg
	switch act {
	case actIgnore:
		return
	case actRefuse:
		s.send(errorMessage(aerr))
		return
	case actWarmup:
		s.warmups++
		for _, m := range s.conv.warmup(s.warmups) {
			if !s.send(m) {
				return
			}
		}
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	s.answered.Store(false)
	defer s.answered.Store(false) // between turns a hang-up cancels at once
	req := s.up.Clone(ctx)
	req.Method = http.MethodPost
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = nil
	turnHeader(req.Header, len(body))
	w := &eventWriter{s: s, header: make(http.Header)}
	s.b.gw.ServeHTTP(w, req)
	w.finish()
	s.conv.trim()
}

// answeredGrace bounds how long a turn whose client has gone after its last
// event may take to read the upstream's end.
const answeredGrace = 2 * time.Second

// maxKeptBuffer bounds the message buffers a socket keeps between turns.
const maxKeptBuffer = 1 << 20

// turnHeader makes the upgrade's headers those of a streaming POST: the
// client's own (key, session, priority, trace) stay; the upgrade's go.
func turnHeader(h http.Header, n int) {
	for _, k := range []string{"Connection", "Upgrade", "Sec-Websocket-Key", "Sec-Websocket-Version",
		"Sec-Websocket-Extensions", "Sec-Websocket-Protocol", "Origin"} {
		delete(h, k)
	}
	if vs := h.Values("OpenAI-Beta"); len(vs) > 0 {
		var keep []string
		for _, v := range vs {
			for t := range strings.SplitSeq(v, ",") {
				if t = strings.TrimSpace(t); t != "" && !strings.HasPrefix(t, "responses_websockets") {
					keep = append(keep, t)
				}
			}
		}
		h.Del("OpenAI-Beta")
		if len(keep) > 0 {
			h.Set("OpenAI-Beta", strings.Join(keep, ", "))
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	h.Set("Content-Length", strconv.Itoa(n))
}

// send writes one text message; false when the socket is gone.
func (s *socket) send(m []byte) bool {
	return s.c.Write(s.ctx, websocket.MessageText, m) == nil
}
