package alert

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/outbound"
)

// DefaultQueue is Options.Queue when 0: the events waiting to be sent.
const DefaultQueue = 1024

// Backoff bounds: the first retry waits FirstBackoff, each next one twice
// as long; a delivery whose next wait would pass MaxBackoff is given up.
const (
	FirstBackoff = time.Second
	MaxBackoff   = time.Hour
)

// tryTimeout bounds one try of a delivery.
const tryTimeout = 10 * time.Second

// Options configure a Notifier. Every field is optional.
type Options struct {
	Logger *slog.Logger
	// Registerer receives the alert metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Claims records deliveries; nil keeps them in this process.
	Claims Claims
	// Open decrypts a webhook's SecretSealed; nil: webhooks are not signed.
	Open func(sealed string) (string, error)
	// DashboardURL is the dashboard's external address, the base of each
	// body's dashboardUrl ("" leaves the link out).
	DashboardURL string
	// Queue bounds the events waiting to be sent (DefaultQueue); an event
	// past it is dropped and counted.
	Queue int
	// Now is the clock (time.Now).
	Now func() time.Time
	// Sleep waits d or until ctx ends, between tries (a timer); tests pass
	// one that returns at once and records d.
	Sleep func(ctx context.Context, d time.Duration) error
	// Deny lists the addresses webhooks may not be sent to
	// (GATEHOUSE_UPSTREAM_DENY), checked again at dial time.
	Deny outbound.Deny
	// Transport sends the webhooks; nil: one that dials through Deny.
	Transport http.RoundTripper
}

// config is the webhooks and cooldown in force.
type config struct {
	hooks    []hook
	cooldown time.Duration
}

type hook struct {
	limits.AlertWebhook
	secret string
}

// Notifier sends alerts. Create it with New, give it the settings with
// Configure, Emit events from anywhere (never blocks), and Close it.
type Notifier struct {
	log    *slog.Logger
	claims Claims
	open   func(string) (string, error)
	dash   string
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
	client *http.Client

	cfg   atomic.Pointer[config]
	queue chan Event

	mu   sync.Mutex
	last map[string]time.Time // cooldown key → when it last alerted here

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	m      *metrics
}

