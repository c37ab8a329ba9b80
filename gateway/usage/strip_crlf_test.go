package usage

import (
	"strings"
	"testing"
)

// TestStripCRLFStreamKeepsEveryEvent: an event stream framed with CRLF through
// a tap that strips the injected usage chunk: the client gets every other
// event, in order and byte for byte, and the closing [DONE], whatever the
// size of the reads; only the usage chunk is gone, and its tokens are counted.
func TestStripCRLFStreamKeepsEveryEvent(t *testing.T) {
	t.Parallel()
	const usageChunk = `data: {"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}` + "\r\n\r\n"
	events := []string{
		`data: {"id":"c","choices":[{"delta":{"role":"assistant"}}]}` + "\r\n\r\n",
		": keep-alive\r\n\r\n",
		`data: {"id":"c","choices":[{"delta":{"content":"Hello"}}],"usage":null}` + "\r\n\r\n",
		"event: chunk\r\n" + `data: {"id":"c","choices":[{"delta":{"content":" world"}}]}` + "\r\n\r\n",
		`data: {"id":"c","choices":[{"delta":{},"finish_reason":"stop"}],"usage":null}` + "\r\n\r\n",
	}
	body := strings.Join(events, "") + usageChunk + "data: [DONE]\r\n\r\n"
	want := strings.Join(events, "") + "data: [DONE]\r\n\r\n"
	for _, step := range []int{len(body), 1, 2, 5, 64} {
		tap := NewTap(true, true)
		var out []byte
		for i := 0; i < len(body); i += step {
			out = append(out, tap.Feed([]byte(body[i:min(i+step, len(body))]))...)
		}
		out = append(out, tap.Flushed()...)
		if got := string(out); got != want {
			t.Errorf("reads of %d: client gets\n%q\nwant\n%q", step, got, want)
		}
		if !strings.HasSuffix(string(out), "data: [DONE]\r\n\r\n") {
			t.Errorf("reads of %d: the client never got [DONE]", step)
		}
		if got := tap.Tokens(); got != 12 {
			t.Errorf("reads of %d: tokens = %d, want 12", step, got)
		}
		tap.Release()
	}
}

// TestStripUsageKeepsWhatItCannotRead: an event whose data lines do not join into
// one JSON object (lines are joined with a newline, so a token split across two
// lines stays split) is kept as it is: stripping only removes what it can read.
// A usage-only chunk cut short after its usage member (blanks after it, no
// closing brace) is still the gateway's own, and dropped.
func TestStripUsageKeepsWhatItCannotRead(t *testing.T) {
	t.Parallel()
	kept := "data: {\"choices\":[],\"usage\":{\"total_tokens\":1},\"x\":tr\ndata: ue}\n\n"
	if got := stripUsage([]byte(kept)); string(got) != kept {
		t.Errorf("stripUsage(%q) = %q, want it kept as it is", kept, got)
	}
	cut := "data: {\"usage\":{\"total_tokens\":1}  \n\n"
	if got := stripUsage([]byte(cut)); got != nil {
		t.Errorf("stripUsage(%q) = %q, want it dropped", cut, got)
	}
}

// TestStripAfterUnterminatedString: an event whose data line ends inside a JSON
// string (a broken upstream event) still ends at its blank line, with LF or
// CRLF framing: the events after it pass on as they are and the usage chunk is
// stripped, whatever the size of the reads.
func TestStripAfterUnterminatedString(t *testing.T) {
	t.Parallel()
	// A short string is scanned byte by byte, a longer one skipped up to
	// its next quote, backslash or line end (stringStop), which with reads
	// of one byte is the read's first.
	for _, tc := range []struct{ nl, text string }{{"\n", "abc"}, {"\r\n", "abc"}, {"\n", "abcdefgh"}, {"\r\n", "abcdefgh"}} {
		nl := tc.nl
		broken := `data: {"choices":[{"delta":{"content":"` + tc.text + nl + nl
		next := `data: {"choices":[{"delta":{"content":"x"}}],"usage":null}` + nl + nl
		usageChunk := `data: {"choices":[],"usage":{"total_tokens":7}}` + nl + nl
		done := "data: [DONE]" + nl + nl
		body := broken + next + usageChunk + done
		want := broken + next + done
		for _, step := range []int{len(body), 1, 3} {
			tap := NewTap(true, true)
			var out []byte
			for i := 0; i < len(body); i += step {
				out = append(out, tap.Feed([]byte(body[i:min(i+step, len(body))]))...)
			}
			out = append(out, tap.Flushed()...)
			if string(out) != want {
				t.Errorf("%q framing, reads of %d: client gets\n%q\nwant\n%q", nl, step, out, want)
			}
			if got := tap.Tokens(); got != 7 {
				t.Errorf("%q framing, reads of %d: tokens = %d, want 7", nl, step, got)
			}
			tap.Release()
		}
	}
}

