package outbound

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"
)

// fastResponseHeader converts the upstream's headers for the gateway's
// header rules (CopyResponseHeader), which work on http.Header.
//
// It allocates the map and two blocks for everything else, as
// http.Header.Clone does: one string holding every value (and every name
// not in commonResponseKeys) and one []string that each name's values
// slice (capped, so that an append copies rather than writing into the
// next name's values).
func fastResponseHeader(h *fasthttp.ResponseHeader) http.Header {
	n, size := 0, 0
	for k, v := range h.All() {
		n++
		size += len(v)
		if _, ok := commonResponseKeys[string(k)]; !ok {
			size += len(k)
		}
	}
	out := make(http.Header, n+2)
	if n == 0 {
		return out
	}
	var b strings.Builder
	b.Grow(size)
	for k, v := range h.All() {
		if _, ok := commonResponseKeys[string(k)]; !ok {
			b.Write(k)
		}
		b.Write(v)
	}
	all := b.String()
	vals := make([]string, n)
	i, off := 0, 0
	for k, v := range h.All() {
		key, ok := commonResponseKeys[string(k)]
		if !ok {
			key = all[off : off+len(k)]
			off += len(k)
		}
		vals[i] = all[off : off+len(v)]
		off += len(v)
		if vv := out[key]; len(vv) > 0 {
			// A repeated name: its values are no longer contiguous.
			out[key] = append(vv[:len(vv):len(vv)], vals[i])
		} else {
			out[key] = vals[i : i+1 : i+1]
		}
		i++
	}
	return out
}

// commonResponseKeys saves allocating the names most upstream answers carry.
var commonResponseKeys = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{"Content-Type", "Content-Length", "Content-Encoding", "Date", "Server",
		"Cache-Control", "Connection", "Transfer-Encoding", "Vary", "Retry-After", "X-Request-Id",
		"Openai-Processing-Ms", "Openai-Version", "Request-Id", "Access-Control-Allow-Origin",
		"Strict-Transport-Security", "Cf-Ray", "Alt-Svc", "X-Content-Type-Options"} {
		m[k] = k
	}
	return m
}()

// fastBody is a response body streaming from its upstream connection.
type fastBody struct{ c *fastCall }

func (b fastBody) Read(p []byte) (int, error) {
	c := b.c
	if c.resp == nil {
		return 0, io.ErrClosedPipe
	}
	if c.eof {
		return 0, io.EOF
	}
	s := c.resp.BodyStream()
	if s == nil {
		c.eof = true
		return 0, io.EOF
	}
	n, err := s.Read(p)
	// fasthttp returns one chunk per Read. Like net/http's chunked reader,
	// go on with the chunks that are already whole in the read buffer (never
	// waiting for the network), so that a burst of events is relayed with one
	// write and flush rather than one per chunk.
	for err == nil && c.chunked && n < len(p) && chunkBuffered(c.br) {
		var m int
		m, err = s.Read(p[n:])
		n += m
	}
	if err == io.EOF {
		c.eof = true
	}
	return n, err
}

// chunkBuffered reports whether br, at the start of a chunk, holds all of
// it: the size line, the data and its CRLF (for the last chunk, the empty
// line after it). It only peeks; fasthttp does the parsing.
func chunkBuffered(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	line := bytes.IndexByte(b, '\n')
	if line < 0 {
		return false
	}
	size := 0
	for _, ch := range b[:line] {
		var d byte
		switch {
		case '0' <= ch && ch <= '9':
			d = ch - '0'
		case 'a' <= ch && ch <= 'f':
			d = ch - 'a' + 10
		case 'A' <= ch && ch <= 'F':
			d = ch - 'A' + 10
		default: // an extension, CR or a malformed line: fasthttp will tell
			return len(b) >= line+1+size+2
		}
		if size > len(b) {
			return false
		}
		size = size<<4 | int(d)
	}
	return len(b) >= line+1+size+2
}

// Close gives the connection back for reuse when the body was read to its
// end, and closes it otherwise (the upstream then stops sending).
func (b fastBody) Close() error {
	c := b.c
	if c.resp == nil {
		return nil
	}
	keep := c.eof && !c.resp.ConnectionClose()
	_ = c.resp.CloseBodyStream()
	c.end(keep)
	fasthttp.ReleaseResponse(c.resp)
	c.resp = nil
	return nil
}
