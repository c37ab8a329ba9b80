package api

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// ApplyOptions say how Apply treats a document.
type ApplyOptions struct {
	// DryRun writes nothing and returns the plan.
	DryRun bool
	// Prune deletes the connections and client keys the document does not name (of the
	// lists it declares).
	Prune bool
	// Getenv resolves an apiKey of the form ${NAME} (an empty value is unset). Nil
	// rejects such references: the REST API must not copy the server's environment
	// into an upstream request (see docs/ARCHITECTURE.md).
	Getenv func(string) string
	// EnvAllow names the variables a ${NAME} may read besides those whose name starts
	// with GATEHOUSE_SECRET_ (the CLI's --env-allow).
	EnvAllow []string
}

// ConfigPlan is what applying a document changes (or, in a dry run, would change).
type ConfigPlan struct {
	Changed bool               `json:"changed"`
	Changes []ConfigPlanChange `json:"changes"`
}

// ConfigPlanChange is one changed entity, its change listed field by field as the
// audit log shows it.
type ConfigPlanChange struct {
	// Entity is "settings", "connection" or "client_key"; Action "create", "update" or
	// "delete" (the audit log's words).
	Entity string `json:"entity"`
	Action string `json:"action"`
	Name   string `json:"name,omitempty"`
	// ID is the entity's id; absent for the settings and for creations in a dry run.
	ID   string           `json:"id,omitempty"`
	Diff []ConfigDiffLine `json:"diff"`
	// Secret is a created client key's secret: in the answer of an applied change
	// only, and never again.
	Secret string `json:"secret,omitempty"`
}

// ConfigDiffLine is one changed leaf, as on the audit page: path, op (added, removed,
// changed) and the compact JSON of the old and new values. An upstream key never shows:
// its line says "(secret)".
type ConfigDiffLine struct {
	Path   string `json:"path"`
	Op     string `json:"op"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
}

// secretMark stands for an upstream key in a plan.
const secretMark = "(secret)"

// Apply validates doc (JSON, see ConfigJSON) against the stored state and applies it
// in one transaction (see store.ApplyConfig), returning the plan. Every problem of the
// document is returned at once as limits.FieldErrors, each path prefixed by its place
// ("connections[zai-main].rateLimitOverrides.maxConcurrent"), and nothing is written.
func (t *ConfigTool) Apply(ctx context.Context, actor string, doc []byte, opts ApplyOptions) (ConfigPlan, error) {
	return t.s.applyConfig(ctx, actor, doc, opts)
}

func (s *Server) applyConfig(ctx context.Context, actor string, doc []byte, opts ApplyOptions) (ConfigPlan, error) {
	changes, err := s.store.ApplyConfig(ctx, actor, opts.DryRun, func(cur store.ConfigState) (store.DesiredConfig, error) {
		return s.desiredConfig(ctx, doc, cur, opts)
	})
	if err != nil {
		return ConfigPlan{}, err
	}
	plan := ConfigPlan{Changed: len(changes) > 0, Changes: make([]ConfigPlanChange, 0, len(changes))}
	for _, ch := range changes {
		pc, err := planChange(ch)
		if err != nil {
			return ConfigPlan{}, err
		}
		plan.Changes = append(plan.Changes, pc)
	}
	return plan, nil
}

// planChange words one store change for the plan.
func planChange(ch store.ConfigChange) (ConfigPlanChange, error) {
	pc := ConfigPlanChange{Entity: ch.Entity, Action: ch.Action, Name: ch.Name, ID: ch.ID, Secret: ch.Secret}
	view := func(v any) ([]byte, error) {
		var doc any
		switch e := v.(type) {
		case nil:
			return nil, nil
		case json.RawMessage: // the settings' data object
			m, err := settingsDocument(e)
			if err != nil {
				return nil, err
			}
			doc = m
		case store.Connection:
			doc = configConnectionOf(e)
		case store.ClientKey:
			doc = configClientKeyOf(e)
		default:
			return nil, fmt.Errorf("handlers: plan of %T", v)
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("handlers: encode plan: %w", err)
		}
		return b, nil
	}
	before, err := view(ch.Before)
	if err != nil {
		return ConfigPlanChange{}, err
	}
	after, err := view(ch.After)
	if err != nil {
		return ConfigPlanChange{}, err
	}
	pc.Diff = []ConfigDiffLine{}
	for _, d := range web.DiffJSON(before, after) {
		pc.Diff = append(pc.Diff, ConfigDiffLine{Path: d.Path, Op: d.Op, Before: d.Before, After: d.After})
	}
	switch {
	case ch.Entity == store.EntityConnection && ch.Action == store.ActionCreate:
		pc.Diff = append(pc.Diff, ConfigDiffLine{Path: "apiKey", Op: web.DiffAdded, After: secretMark})
	case ch.KeyChanged:
		pc.Diff = append(pc.Diff, ConfigDiffLine{Path: "apiKey", Op: web.DiffChanged, Before: secretMark, After: "(new secret)"})
	}
	slices.SortStableFunc(pc.Diff, func(a, b ConfigDiffLine) int { return strings.Compare(a.Path, b.Path) })
	return pc, nil
}

// Text writes the plan for a terminal, one entity per line followed by its changed
// fields, with the audit page's marks: "+" added, "−" removed, "~" changed.
func (p ConfigPlan) Text() string {
	if !p.Changed {
		return "no changes\n"
	}
	var b strings.Builder
	counts := map[string]int{}
	for _, ch := range p.Changes {
		counts[ch.Action]++
		mark := map[string]string{store.ActionCreate: "+", store.ActionDelete: "−"}[ch.Action]
		if mark == "" {
			mark = "~"
		}
		name := ch.Name
		if name != "" {
			name = " " + name
		}
		fmt.Fprintf(&b, "%s %s%s\n", mark, ch.Entity, name)
		for _, d := range ch.Diff {
			path := d.Path
			if path != "" {
				path += ": "
			}
			switch d.Op {
			case web.DiffAdded:
				fmt.Fprintf(&b, "    + %s%s\n", path, d.After)
			case web.DiffRemoved:
				fmt.Fprintf(&b, "    − %s%s\n", path, d.Before)
			default:
				fmt.Fprintf(&b, "    ~ %s%s → %s\n", path, d.Before, d.After)
			}
		}
	}
	fmt.Fprintf(&b, "%d to create, %d to update, %d to delete\n",
		counts[store.ActionCreate], counts[store.ActionUpdate], counts[store.ActionDelete])
	return b.String()
}
