// Package limits holds Gatehouse's configuration values and their rules: a connection's
// Overrides (caps, waits, rates, adaptive, shadow, affinity, drainAtPercent), the global
// Settings (defaults, failover and breaker, priority aging, output reserves, affinity,
// prices, model aliases, alert webhooks), a client key's ClientKeyLimits (weight, cap,
// rates, token and money budgets, priority, models, session guards), and the rules for
// reading and writing them; prices (Prices, Rate: exact micro-dollars, Rate.Cost) and the
// dashboard's textarea codecs.
//
// Writes are strict: DecodeOverrides, DecodeSettings and DecodeClientKeyLimits reject
// anything that is not exactly right and report every problem with its path, as
// FieldErrors: an English message, which the REST API shows as it is, and a stable code
// with arguments (Codes), by which the dashboard words the same problem in the user's
// language. Reads are fail-open: Normalize and NormalizeSettings drop whatever is
// malformed in a stored document (so that part has no cap) and return warnings, so a
// hand-edited row can never crash or lock out the gateway. One reflection-based decoder
// serves both; numbers are parsed exactly (no float64), so 1e3 is whole and 1.5 is not.
// Repeated JSON keys are refused on write; on a fail-open read a repeat is dropped
// without hiding a rule its first value breaks.
//
// The API's PATCH is a JSON Merge Patch (MergePatch) applied to the stored document, whose
// result is then strictly decoded. Resolve combines settings and overrides into the
// Effective limits the gateway applies, and says where each value comes from. Range rules
// live in validate tags and are checked by one shared validator (Validator,
// NewValidator); TranslateValidation turns its errors into FieldErrors for other packages.
//
// # Rules beyond the ranges
//
//   - Zero means "the default" for maxWaitMs, executionMaxWaitMs and maxQueueDepth, and
//     "none" for maxConcurrent, rpm, rpd, tpm, tpd and minTime.
//   - Model keys are 1–128 characters of valid UTF-8 without whitespace, control
//     characters, "=" or ",", so every stored key fits the model=cap textarea and saves
//     back unchanged; a connection caps at most 500 models (MaxModelCaps), and a stored
//     map over that is dropped whole on read.
//   - adaptive is a JSON boolean and needs a maxConcurrent ≥ 1 (refused on write, dropped
//     with a warning on read); an empty shadow object is normalised away.
//   - Aliases: at most 500 (MaxAliases), both sides model names by the model-key rule, and
//     a target may not be an alias (itself included): 422 at aliases.<name> on write,
//     dropped on read. A target is not checked against the connections, so an alias may
//     be set up before its model is served.
//   - Prices are micro-dollars per million tokens (Micros, int64; at most 6 decimals,
//     0–10 000). Prices.Lookup resolves provider/model, then the bare id, then
//     provider/*, once per target when a config is applied. cachedInput defaults to input
//     and cacheWrite to 1.25 × input; Rate.Cost works in quarters of a micro-dollar in
//     128-bit integers (so the default write price is exact), rounds the sum up once,
//     saturates and allocates nothing; Rate.Split gives the parts.
//   - Money budgets are dollars with at most 2 decimals, 0–1 000 000, stored as Micros.
//   - A priority names admission's classes (interactive, standard, batch); a test keeps
//     the names in step.
//
// # Textareas
//
// The dashboard's textareas are codecs here, each fuzzed for Format(Parse(x)) canonical
// and Parse(Format(m)) == m and reporting one LineError type: per-model caps
// (ParseModelCaps), provider caps (ParseProviderCaps, which reads its ranges from the
// ProviderSettings validate tags, so the settings page accepts exactly what the API
// accepts; a line that says what the stored entry already means keeps it as stored),
// aliases, prices (one "pattern input output [cachedInput [cacheWrite]]" a line, "-" for
// a price not set, so an absent price survives a save) and a key's models list. The
// dashboard's form rules (absent field vs blank, numbers) are ApplyForm and
// ApplyClientKeyForm, written once for both forms.
package limits
