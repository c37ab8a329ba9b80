// Package limits holds Gatehouse's rate-limit configuration: a connection's
// Overrides, the global Settings, and the rules for reading and writing
// them.
//
// Writes are strict: DecodeOverrides and DecodeSettings reject anything
// that is not exactly right and report every problem with its path, as
// FieldErrors: an English message, which the REST API shows as it is, and a
// stable code with arguments (Codes), by which the dashboard words the same
// problem in the user's language. Reads
// are fail-open: Normalize and NormalizeSettings drop whatever is malformed
// in a stored document (so that part has no cap) and return warnings, so a
// hand-edited row can never crash or lock out the gateway.
//
// The dashboard edits per-model caps as model=cap text (ParseModelCaps,
// FormatModelCaps); the API's PATCH is a JSON Merge Patch (MergePatch)
// applied to the stored document, whose result is then strictly decoded.
// Resolve combines settings and overrides into the Effective limits the
// gateway applies, and says where each value comes from.
//
// Range rules live in validate tags and are checked by one shared
// validator (Validator, NewValidator); TranslateValidation turns its errors
// into FieldErrors for other packages too.
package limits
