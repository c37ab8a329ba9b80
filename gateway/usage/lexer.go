package usage

// scanner is the byte-level JSON reader under Scan and the usage taps: it
// skips whitespace, literals, strings and whole values without decoding
// them, so a request body is read once and never unmarshalled.

// maxNesting bounds how deep skipped values may nest, so a hostile body
// cannot exhaust the stack.
const maxNesting = 512

type scanner struct {
	b []byte
	i int
	// The spans of the last two elements of the array firstElement skipped.
	prevS, prevE, lastS, lastE int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// lit consumes the literal word if it is next and is not followed by more
// word characters.
func (s *scanner) lit(word string) bool {
	end := s.i + len(word)
	if end > len(s.b) || string(s.b[s.i:end]) != word {
		return false
	}
	if end < len(s.b) && isWordByte(s.b[end]) {
		return false
	}
	s.i = end
	return true
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '+' || c == '-'
}

// str consumes a JSON string and returns its span (quotes included) and
// whether it contains escapes.
func (s *scanner) str() (start, end int, escaped, ok bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return 0, 0, false, false
	}
	start = s.i
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return start, s.i, escaped, true
		case c == '\\':
			escaped = true
			j++
		case c < 0x20:
			return 0, 0, false, false
		}
	}
	return 0, 0, false, false
}

// value skips one JSON value of any kind.
func (s *scanner) value(depth int) bool {
	if depth > maxNesting || s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, _, ok := s.str()
		return ok
	case c == '{':
		s.i++
		s.ws()
		if s.eat('}') {
			return true
		}
		for {
			s.ws()
			if _, _, _, ok := s.str(); !ok {
				return false
			}
			s.ws()
			if !s.eat(':') {
				return false
			}
			s.ws()
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			return s.eat('}')
		}
	case c == '[':
		s.i++
		s.ws()
		if s.eat(']') {
			return true
		}
		for {
			s.ws()
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			return s.eat(']')
		}
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		// c is a word byte itself: the number is at least c.
		for s.i < len(s.b) && isWordByte(s.b[s.i]) {
			s.i++
		}
		return true
	}
	return false
}
