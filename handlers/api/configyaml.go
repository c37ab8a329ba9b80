package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"go.yaml.in/yaml/v3"
)

// maxYAMLNodes bounds the values a YAML document may expand to through aliases, so a
// small file cannot make a huge document ("billion laughs").
const maxYAMLNodes = 200_000

// SyntaxError is a configuration file that is neither JSON nor YAML, with the line (from
// 1) of the problem when the parser names one.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// ConfigJSON turns a configuration file, YAML or JSON, into the JSON document the
// decoders read. JSON is read as it is (a key given twice in one object is a 422-style
// field error); anything else is read as one YAML document and converted value by value,
// numbers keeping their text, so the decoders' whole-number rule is the same for both
// (1.5 is rejected, 1e3 is 1000). Errors: *SyntaxError with the line for a document
// that does not parse or that JSON cannot hold (non-scalar keys, keys given twice,
// .inf), limits.FieldErrors for JSON with duplicate keys and for a YAML tag other than
// the core schema's (at its path, see coreTag).
func ConfigJSON(data []byte) ([]byte, error) {
	if json.Valid(data) {
		if dups := httpkit.DuplicateKeys(data); len(dups) > 0 {
			return nil, limits.SortFieldErrors(dups)
		}
		return data, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &SyntaxError{Msg: "the document is empty"}
		}
		return nil, yamlSyntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlSyntaxError(err)
		}
		return nil, &SyntaxError{Line: extra.Line, Msg: "a second YAML document starts here; give one document"}
	}
	c := &yamlConverter{}
	var buf bytes.Buffer
	if err := c.write(&buf, &doc, ""); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// yamlSyntaxError turns the parser's "yaml: line 3: …" into a SyntaxError.
func yamlSyntaxError(err error) *SyntaxError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		num, after, found := strings.Cut(rest, ": ")
		if n, perr := strconv.Atoi(num); perr == nil && found {
			return &SyntaxError{Line: n, Msg: after}
		}
	}
	return &SyntaxError{Msg: msg}
}

// yamlConverter writes YAML nodes as JSON, counting the values it writes.
type yamlConverter struct {
	nodes int
}

// coreTag reports whether n's tag is one of the types a configuration document is made
// of: the core schema's map, seq, str, int, float, bool and null (plus the timestamp
// and binary scalars the parser resolves by itself, kept as text). Any other tag — a
// language object such as !!python/object, a local !tag — is refused with its path
// (DESIGN.md, "Declarative config"): a document never asks its reader to build a type.
func coreTag(n *yaml.Node) bool {
	switch n.ShortTag() {
	case "!!map", "!!seq", "!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!!binary":
		return true
	}
	return false
}

// tagError is the problem of a node with a tag other than the core schema's, at path.
func tagError(n *yaml.Node, path string) error {
	return limits.FieldErrors{configError(path, codeConfigTag,
		fmt.Sprintf("YAML tag %s (line %d) is not allowed: write plain YAML values", n.Tag, n.Line))}
}

// write writes n, found at path (JSON-style: settings.maxAttempts, connections[0]).
func (c *yamlConverter) write(buf *bytes.Buffer, n *yaml.Node, path string) error {
	c.nodes++
	if c.nodes > maxYAMLNodes {
		return &SyntaxError{Line: n.Line, Msg: fmt.Sprintf("the document expands to more than %d values", maxYAMLNodes)}
	}
	if n.Kind != yaml.DocumentNode && n.Kind != yaml.AliasNode && !coreTag(n) {
		return tagError(n, path)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return &SyntaxError{Msg: "the document is empty"}
		}
		return c.write(buf, n.Content[0], path)
	case yaml.AliasNode:
		return c.write(buf, n.Alias, path)
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := c.write(buf, e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case yaml.MappingNode:
		return c.writeMapping(buf, n, path)
	case yaml.ScalarNode:
		return writeScalar(buf, n)
	}
	return &SyntaxError{Line: n.Line, Msg: "unsupported YAML node"}
}

func (c *yamlConverter) writeMapping(buf *bytes.Buffer, n *yaml.Node, path string) error {
	buf.WriteByte('{')
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		for k.Kind == yaml.AliasNode {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			return &SyntaxError{Line: k.Line, Msg: "a key must be a string"}
		}
		if k.ShortTag() == "!!merge" {
			return &SyntaxError{Line: k.Line, Msg: "merge keys (<<) are not supported; write the keys out"}
		}
		at := k.Value
		if path != "" {
			at = path + "." + k.Value
		}
		if !coreTag(k) {
			return tagError(k, at)
		}
		if seen[k.Value] {
			return &SyntaxError{Line: k.Line, Msg: fmt.Sprintf("key %q is given twice in one mapping; give each key once", k.Value)}
		}
		seen[k.Value] = true
		if i > 0 {
			buf.WriteByte(',')
		}
		key, err := json.Marshal(k.Value)
		if err != nil {
			return fmt.Errorf("handlers: encode YAML key: %w", err)
		}
		buf.Write(key)
		buf.WriteByte(':')
		if err := c.write(buf, v, at); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

// writeScalar writes one YAML scalar as JSON. Numbers keep their text when it is a JSON
// number, so "1.5" stays a fraction and "1e3" stays whole for limits.ParseWholeNumber.
func writeScalar(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		buf.WriteString("null")
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return &SyntaxError{Line: n.Line, Msg: "not a boolean: " + strconv.Quote(n.Value)}
		}
		buf.WriteString(strconv.FormatBool(b))
		return nil
	case "!!int", "!!float":
		if httpkit.IsJSONNumber(n.Value) {
			buf.WriteString(n.Value)
			return nil
		}
		if n.ShortTag() == "!!int" {
			var i int64
			if err := n.Decode(&i); err == nil {
				buf.WriteString(strconv.FormatInt(i, 10))
				return nil
			}
		}
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return &SyntaxError{Line: n.Line, Msg: "not a finite number: " + strconv.Quote(n.Value)}
		}
		buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		return nil
	case "!!str", "!!timestamp", "!!binary":
		// A timestamp or binary scalar is kept as its text; the decoders say what they
		// expected there.
		s, err := json.Marshal(n.Value)
		if err != nil {
			return fmt.Errorf("handlers: encode YAML string: %w", err)
		}
		buf.Write(s)
		return nil
	}
	return &SyntaxError{Line: n.Line, Msg: fmt.Sprintf("unsupported tag %s", n.Tag)}
}

// yamlFromJSON writes a JSON document as block YAML, keeping the order of object keys
// (so export lists settings, connections and client keys in the document's order).
func yamlFromJSON(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	n, err := yamlNode(dec)
	if err != nil {
		return nil, fmt.Errorf("handlers: convert to YAML: %w", err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("handlers: encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("handlers: encode YAML: %w", err)
	}
	return buf.Bytes(), nil
}

// yamlNode reads the next JSON value of dec as a YAML node.
func yamlNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := kt.(string)
				val, err := yamlNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, val)
			}
			_, err := dec.Token()
			if len(n.Content) == 0 {
				n.Style = yaml.FlowStyle
			}
			return n, err
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for dec.More() {
				e, err := yamlNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, e)
			}
			_, err := dec.Token()
			if len(n.Content) == 0 {
				n.Style = yaml.FlowStyle
			}
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", v)
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(v.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}
