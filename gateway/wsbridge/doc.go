// Package wsbridge serves the Responses API over WebSocket (Codex's default transport):
// GET /v1/responses with Upgrade: websocket. The client key is checked before the upgrade
// (Gateway.CheckUpgrade runs the request flow's own authentication); each
// {"type":"response.create",…} message on the socket is then handed to the gateway's own
// request flow as the streaming POST /v1/responses it stands for, and each server-sent
// event of the answer goes back to the client as one text message. The bridge never
// routes, admits or logs anything itself: every turn is one ordinary gateway request, with
// its gates, budgets, failover, request-log row and trace. Every other request, a plain
// GET /v1/responses too, goes to the gateway untouched.
//
// Turns on one socket run one at a time, in order. A turn the gateway refuses or that
// fails becomes an {"type":"error",…} message (the HTTP status, Gatehouse's code,
// retry_after, and headers.retry-after where Codex reads it) and the socket stays open. A
// client that closes the socket mid-turn cancels that turn like a hang-up. The socket is
// closed with 1001 (going away) after the settings' defaultExecutionMaxWaitMs without a
// message, and on shutdown (idle sockets at once, busy ones after their turn, serve
// waiting for them within its shutdown timeout); a message beyond the request body bound
// closes it with 1009.
//
// # Decisions
//
//   - A turn is an http.Request cloned from the upgrade (so the key, priority, session
//     and trace headers are the turn's) with a body made of the message's members copied
//     byte for byte minus type and generate, plus "stream":true: never decoded and
//     re-encoded, since a Codex turn carries the whole conversation.
//   - Continued turns: Codex sends previous_response_id plus only the new input, which an
//     HTTP upstream with store:false cannot resolve, so the socket keeps its latest turn's
//     input and response and sends the whole input upstream; an id it did not answer is
//     passed on.
//   - generate:false (Codex's warm-up) is answered by the bridge with an empty completed
//     response, no upstream call, no row.
//   - A client that closes as soon as it has response.completed is no hang-up: a turn that
//     sent its last event reads the upstream's end before its permit goes back, so the
//     upstream never sees more than the cap (bounded to 2 s).
//   - Bounds: two message buffers in rotation and one body buffer per socket, dropped over
//     1 MiB; a message counts against GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT once its turn's
//     body is read; cross-origin upgrades are refused.
//   - github.com/coder/websocket, compression off (CPU; Codex works without it). The
//     library flushes every message with a system call, so the bridge corks the events of
//     one gateway write into one write (cork.go). gatehouse_websocket_open gauges the
//     sockets.
package wsbridge
