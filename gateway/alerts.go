package gateway

import (
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/alert"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/session"
)

// Alerter receives the gateway's alert events (Options.Alerts): an
// *alert.Notifier in production. Emit must return at once; Configure gets
// the webhooks and cooldown of every config applied.
type Alerter interface {
	Emit(e alert.Event)
	Configure(webhooks limits.AlertWebhooks, cooldownMs int)
}

// noAlerts is the Alerter of a gateway without Options.Alerts.
type noAlerts struct{}

func (noAlerts) Emit(alert.Event)                    {}
func (noAlerts) Configure(limits.AlertWebhooks, int) {}

// budgetLevels are the shares of a money budget that alert, highest first.
var budgetLevels = [...]int64{100, 80}

// alertBudget alerts budget.threshold when x's key has spent 80 % or 100 %
// of its daily or monthly money budget (after x's cost was settled). The
// condition names the period and level, so 80 % and 100 % alert apart and
// each once per cooldown.
func (x *exchange) alertBudget() {
	ks := x.key
	if ks == nil || !ks.Lim.Spends() {
		return
	}
	now := x.g.now()
	sp := ks.Carry.Rate.SpendNow(now)
	for _, b := range [...]struct {
		period       string
		spent, limit int64
	}{{"daily", sp.Day, ks.Lim.BudgetDay}, {"monthly", sp.Month, ks.Lim.BudgetMonth}} {
		if b.limit <= 0 {
			continue
		}
		for _, lvl := range budgetLevels {
			if b.spent*100 < lvl*b.limit {
				continue
			}
			sev := alert.SeverityWarning
			if lvl == 100 {
				sev = alert.SeverityCritical
			}
			pct := strconv.FormatInt(lvl, 10) + "%"
			x.g.alerts.Emit(alert.Event{Name: limits.AlertBudgetThreshold, Subject: ks.Name,
				Condition: b.period + " " + pct, Severity: sev, At: now, Path: "/keys/" + ks.ID,
				Summary: "Client key " + strconv.Quote(ks.Name) + " has spent " + pct + " of its " + b.period +
					" budget ($" + limits.Micros(b.spent).String() + " of $" + limits.Micros(b.limit).String() + ")",
				Details: map[string]any{"keyId": ks.ID, "key": ks.Name, "period": b.period, "percent": lvl,
					"spentUsd": limits.Micros(b.spent).String(), "budgetUsd": limits.Micros(b.limit).String()}})
			break
		}
	}
}

// alertConnection alerts connection.health for c in condition (suspended,
// breaker open, cooling) with reason.
func (g *Gateway) alertConnection(c *conn, condition, reason string, until time.Time) {
	now := g.now()
	g.alerts.Emit(alert.Event{Name: limits.AlertConnectionHealth, Subject: c.label, Condition: condition,
		Severity: alert.SeverityCritical, At: now, Path: "/connections/" + c.id,
		Summary: "Connection " + strconv.Quote(c.label) + " is " + condition + " until " +
			until.UTC().Format(time.RFC3339) + ": " + reason,
		Details: map[string]any{"connectionId": c.id, "connection": c.label, "state": condition,
			"reason": reason, "until": until.UTC()}})
}

// longCooling is how long a cooldown must last to alert.
const longCooling = 60 * time.Second

// alertCooling alerts connection.health (cooling) for a cooldown of c set
// at now until until that lasts more than a minute.
func (g *Gateway) alertCooling(c *conn, now, until time.Time, reason string) {
	if until.Sub(now) > longCooling {
		g.alertConnection(c, "cooling", reason, until)
	}
}

// alertBreaker alerts connection.health (breaker open) when c's breaker
// has just opened on the failure recorded last.
func (g *Gateway) alertBreaker(c *conn) {
	if state, until, reason := c.health.Status(g.now()); state == live.HealthBreakerOpen {
		g.alertConnection(c, "breaker open", reason, until)
	}
}

// alertWindow alerts connection.health (usage window) when c's fullest
// usage window, used fraction used, is at or above its drainAtPercent: the
// connection takes no new session until the window resets.
func (g *Gateway) alertWindow(c *conn, used float64, now time.Time) {
	until := now
	for _, w := range c.health.Windows(now) {
		if w.Used >= c.drainAt && w.ResetsAt.After(until) {
			until = w.ResetsAt
		}
	}
	g.alertConnection(c, "usage window", "a usage window is "+strconv.Itoa(int(used*100))+" % used", until)
}

// alertSession alerts session.guard for x's session refused with outcome o.
func (x *exchange) alertSession(o session.Outcome) {
	var state string
	switch o {
	case session.Looping:
		state = "looping"
	case session.OverBudget:
		state = "over budget"
	case session.Stopped:
		state = "stopped"
	default:
		return // a session's concurrency cap is a queue, not trouble
	}
	key := ""
	if x.key != nil {
		key = x.key.Name
	}
	s := x.aff.session
	x.g.alerts.Emit(alert.Event{Name: limits.AlertSessionGuard, Subject: s, Condition: state,
		Severity: alert.SeverityWarning, At: x.g.now(), Path: "/requests?session=" + s,
		Summary: "Session " + s + " of client key " + strconv.Quote(key) + " is refused: " + state,
		Details: map[string]any{"session": s, "key": key, "state": state}})
}
