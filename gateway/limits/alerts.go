package limits

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-playground/validator/v10"
)

// The alert events a webhook may ask for (DESIGN.md, "Alerts").
const (
	AlertBudgetThreshold  = "budget.threshold"
	AlertConnectionHealth = "connection.health"
	AlertLearnedCut       = "capacity.learned_cut"
	AlertSessionGuard     = "session.guard"
	AlertRequestLogDrop   = "requestlog.dropped"
	AlertClusterDegraded  = "cluster.degraded"
)

// AlertEvents lists every alert event, in the order the dashboard shows them.
var AlertEvents = []string{AlertBudgetThreshold, AlertConnectionHealth, AlertLearnedCut,
	AlertSessionGuard, AlertRequestLogDrop, AlertClusterDegraded}

// MaxAlertWebhooks bounds the settings key "alerts".
const MaxAlertWebhooks = 20

// AlertWebhook is one entry of the settings key "alerts": where alerts go
// and which events it wants.
//
// Write rules: name 1–64 characters, unique among the webhooks; url an
// absolute http(s) URL of at most 2048 characters (the upstream deny list
// is checked by the handler that saves it); format "slack" or "json";
// events 1–6 of AlertEvents, each once; secret optional, 1–256 characters.
//
// Secret is write-only: the handler that saves the settings seals it into
// SecretSealed (encrypted like a connection's upstream key) and stores
// Secret empty; a webhook written without a secret keeps the sealed secret
// of the stored webhook of the same name, whatever SecretSealed the write
// held. Neither is ever shown: the API shows SecretSet instead.
type AlertWebhook struct {
	Name         string   `json:"name" validate:"required,between=1:64"`
	URL          string   `json:"url" validate:"required,max=2048,alerturl"`
	Format       string   `json:"format" validate:"required,oneof=slack json"`
	Events       []string `json:"events" validate:"required,min=1,max=6,unique,dive,oneof=budget.threshold connection.health capacity.learned_cut session.guard requestlog.dropped cluster.degraded"`
	Secret       string   `json:"secret,omitempty" validate:"omitempty,between=1:256"`
	SecretSealed string   `json:"secretSealed,omitempty" validate:"-"`
	SecretSet    bool     `json:"secretSet,omitempty" validate:"-"`
}

// Wants reports whether w asked for event.
func (w AlertWebhook) Wants(event string) bool { return slices.Contains(w.Events, event) }

// AlertWebhooks is the settings key "alerts".
type AlertWebhooks []AlertWebhook

// Clone returns a deep copy of ws (nil stays nil).
func (ws AlertWebhooks) Clone() AlertWebhooks {
	if ws == nil {
		return nil
	}
	out := make(AlertWebhooks, len(ws))
	for i, w := range ws {
		w.Events = slices.Clone(w.Events)
		out[i] = w
	}
	return out
}

// Index returns the webhook named name, and false when there is none.
func (ws AlertWebhooks) Index(name string) (AlertWebhook, bool) {
	for _, w := range ws {
		if w.Name == name {
			return w, true
		}
	}
	return AlertWebhook{}, false
}

// validAlertURL is validator's "alerturl": an absolute http or https URL.
func validAlertURL(fl validator.FieldLevel) bool {
	u, err := url.Parse(fl.Field().String())
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil
}

// decodeAlerts decodes the settings key "alerts": a JSON array of
// webhooks, every problem at its own path (alerts.<i>.<field>).
func (d *decoder) decodeAlerts(raw []byte, fv reflect.Value, path []string) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		d.add(path, newMessage(CodeInvalid, `must be a list of webhooks like [{"name": "ops", "url": "https://…", "format": "json", "events": ["budget.threshold"]}]`))
		return
	}
	if len(elems) > MaxAlertWebhooks {
		d.add(path, describe("max", strconv.Itoa(MaxAlertWebhooks), reflect.Slice))
		return
	}
	out := make(AlertWebhooks, len(elems))
	names := stringSet{}
	for i, e := range elems {
		epath := extend(path, strconv.Itoa(i))
		dec := json.NewDecoder(bytes.NewReader(e))
		dec.DisallowUnknownFields()
		var w AlertWebhook
		if err := dec.Decode(&w); err != nil {
			d.add(epath, alertDecodeMessage(err))
			continue
		}
		w.SecretSet = false // read-only: the API shows it, a write ignores it
		err := Validator().Struct(&w)
		var ve validator.ValidationErrors
		if errors.As(err, &ve) {
			for _, fe := range ve {
				fpath := append(slices.Clip(epath), namespacePath(fe.Namespace())...)
				msg := translate(fe)
				if fe.Tag() == "alerturl" {
					msg = describe("url", "", reflect.String)
				}
				d.problems = append(d.problems, problem{path: fpath, msg: msg, validation: true})
			}
		}
		if w.Name != "" && !names.add(w.Name) {
			d.problems = append(d.problems, problem{path: extend(epath, "name"), msg: plainMessage(CodeUnique), validation: true})
		}
		out[i] = w
	}
	if len(out) > 0 {
		fv.Set(reflect.ValueOf(out))
	}
}

// alertDecodeMessage words a webhook that is not an object of the known
// fields with the right types.
func alertDecodeMessage(err error) message {
	var ut *json.UnmarshalTypeError
	if errors.As(err, &ut) {
		return newMessage(CodeInvalid, "field %q has the wrong type", ut.Field)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return newMessage(CodeInvalid, "unknown field %s", f)
	}
	return plainMessage(CodeNotObject)
}