// New starts a Notifier's sender; ctx ends it as Close does.
func New(ctx context.Context, o Options) *Notifier {
	n := &Notifier{log: o.Logger, claims: o.Claims, open: o.Open, dash: o.DashboardURL, now: o.Now, sleep: o.Sleep,
		last: map[string]time.Time{}, m: newMetrics(o.Registerer)}
	if n.log == nil {
		n.log = slog.Default()
	}
	if n.claims == nil {
		n.claims = &MemoryClaims{}
	}
	if n.now == nil {
		n.now = time.Now
	}
	if n.sleep == nil {
		n.sleep = sleep
	}
	q := o.Queue
	if q <= 0 {
		q = DefaultQueue
	}
	n.queue = make(chan Event, q)
	rt := o.Transport
	if rt == nil {
		d := &outbound.Dialer{Deny: o.Deny}
		rt = &http.Transport{DialContext: d.DialContext, Proxy: nil, MaxIdleConnsPerHost: 2,
			IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second}
	}
	n.client = &http.Client{Transport: rt, Timeout: tryTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	n.cfg.Store(&config{cooldown: limits.DefaultAlertCooldownMs * time.Millisecond})
	n.ctx, n.cancel = context.WithCancel(ctx)
	n.wg.Add(1)
	go n.run()
	return n
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Configure puts the webhooks and cooldown of settings in force. A secret
// that cannot be opened leaves its webhook unsigned and is logged (never
// the secret).
func (n *Notifier) Configure(webhooks limits.AlertWebhooks, cooldownMs int) {
	c := &config{cooldown: time.Duration(cooldownMs) * time.Millisecond}
	if cooldownMs <= 0 {
		c.cooldown = limits.DefaultAlertCooldownMs * time.Millisecond
	}
	for _, w := range webhooks {
		h := hook{AlertWebhook: w}
		if w.SecretSealed != "" && n.open != nil {
			s, err := n.open(w.SecretSealed)
			if err != nil {
				n.log.Error("alert: cannot open a webhook's secret; it is sent unsigned",
					slog.String("webhook", w.Name), slog.Any("error", err))
			}
			h.secret = s
		}
		c.hooks = append(c.hooks, h)
	}
	n.cfg.Store(c)
}

// Emit hands e to the sender and returns at once. An (event, subject,
// condition) that alerted less than alertCooldownMs ago in this process is
// ignored; an event the full queue cannot take is dropped and counted.
func (n *Notifier) Emit(e Event) {
	if e.At.IsZero() {
		e.At = n.now()
	}
	c := n.cfg.Load()
	if !wanted(c, e.Name) {
		return
	}
	k := e.key()
	n.mu.Lock()
	if t, ok := n.last[k]; ok && e.At.Sub(t) < c.cooldown {
		n.mu.Unlock()
		return
	}
	n.last[k] = e.At
	if len(n.last) > 4096 {
		for k, t := range n.last {
			if e.At.Sub(t) >= c.cooldown {
				delete(n.last, k)
			}
		}
	}
	n.mu.Unlock()
	select {
	case n.queue <- e:
		n.m.emitted.WithLabelValues(e.Name).Inc()
	default:
		// Not sent: the condition may alert again as soon as it recurs.
		n.mu.Lock()
		if n.last[k].Equal(e.At) {
			delete(n.last, k)
		}
		n.mu.Unlock()
		n.m.dropped.Inc()
	}
}

func wanted(c *config, event string) bool {
	for _, h := range c.hooks {
		if h.Wants(event) {
			return true
		}
	}
	return false
}

// ErrNoWebhook is Test's error for a name no webhook has.
var ErrNoWebhook = errors.New("alert: no such webhook")

// Test sends a test alert to the webhook named name (off the caller's
// path, with retries) and returns its delivery as claimed.
func (n *Notifier) Test(ctx context.Context, name, actor string) (Delivery, error) {
	c := n.cfg.Load()
	for _, h := range c.hooks {
		if h.Name != name {
			continue
		}
		e := Event{Name: EventTest, Subject: name, Severity: SeverityWarning, At: n.now(), Path: "/alerts",
			Summary: "Test alert from Gatehouse to webhook " + name + " (sent by " + actor + ")"}
		d, ok, err := n.claims.Claim(ctx, delivery(&e, h), 0)
		if err != nil || !ok {
			return Delivery{}, err
		}
		n.wg.Add(1)
		go n.deliver(e, h, d)
		return d, nil
	}
	return Delivery{}, ErrNoWebhook
}

// Recent returns the newest deliveries first, at most limit.
func (n *Notifier) Recent(ctx context.Context, limit int) ([]Delivery, error) {
	return n.claims.RecentDeliveries(ctx, limit)
}

// Close stops the sender and every delivery still retrying, and waits for
// them; events still queued are not sent.
func (n *Notifier) Close() {
	n.cancel()
	n.wg.Wait()
	n.client.CloseIdleConnections()
}

func (n *Notifier) run() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case e := <-n.queue:
			n.dispatch(e)
		}
	}
}

// dispatch claims e for every webhook that wants it and starts the
// deliveries this replica won.
func (n *Notifier) dispatch(e Event) {
	c := n.cfg.Load()
	for _, h := range c.hooks {
		if !h.Wants(e.Name) {
			continue
		}
		d, ok, err := n.claims.Claim(n.ctx, delivery(&e, h), c.cooldown)
		if err != nil {
			if n.ctx.Err() == nil {
				n.log.Error("alert: claim a delivery", slog.String("event", e.Name), slog.String("webhook", h.Name), slog.Any("error", err))
			}
			continue
		}
		if !ok {
			continue // another replica has it, or it alerted within the cooldown
		}
		n.wg.Add(1)
		go n.deliver(e, h, d)
	}
}

func delivery(e *Event, h hook) Delivery {
	return Delivery{Event: e.Name, Subject: e.Subject, Condition: e.Condition, Webhook: h.Name,
		Severity: e.Severity, Summary: e.Summary, Status: StatusSending, CreatedAt: e.At}
}
