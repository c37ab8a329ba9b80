// Package doccheck holds the repository's checks on its own documentation, as tests: every
// Go package under the module root has a doc comment that says what it owns, and neither
// the Markdown documents (README.md, docs/*.md) nor the comments of non-test Go files refer
// to the history of the work (issue numbers, round names, dated sittings) — that history
// lives in git log, and a document that cites it goes stale the day it is written.
//
// The package has no code of its own; its tests walk whatever directories exist when they
// run, so a package added later is held to the same rule.
package doccheck
