package web

import (
	"net/url"
	"time"
)

// NavAlerts is the /alerts page's nav entry.
const NavAlerts = "alerts"

// AlertList is the /alerts page: the webhooks of the settings key "alerts"
// (each with a "Send test" button for an admin) and the recent deliveries,
// refreshed from LiveURL.
type AlertList struct {
	Webhooks   []AlertWebhook
	Deliveries []AlertDelivery
	// CooldownMs is alertCooldownMs in force.
	CooldownMs     int
	LiveURL        string
	LiveIntervalMs int
}

// AlertWebhook is one webhook as the page shows it (never its secret).
type AlertWebhook struct {
	Name, URL, Format string
	Events            []string
	Signed            bool
}

// AlertDelivery is one alert sent to one webhook.
type AlertDelivery struct {
	Event, Subject, Webhook, Status, Summary, LastError string
	Tries                                               int
	At                                                  time.Time
}

// alertTestAction is the URL of a webhook's "Send test".
func alertTestAction(name string) string { return "/alerts/" + url.PathEscape(name) + "/test" }

// alertTone is the tone class of a delivery status.
func alertTone(status string) string {
	switch status {
	case "delivered":
		return "tone-good"
	case "failed":
		return "tone-bad"
	}
	return "tone-warn"
}