// TestStripHoldsAnEventUpToTheBound: an event still under way is held back
// (so that its usage can be stripped) while it is at most maxEventStrip bytes;
// one byte more and stripping ends, the event going out whole. The usage is
// counted either way. The event comes in reads of 4 KiB, as a relay reads it.
func TestStripHoldsAnEventUpToTheBound(t *testing.T) {
	t.Parallel()
	const head = `data: {"choices":[],"usage":{"total_tokens":5},"pad":"`
	const tail = `"}` + "\n" // the blank line's "\n" comes in a read of its own
	for _, tc := range []struct {
		name string
		held int // bytes held when the event's last read ends
		want string
	}{
		{"at the bound", maxEventStrip, "data: [DONE]\n\n"},
		{"one byte over", maxEventStrip + 1, ""}, // want: the event itself, then [DONE]
	} {
		ev := head + strings.Repeat("x", tc.held-len(head)-len(tail)) + tail
		want := tc.want
		if want == "" {
			want = ev + "\n" + "data: [DONE]\n\n"
		}
		tap := NewTap(true, true)
		var out []byte
		for i := 0; i < len(ev); i += 4 << 10 {
			out = append(out, tap.Feed([]byte(ev[i:min(i+4<<10, len(ev))]))...)
		}
		for _, p := range []string{"\n", "data: [DONE]\n\n"} {
			out = append(out, tap.Feed([]byte(p))...)
		}
		out = append(out, tap.Flushed()...)
		if string(out) != want {
			t.Errorf("%s: client gets %d bytes starting %.60q, want %d starting %.60q", tc.name, len(out), out, len(want), want)
		}
		if got := tap.Tokens(); got != 5 {
			t.Errorf("%s: tokens = %d, want 5", tc.name, got)
		}
		tap.Release()
	}
}

// TestStripReadsOfOneLine: an upstream that flushes line by line, so that
// each read ends right after a line end, LF or CRLF framed: every event but
// the usage chunk reaches the client as it was sent, and its tokens are
// counted.
func TestStripReadsOfOneLine(t *testing.T) {
	t.Parallel()
	for _, nl := range []string{"\n", "\r\n"} {
		events := []string{
			`data: {"id":"c","choices":[{"delta":{"role":"assistant"}}]}` + nl + nl,
			"event: chunk" + nl + `data: {"id":"c","choices":[{"delta":{"content":"hi"}}]}` + nl + nl,
			": keep-alive" + nl + nl,
		}
		usageChunk := `data: {"id":"c","choices":[],"usage":{"total_tokens":12}}` + nl + nl
		body := strings.Join(events, "") + usageChunk + "data: [DONE]" + nl + nl
		want := strings.Join(events, "") + "data: [DONE]" + nl + nl
		tap := NewTap(true, true)
		var out []byte
		for line := range strings.Lines(body) {
			out = append(out, tap.Feed([]byte(line))...)
		}
		out = append(out, tap.Flushed()...)
		if string(out) != want {
			t.Errorf("%q framing: client gets\n%q\nwant\n%q", nl, out, want)
		}
		if got := tap.Tokens(); got != 12 {
			t.Errorf("%q framing: tokens = %d, want 12", nl, got)
		}
		tap.Release()
	}
}
