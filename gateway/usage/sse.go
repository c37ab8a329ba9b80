package usage

import "bytes"

// The framing of an event stream as the gateway relays it: complete events
// go to the client at once, the start of an event still under way is held
// back, so that an event of the gateway's own (an error) never lands inside
// an upstream one.

// SendableEnd returns how much of b, which starts at an SSE event boundary,
// can be sent now: every complete event, and after them any complete
// comment lines (keep-alives) and blank lines, which change no event state.
// What is left is the start of an event still under way.
func SendableEnd(b []byte) int {
	end := eventsEnd(b)
	for end < len(b) {
		switch b[end] {
		case '\n', '\r':
			end++
			continue
		case ':':
			i := bytes.IndexAny(b[end:], "\r\n")
			if i < 0 {
				return end
			}
			end += i + 1
			continue
		}
		return end
	}
	return end
}

// eventsEnd returns the length of the longest prefix of b that ends with a
// complete SSE event, 0 if none does: the end of a blank line, that is a
// line terminator (CRLF, LF or CR) right after another one. b starts at an
// event boundary.
func eventsEnd(b []byte) int {
	for j := len(b) - 1; j >= 1; j-- {
		switch b[j] {
		case '\n':
			switch {
			case b[j-1] == '\n': // LF LF
				return j + 1
			case b[j-1] == '\r' && j >= 2 && (b[j-2] == '\n' || b[j-2] == '\r'): // (CR)LF CRLF, CR CRLF
				return j + 1
			}
		case '\r':
			if b[j-1] == '\r' || b[j-1] == '\n' { // CR CR, LF CR (a following LF would only complete the CRLF)
				return j + 1
			}
		}
	}
	return 0
}
