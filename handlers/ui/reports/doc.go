// Package reports builds the dashboard's reports from the request log's
// aggregates (store.RequestUsage, store.CostRanking): the /usage page's ranges and
// charts (requests, tokens and spend per key, top models), the overview's request
// chart, the prompt-cache table and the cost ranking. It reads and shapes; the
// pages themselves are package web's templates, served by package ui.
package reports
