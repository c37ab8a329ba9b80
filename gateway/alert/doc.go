// Package alert tells operators about trouble: the gateway emits an Event
// (a key's budget crossing 80 % or 100 %, a connection suspended, a session
// refused by its guard …), and a Notifier sends it to the webhooks of the
// settings key "alerts" that want it — off the request path, through a
// bounded queue, signed when the webhook has a secret, retried with
// exponential backoff.
//
// An (event, subject, condition) alerts at most once per alertCooldownMs:
// first in this process (a map, so a storm costs no I/O), then across
// replicas through Claims, which package store implements with a row per
// delivery in alert_deliveries. Package alert never imports store.
package alert
