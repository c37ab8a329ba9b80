package limits

import (
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Model aliases (settings "aliases"): a name a client sends as its model,
// mapped to the upstream model of the day ("fast" → "zai/glm-5"). The
// gateway resolves an alias once, before routing, so a target must be a
// model, never another alias.

const (
	// KeyAliases is the settings key of the aliases map.
	KeyAliases = "aliases"
	// MaxAliases is the most aliases the settings may hold (the max rule on
	// Settings.Aliases; a test keeps them in step).
	MaxAliases = 500
)

// aliasProblems adds the rule that spans entries to the problems of a
// decoded settings document: an alias whose target is itself an alias
// (itself included) is a problem at aliases.<name>. It is a validation
// problem, so a fail-open read drops that alias and keeps the others.
func aliasProblems(problems []problem, s *Settings) []problem {
	for _, name := range slices.Sorted(maps.Keys(s.Aliases)) {
		target := s.Aliases[name]
		if _, chained := s.Aliases[target]; chained {
			problems = append(problems, problem{
				path:       []string{KeyAliases, name},
				msg:        aliasOfAlias(target),
				validation: true,
			})
		}
	}
	return problems
}

func aliasOfAlias(target string) message {
	return newMessage(CodeAliasOfAlias, "names the alias %q; an alias must name a model (provider/model or a bare id), not another alias", target)
}

// ParseAliases reads the settings page's aliases textarea: one alias=model
// a line, commas also separating entries ("fast=zai/glm-5, big=glm-5").
// White space around entries, names and targets is trimmed; blank lines and
// empty entries are ignored. Both sides are model names as per-model caps
// take them (1 to 128 characters, no white space, '=' or ','). Every bad
// entry is reported with its line number: an alias given twice (on the later
// line), an alias whose target is an alias (on its own line, wherever the
// other is), and text with more than MaxAliases aliases (once, on the line of
// the first alias too many). On any error the map is nil and nothing may be
// saved; text with no entries gives a nil map and no errors.
func ParseAliases(text string) (map[string]string, []LineError) {
	var (
		r       textReport[string]
		tooMany bool
		lines   = map[string]struct {
			line  int
			entry string
		}{}
	)
	for lineNo, entry := range textEntries(text, ",") {
		fail := func(m message) { r.fail(lineNo, entry, "", m) }
		name, target, ok := strings.Cut(entry, "=")
		if !ok {
			fail(newMessage(CodeAliasLineShape, "expected alias=model, like fast=zai/glm-5"))
			continue
		}
		name, target = strings.TrimSpace(name), strings.TrimSpace(target)
		nameOK, targetOK := validModelKey(name), validModelKey(target)
		if !nameOK || !targetOK {
			fail(describe(tagModelKey, "", reflect.String))
		}
		if nameOK {
			if prev, dup := r.seen(name, lineNo); dup {
				fail(newMessage(CodeDuplicateAlias, "alias %q is already given on line %d", name, prev))
				continue
			}
		}
		if !nameOK || !targetOK {
			continue
		}
		if len(r.values) == MaxAliases {
			if !tooMany {
				fail(newMessage(CodeTooManyAliases, "at most %d aliases can be set", MaxAliases))
			}
			tooMany = true
			continue
		}
		r.set(name, target)
		lines[name] = struct {
			line  int
			entry string
		}{lineNo, entry}
	}
	for _, name := range slices.Sorted(maps.Keys(r.values)) {
		if target := r.values[name]; r.values[target] != "" {
			at := lines[name]
			r.fail(at.line, at.entry, "", aliasOfAlias(target))
		}
	}
	slices.SortStableFunc(r.errs, func(a, b LineError) int { return a.Line - b.Line })
	return r.result()
}

// FormatAliases writes aliases as ParseAliases reads them: one alias=model a
// line, aliases sorted, no trailing newline; an empty map gives "". For
// every map ParseAliases accepts, ParseAliases(FormatAliases(m)) gives m.
func FormatAliases(aliases map[string]string) string {
	return formatLines(aliases, func(name, target string) string { return name + "=" + target })
}
