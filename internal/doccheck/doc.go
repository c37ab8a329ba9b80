// Package doccheck holds the repository's checks on its own documentation, as tests:
// every Go package under the module root has a doc comment that says what it owns;
// neither the Markdown documents (README.md, docs/*.md) nor the comments of non-test Go
// files refer to the history of the work (issue numbers, round names, dated sittings) —
// that history lives in git log, and a document that cites it goes stale the day it is
// written; README.md, docs/ARCHITECTURE.md and docs/BENCHMARKS.md stay within their line
// budgets; and every test, benchmark or fuzz target a document names exists.
//
// The package has no code of its own; its tests walk whatever directories exist when they
// run, so a package added later is held to the same rules.
package doccheck
