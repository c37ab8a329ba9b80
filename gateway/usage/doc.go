// Package usage reads what a body says, without decoding it whole: the request scan (the
// model a request names, whether it streams, whether it asked for stream usage, its output
// bound and number of choices, its media parts, and the byte ranges of the system prompt,
// tools and messages that session affinity and the loop guard hash), the body rewrite for
// another upstream model or for stream usage, and the usage taps that sum the tokens an
// upstream answer reports (JSON bodies and server-sent events, OpenAI, Anthropic and
// Gemini shapes) as it passes, optionally stripping the usage event the gateway asked for
// on the client's behalf; and the framing of an event stream (SendableEnd: how much of it
// can go to the client now).
//
// It owns byte scanning only. It never does I/O, never holds a body beyond the call that
// is given it (a Tap holds at most one unfinished SSE event), never validates what the
// upstream will validate, and never knows of connections, limits or the gateway.
//
// # The model is the body's model and nothing else
//
// A top-level key that equals "model" under Unicode case folding (MODEL, an escaped
// \u004dODEL) is ErrFoldedModel, like a repeated model: servers that decode with
// encoding/json match keys case-insensitively and take the last match, so without the
// check a key allowed one model could be served another. Only keys of 5 to 15 bytes are
// compared, without allocation; FuzzScanBody checks that a body the scan accepts is
// served by a case-insensitive decoder as the model the scan found.
//
// # Counts
//
// Counts normalises what each upstream reports: Input (every prompt token processed, cache
// reads and writes included), CacheRead, CacheWrite, Output, and RateTokens, the figure a
// provider's own limits count (Anthropic input − cache reads + output; OpenAI and Gemini
// the total). Fields, not styles, decide: Anthropic's input_tokens leaves the cache counts
// out, OpenAI's prompt_tokens and Gemini's promptTokenCount hold them, so one tap serves
// every route. Only cached_tokens is read from a *_details object, and a malformed details
// member costs the cache count, never the usage; cached counts beyond the prompt are cut
// to it, negative counts read as 0 and sums saturate. Later values replace earlier ones
// (Anthropic's message_start stands unless message_delta repeats it; Gemini repeats its
// usageMetadata in every chunk). The scanner jumps from quote to quote inside strings with
// bytes.IndexByte, and the captured usage object starts in a buffer inside the tap.
//
// # Stream usage the client did not ask for
//
// To count an OpenAI chat or completion stream whose client did not set
// stream_options.include_usage (a connection with token limits, or a priced model), the
// gateway adds it and the tap strips what was added: an event with top-level usage and no
// choices is dropped, one with choices keeps them and its finish_reason and loses only
// usage, so clients that index choices[0] keep working. Events are relayed whole or held
// back (SendableEnd; the relay holds at most 1 MiB of one), so an error event sent after a
// break never lands inside half an event.
package usage
