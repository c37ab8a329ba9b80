package httpkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// Media types the API reads.
const (
	JSONContentType       = "application/json"
	MergePatchContentType = "application/merge-patch+json"
)

// ReadJSON reads r's body, at most MaxBodyBytes, as exactly one JSON value. It returns
// a 415 unless the body is declared as application/json (or, when mergePatch is set,
// application/merge-patch+json, read the same way), an *http.MaxBytesError past the
// limit (413), a 400 for a body that is not JSON, and a 422 naming every key given more
// than once, since decoders would otherwise silently keep one of them.
func ReadJSON(w http.ResponseWriter, r *http.Request, mergePatch bool) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !(mt == JSONContentType || mergePatch && mt == MergePatchContentType) {
		want := JSONContentType
		if mergePatch {
			want += " or " + MergePatchContentType
		}
		return nil, NewAPIError(http.StatusUnsupportedMediaType, "the request body must be "+want)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, tooBig
		}
		return nil, fmt.Errorf("handlers: read request body: %w", err)
	}
	if err := checkSyntax(body); err != nil {
		return nil, err
	}
	if dups := DuplicateKeys(body); len(dups) > 0 {
		return nil, &APIError{Status: http.StatusUnprocessableEntity, Detail: "the request has invalid fields", Fields: limits.SortFieldErrors(dups)}
	}
	return body, nil
}

// checkSyntax returns a 400 unless body is exactly one JSON value.
func checkSyntax(body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return NewAPIError(http.StatusBadRequest, "the request body is empty; send a JSON document")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var v json.RawMessage
	err := dec.Decode(&v)
	if err == nil {
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			return NewAPIError(http.StatusBadRequest, "the request body holds more than one JSON value")
		}
		return nil
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return NewAPIError(http.StatusBadRequest,
			"the request body is not valid JSON (error at byte "+strconv.FormatInt(syn.Offset, 10)+")")
	}
	return NewAPIError(http.StatusBadRequest, "the request body is not valid JSON (it ends too early)")
}

// jsonFrame is one open object or array while duplicateKeys walks a document.
type jsonFrame struct {
	object    bool
	expectKey bool
	key       string
	index     int
	seen      map[string]bool
}

// DuplicateKeys returns one error for every object key repeated within its object,
// with its path ("rateLimitOverrides.modelConcurrency.glm-5"; array elements by
// index). body must be valid JSON.
func DuplicateKeys(body []byte) limits.FieldErrors {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var (
		stack []*jsonFrame
		out   limits.FieldErrors
	)
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		top := stack[len(stack)-1]
		if top.object {
			top.expectKey = true
		} else {
			top.index++
		}
	}
	path := func(key string) string {
		segs := make([]string, 0, len(stack))
		for _, f := range stack[:len(stack)-1] {
			if f.object {
				segs = append(segs, f.key)
			} else {
				segs = append(segs, strconv.Itoa(f.index))
			}
		}
		return strings.Join(append(segs, key), ".")
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			// io.EOF at the end; anything else cannot happen after checkSyntax.
			return out
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				stack = append(stack, &jsonFrame{object: d == '{', expectKey: d == '{', seen: map[string]bool{}})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
			top := stack[n-1]
			key, _ := tok.(string)
			if top.seen[key] {
				out = append(out, FieldError(path(key), limits.CodeDuplicateField))
			}
			top.seen[key] = true
			top.key, top.expectKey = key, false
			continue
		}
		valueDone()
	}
}

// DecodeStringMembers strictly decodes a JSON object whose members are all strings:
// it stores the value of each key of fields in its pointer and reports a document that
// is not an object, unknown keys, nulls and values that are not strings.
func DecodeStringMembers(data []byte, fields map[string]*string) limits.FieldErrors {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil || members == nil {
		return limits.FieldErrors{FieldError("", limits.CodeNotObject)}
	}
	var errs limits.FieldErrors
	for key, raw := range members {
		dst, ok := fields[key]
		switch {
		case !ok:
			errs = append(errs, FieldError(key, limits.CodeUnknownField))
		case string(bytes.TrimSpace(raw)) == "null":
			errs = append(errs, FieldError(key, codeNotNull))
		case json.Unmarshal(raw, dst) != nil:
			errs = append(errs, FieldError(key, codeNotString))
		}
	}
	return errs
}

// DropFields returns the problems of validated whose top-level field has no problem in
// decoded already: a value that did not decode needs no second message.
func DropFields(validated, decoded limits.FieldErrors) limits.FieldErrors {
	var out limits.FieldErrors
	for _, v := range validated {
		top, _, _ := strings.Cut(v.Field, ".")
		if !slices.ContainsFunc(decoded, func(d limits.FieldError) bool { return d.Field == top }) {
			out = append(out, v)
		}
	}
	return out
}
