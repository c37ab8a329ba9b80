package health

import (
	"encoding/json"
	"strings"
)

// overloadWords are what an upstream's error code, type or message says
// when the account has too many requests at once or is overloaded.
var overloadWords = []string{"concurrency", "too many concurrent", "overloaded"}

// StatusOverloaded is Anthropic's 529 "overloaded".
const StatusOverloaded = 529

// NamesOverload reports whether an upstream error body's code, type or
// message (OpenAI {"error":{…}}, Anthropic {"type":"error","error":{…}}, or
// the same keys at the top level) says concurrency or overload.
func NamesOverload(body []byte) bool {
	if len(body) == 0 {
		return false
	}
	type fields struct {
		Code    json.RawMessage `json:"code"`
		Type    json.RawMessage `json:"type"`
		Message json.RawMessage `json:"message"`
	}
	var doc struct {
		fields
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return false
	}
	check := func(f fields) bool {
		for _, raw := range []json.RawMessage{f.Code, f.Type, f.Message} {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				s = string(raw) // a number code, say
			}
			s = strings.ToLower(s)
			for _, w := range overloadWords {
				if strings.Contains(s, w) {
					return true
				}
			}
		}
		return false
	}
	if check(doc.fields) {
		return true
	}
	var inner fields
	if json.Unmarshal(doc.Error, &inner) == nil && check(inner) {
		return true
	}
	// "error" as a plain string.
	return check(fields{Message: doc.Error})
}
