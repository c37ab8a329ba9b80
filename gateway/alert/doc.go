// Package alert tells operators about trouble: the gateway emits an Event (a key's budget
// crossing 80 % or 100 %, a connection suspended, its breaker open or cooling for more
// than a minute, a usage window at drainAtPercent, a session refused by its guard …), and
// a Notifier sends it to the webhooks of the settings key "alerts" that want it — off the
// request path, through a bounded queue, signed when the webhook has a secret, retried
// with exponential backoff.
//
// An (event, subject, condition) alerts at most once per alertCooldownMs: first in this
// process (a map, so a storm costs no I/O), then across replicas through Claims, which
// package store implements with a row per delivery in alert_deliveries. Package alert
// never imports store; cmd/gatehouse converts between the two identical structs.
//
// # Decisions
//
//   - Emit never blocks: a full queue (1024) drops the event, counts it and forgets its
//     cooldown mark, so the condition alerts when it recurs.
//   - The cooldown is per condition, not per (event, subject): a key's daily 80 % and 100 %,
//     or a connection's suspension and open breaker, alert apart. A budget alerts on the
//     spend this replica knows after settling, so a refused request (which settles
//     nothing) never alerts. Subjects are names; details carry the ids.
//   - Once across replicas: a claim takes a transaction-scoped advisory lock on (event,
//     subject, condition, webhook) and inserts a row unless one was made within the
//     cooldown; whoever claims first sends. The row records status, tries and the last
//     error for /alerts. A test alert is always claimed; rows older than 30 days go.
//   - Delivery: a POST per try (10 s, no redirects, through the upstream dialer so
//     GATEHOUSE_UPSTREAM_DENY holds at dial time too); any 2xx delivers; waits from 1 s,
//     doubling, until the next wait would pass an hour (13 tries). The wait is injected,
//     so tests run the whole schedule at once. Shutdown records waiting deliveries failed.
//   - A signed post carries X-Gatehouse-Timestamp and X-Gatehouse-Signature:
//     sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>. The secret is sealed
//     like connection keys and never shown again; a webhook written without one keeps the
//     stored one of its name, so an export applies back unchanged.
//   - Conditions that arise off the request path (a learned cap at half its cap or less,
//     request-log rows dropped, Redis away) are watched by serve every 10 s.
package alert
