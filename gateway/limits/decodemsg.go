package limits

import (
	"reflect"
	"slices"
	"strings"
)

// elemMessage is the message for a list element that is not a string: the
// message of the element rule (the one after dive).
func elemMessage(rules string) message {
	parts := strings.Split(rules, ",")
	if i := slices.Index(parts, "dive"); i >= 0 && i+1 < len(parts) {
		tag, param, _ := strings.Cut(parts[i+1], "=")
		return describe(tag, param, reflect.String)
	}
	return plainMessage(CodeInvalid)
}

// mapElemMessage is the message for a map value that is not a string: the
// message of the rule after endkeys.
func mapElemMessage(rules string) message {
	parts := strings.Split(rules, ",")
	if i := slices.Index(parts, "endkeys"); i >= 0 && i+1 < len(parts) {
		tag, param, _ := strings.Cut(parts[i+1], "=")
		return describe(tag, param, reflect.String)
	}
	return plainMessage(CodeInvalid)
}

// stringMessage words the first oneof rule of a string field's rules, for
// a value that is not a string at all.
func stringMessage(rules string) message {
	for p := range strings.SplitSeq(rules, ",") {
		if tag, param, _ := strings.Cut(p, "="); tag == "oneof" {
			return describe(tag, param, reflect.String)
		}
	}
	return plainMessage(CodeInvalid)
}

// leafMessage is the message for a value that is not a whole number: the
// message of the field's range rule (map values: the rule after endkeys).
func leafMessage(rules string, mapValue bool) message {
	parts := strings.Split(rules, ",")
	if mapValue {
		if i := slices.Index(parts, "endkeys"); i >= 0 {
			parts = parts[i+1:]
		}
	} else if i := slices.Index(parts, "dive"); i >= 0 {
		parts = parts[:i]
	}
	for _, p := range parts {
		tag, param, _ := strings.Cut(p, "=")
		if tag == tagBetween || tag == tagCap {
			return describe(tag, param, reflect.Int)
		}
	}
	return plainMessage(CodeNotWhole)
}
