package limits

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MergePatch applies an RFC 7396 JSON Merge Patch to target and returns the
// result: when patch is an object, each of its members with a null value
// removes that key from target, and every other member is merged into
// target's value for that key recursively (a non-object target is replaced
// by an empty object first); when patch is anything else, it replaces target
// whole. An empty target counts as null. Numbers are kept as written (1.0
// stays 1.0); object keys come out sorted; duplicate keys keep the last.
// It fails only when target or patch is not valid JSON.
func MergePatch(target, patch []byte) ([]byte, error) {
	var t any
	if len(trimJSONSpace(target)) > 0 {
		var err error
		if t, err = decodeJSON(target); err != nil {
			return nil, fmt.Errorf("limits: merge patch: target: %w", err)
		}
	}
	p, err := decodeJSON(patch)
	if err != nil {
		return nil, fmt.Errorf("limits: merge patch: patch: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(mergeValue(t, p)); err != nil {
		return nil, fmt.Errorf("limits: merge patch: encode: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// mergeValue is the MergePatch algorithm of RFC 7396 section 2.
func mergeValue(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = make(map[string]any, len(p))
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergeValue(t[k], v)
	}
	return t
}

// errTrailingData reports bytes after the JSON value.
var errTrailingData = errors.New("unexpected data after the JSON value")

// decodeJSON decodes exactly one JSON value, keeping numbers as json.Number.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errTrailingData
	}
	return v, nil
}
