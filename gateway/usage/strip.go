package usage

import (
	"bytes"
	"encoding/json"
)

// stripUsage decides the fate of a stream event whose data carries a
// top-level usage object the gateway asked for on the client's behalf: an
// event with no choices (the usage chunk include_usage adds) is dropped
// (nil); an event that also carries choices (some providers put usage on
// the last delta, with its finish_reason) keeps them and loses only its
// usage member. An event it cannot read is kept as it is: stripping may
// only remove what the gateway added, never content.
func stripUsage(ev []byte) []byte {
	var data []byte
	var other [][]byte // the event's lines that are not data lines, in order
	dataLines := 0
	for line := range bytes.Lines(ev) {
		body := bytes.TrimRight(line, "\r\n")
		if len(body) == 0 {
			continue
		}
		if v, ok := bytes.CutPrefix(body, []byte("data:")); ok {
			if dataLines > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
			dataLines++
			continue
		}
		other = append(other, line)
	}
	start, end, choices, ok := usageMember(data)
	if !ok {
		return ev
	}
	if !choices {
		return nil
	}
	out := make([]byte, 0, len(ev))
	for _, l := range other {
		out = append(out, l...)
	}
	out = append(out, "data: "...)
	out = append(out, data[:start]...)
	out = append(out, data[end:]...)
	return append(out, "\n\n"...)
}

// usageMember finds obj's top-level "usage" member: the span [start, end)
// to cut (with the comma that separates it from a neighbour), and whether
// obj has a non-empty "choices" array.
func usageMember(obj []byte) (start, end int, choices, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, false, false
	}
	found, first := false, true
	for dec.More() {
		from := int(dec.InputOffset())
		k, err := dec.Token()
		if err != nil {
			return 0, 0, false, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return 0, 0, false, false
		}
		to := int(dec.InputOffset())
		switch k {
		case "usage":
			if found {
				return 0, 0, false, false // twice: not ours to pick
			}
			found, start, end = true, from, to
			if first {
				// The first member: cut the comma after it instead.
				rest := obj[to:]
				i := 0
				for i < len(rest) && (rest[i] == ' ' || rest[i] == '\t' || rest[i] == '\n' || rest[i] == '\r') {
					i++
				}
				if i < len(rest) && rest[i] == ',' {
					end = to + i + 1
				}
			}
		case "choices":
			var cs []json.RawMessage
			choices = json.Unmarshal(v, &cs) == nil && len(cs) > 0
		}
		first = false
	}
	return start, end, choices, found
}
