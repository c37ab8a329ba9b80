package outbound

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestFastTransportUpstreamClosedIdleConnection: with no background read,
// fasthttp learns that the upstream closed an idle keep-alive connection
// only when it reuses it; that costs the request nothing (it goes again on
// a new connection, once) and the upstream sees it once. (net/http's
// Transport drops such a connection when its background read sees it close.)
func TestFastTransportUpstreamClosedIdleConnection(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.Copy(w, r.Body)
	}))
	defer srv.Close()
	ft := NewFastTransport()
	defer ft.CloseIdleConnections()
	for i := range 4 {
		body := []byte(`{"n":` + string(rune('0'+i)) + `}`)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/echo", bytes.NewReader(body))
		if i%2 == 1 {
			// The gateway's attempts send a RawBody, without GetBody: it
			// goes again as it is.
			req.Body, req.GetBody = &RawBody{b: body}, nil
		}
		resp, err := ft.RoundTrip(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("request %d: body %q (%v), want %q", i, got, err, body)
		}
		srv.CloseClientConnections()
	}
	if n := requests.Load(); n != 4 {
		t.Errorf("upstream saw %d requests, want 4", n)
	}
}

// TestFastResponseHeader: the conversion of an upstream's headers keeps
// every name and value, repeated names in order, and values that share one
// block stay apart when a caller appends to one of them.
func TestFastResponseHeader(t *testing.T) {
	var h fasthttp.ResponseHeader
	h.SetNoDefaultContentType(true)
	h.Set("Content-Type", "application/json")
	h.Add("X-Ratelimit-Remaining-Requests", "41")
	h.Add("Set-Cookie", "a=1")
	h.Add("Set-Cookie", "b=2")
	h.Add("Vary", "Origin")
	h.Add("X-Odd", "")
	got := fastResponseHeader(&h)
	want := http.Header{
		"Content-Type":                   {"application/json"},
		"X-Ratelimit-Remaining-Requests": {"41"},
		"Set-Cookie":                     {"a=1", "b=2"},
		"Vary":                           {"Origin"},
		"X-Odd":                          {""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	got["Content-Type"] = append(got["Content-Type"], "text/plain")
	got.Add("X-Ratelimit-Remaining-Requests", "40")
	if got.Get("Vary") != "Origin" || !reflect.DeepEqual(got["Set-Cookie"], []string{"a=1", "b=2"}) {
		t.Errorf("an append to one name changed another: %v", got)
	}
	var empty fasthttp.ResponseHeader
	empty.SetNoDefaultContentType(true)
	if n := len(fastResponseHeader(&empty)); n != 0 {
		t.Errorf("empty header: %d names, want 0", n)
	}
}

func TestChunkBuffered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		buf  string
		want bool
	}{
		{name: "empty", buf: "", want: false},
		{name: "size line only", buf: "5\r\n", want: false},
		{name: "data without CRLF", buf: "5\r\nhello", want: false},
		{name: "whole chunk", buf: "5\r\nhello\r\n", want: true},
		{name: "whole chunk, more after", buf: "5\r\nhello\r\n3\r\nab", want: true},
		{name: "hex upper and lower", buf: "1A\r\n" + strings.Repeat("x", 26) + "\r\n", want: true},
		{name: "hex short by one", buf: "1a\r\n" + strings.Repeat("x", 25) + "\r\n", want: false},
		{name: "extension", buf: "5;name=v\r\nhello\r\n", want: true},
		{name: "last chunk", buf: "0\r\n\r\n", want: true},
		{name: "last chunk, trailer pending", buf: "0\r\n", want: false},
		{name: "huge size", buf: "ffffffffffffffff\r\nab\r\n", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.buf), 64)
			_, _ = br.Peek(len(tc.buf)) // fill the buffer
			if got := chunkBuffered(br); got != tc.want {
				t.Errorf("chunkBuffered(%q) = %v, want %v", tc.buf, got, tc.want)
			}
		})
	}
}

// TestFastTransportStreamsWithoutWaiting: a read of the fasthttp body hands
// over every whole chunk that has arrived, and never holds them back waiting
// for the rest of a chunk that has only begun to arrive.
func TestFastTransportStreamsWithoutWaiting(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rest := make(chan struct{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		// Two whole events in one write, then the start of a third chunk.
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"+
			"8\r\ndata: 1\n\r\n8\r\ndata: 2\n\r\n8\r\ndata")
		<-rest
		_, _ = io.WriteString(c, ": 3\n\r\n0\r\n\r\n")
	}()
	ft := NewFastTransport()
	defer ft.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+ln.Addr().String()+"/v1/x", strings.NewReader("{}"))
	resp, err := ft.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	// They came in one write: one Read hands over both (one write and flush
	// to the client), none waits for the third.
	buf := make([]byte, 1024)
	n, err := resp.Body.Read(buf)
	if err != nil || string(buf[:n]) != "data: 1\ndata: 2\n" {
		t.Fatalf("first read %q (%v), want the two whole events before the third arrives", buf[:n], err)
	}
	close(rest)
	tail, err := io.ReadAll(resp.Body)
	if err != nil || string(tail) != "data: 3\n" {
		t.Errorf("rest %q (%v), want %q", tail, err, "data: 3\n")
	}
	resp.Body.Close()
	<-served
}
