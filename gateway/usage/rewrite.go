package usage

import (
	"encoding/json"
	"unicode/utf8"
)

// rewriteModel returns body with the model string literal replaced by model,
// JSON-quoted. Everything else is copied byte for byte into dst[:0].
func rewriteModel(dst, body []byte, info Request, model string) []byte {
	dst = append(dst[:0], body[:info.modelStart]...)
	dst = AppendJSONString(dst, model)
	return append(dst, body[info.modelEnd:]...)
}

// includeUsageMember is what RewriteBody inserts when the client sent no
// stream_options.
const includeUsageMember = `"stream_options":{"include_usage":true},`

// RewriteBody returns body with the model literal replaced by model (when
// it differs from info.Model) and, with addUsage, stream_options set to
// include usage: inserted as the first member when absent, or the existing
// value replaced by a copy with include_usage true (other options kept).
// Everything else is copied byte for byte into dst[:0].
func RewriteBody(dst, body []byte, info Request, model string, addUsage bool) []byte {
	type edit struct {
		start, end int
		text       []byte
	}
	var edits [2]edit
	n := 0
	if model != info.Model {
		edits[n] = edit{info.modelStart, info.modelEnd, AppendJSONString(nil, model)}
		n++
	}
	if addUsage {
		if info.streamOptEnd == 0 {
			edits[n] = edit{info.objStart, info.objStart, []byte(includeUsageMember)}
		} else {
			edits[n] = edit{info.streamOptStart, info.streamOptEnd, withIncludeUsage(body[info.streamOptStart:info.streamOptEnd])}
		}
		n++
	}
	if n == 2 && edits[1].start < edits[0].start {
		edits[0], edits[1] = edits[1], edits[0]
	}
	dst = dst[:0]
	at := 0
	for _, e := range edits[:n] {
		dst = append(dst, body[at:e.start]...)
		dst = append(dst, e.text...)
		at = e.end
	}
	return append(dst, body[at:]...)
}

// withIncludeUsage returns the stream_options value v with include_usage
// set to true. A value that is not an object becomes {"include_usage":true}.
func withIncludeUsage(v []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil || m == nil {
		return []byte(`{"include_usage":true}`)
	}
	m["include_usage"] = json.RawMessage("true")
	out, err := json.Marshal(m)
	if err != nil {
		return []byte(`{"include_usage":true}`)
	}
	return out
}

// AppendJSONString appends s as a JSON string literal.
func AppendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}
