package usage

import "testing"

// TestEventBoundaries: eventsEnd finds the end of the last complete event;
// sendableEnd adds the comment and blank lines after it.
func TestEventBoundaries(t *testing.T) {
	t.Parallel()
	fns := map[string]func([]byte) int{"eventsEnd": eventsEnd, "sendableEnd": SendableEnd}
	tests := []struct {
		fn   string
		name string
		in   string
		want int
	}{
		{fn: "eventsEnd", name: "empty", in: "", want: 0},
		{fn: "eventsEnd", name: "one LF event", in: "data: x\n\n", want: 9},
		{fn: "eventsEnd", name: "unfinished line", in: "data: x", want: 0},
		{fn: "eventsEnd", name: "unfinished event", in: "data: x\n", want: 0},
		{fn: "eventsEnd", name: "event then part", in: "data: x\n\ndata: y\n", want: 9},
		{fn: "eventsEnd", name: "CRLF event", in: "data: x\r\n\r\n", want: 11},
		{fn: "eventsEnd", name: "CRLF part", in: "data: x\r\n\r\ndata", want: 11},
		{fn: "eventsEnd", name: "CR event", in: "data: x\r\r", want: 9},
		{fn: "eventsEnd", name: "CRLF then LF", in: "data: x\r\n\n", want: 10},
		{fn: "eventsEnd", name: "LF then CR", in: "data: x\n\r", want: 9},
		{fn: "eventsEnd", name: "lone CRLF", in: "data: x\r\n", want: 0},
		{fn: "eventsEnd", name: "two events", in: "a\n\nb\n\nc", want: 6},
		{fn: "sendableEnd", name: "empty", in: "", want: 0},
		{fn: "sendableEnd", name: "partial event", in: "event: x\ndata: {", want: 0},
		{fn: "sendableEnd", name: "event then partial", in: "data: 1\n\ndata: {", want: 9},
		{fn: "sendableEnd", name: "comment keep-alive", in: ": ping\n", want: 7},
		{fn: "sendableEnd", name: "comments then partial", in: ": a\r\n:b\rdata: 1\n", want: 8},
		{fn: "sendableEnd", name: "unfinished comment", in: ": pi", want: 0},
		{fn: "sendableEnd", name: "event, blank lines, comment", in: "data: 1\n\n\n\r: c\n", want: 15},
		{fn: "sendableEnd", name: "comment inside an event stays", in: "data: 1\n: c\n", want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.fn+"/"+tc.name, func(t *testing.T) {
			if got := fns[tc.fn]([]byte(tc.in)); got != tc.want {
				t.Errorf("%s(%q) = %d, want %d", tc.fn, tc.in, got, tc.want)
			}
		})
	}
}
