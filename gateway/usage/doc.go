// Package usage reads what a body says, without decoding it whole: the
// request scan (the model a request names, whether it streams, whether it
// asked for stream usage), the body rewrite for another upstream model or
// for stream usage, and the usage taps that sum the tokens an upstream
// answer reports (JSON bodies and server-sent events, OpenAI and Anthropic
// shapes) as it passes, optionally stripping the usage event the gateway
// asked for on the client's behalf; and the framing of an event stream
// (SendableEnd: how much of it can go to the client now).
//
// It owns byte scanning only. It never does I/O, never holds a body beyond
// the call that is given it (a Tap holds at most one unfinished SSE event),
// never validates what the upstream will validate, and never knows of
// connections, limits or the gateway.
package usage
