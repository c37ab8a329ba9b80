//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestConnectionCRUD(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()

	in := connInput("zai-main")
	created := mustCreateConnection(t, s, in)
	if created.ID == "" || created.Version != 1 || created.CreatedAt.IsZero() {
		t.Fatalf("created = %+v, want an id, version 1 and timestamps", created)
	}
	if created.APIKeyPreview != "sk-…9f2c" {
		t.Errorf("APIKeyPreview = %q, want %q", created.APIKeyPreview, "sk-…9f2c")
	}
	want := store.Connection{
		ID: created.ID, Name: in.Name, Provider: in.Provider, APIStyle: in.APIStyle, BaseURL: in.BaseURL,
		APIKeyPreview: "sk-…9f2c", Models: in.Models, Priority: 0, Enabled: true,
		Version: 1, CreatedAt: created.CreatedAt, UpdatedAt: created.UpdatedAt,
	}
	ignoreJSON := cmpopts.IgnoreFields(store.Connection{}, "RateLimitOverrides")
	if diff := cmp.Diff(want, created, ignoreJSON); diff != "" {
		t.Errorf("created mismatch (-want +got):\n%s", diff)
	}
	if !jsonEqual(t, in.RateLimitOverrides, created.RateLimitOverrides) {
		t.Errorf("RateLimitOverrides = %s, want %s", created.RateLimitOverrides, in.RateLimitOverrides)
	}

	got, err := s.GetConnection(ctx, created.ID)
	if err != nil {
		t.Fatalf("GetConnection: %v", err)
	}
	if diff := cmp.Diff(created, got, ignoreJSON); diff != "" {
		t.Errorf("GetConnection mismatch (-want +got):\n%s", diff)
	}

	low := connInput("a-low")
	low.Priority = -5
	high := connInput("b-high")
	high.Priority = 10
	mustCreateConnection(t, s, low)
	mustCreateConnection(t, s, high)
	list, err := s.ListConnections(ctx)
	if err != nil {
		t.Fatalf("ListConnections: %v", err)
	}
	var names []string
	for _, c := range list {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"b-high", "zai-main", "a-low"}, names); diff != "" {
		t.Errorf("ListConnections order mismatch (-want +got):\n%s", diff)
	}

	updated, err := s.UpdateConnection(ctx, "tester", created.ID, 1, func(cur store.Connection) (store.ConnectionInput, error) {
		in := cur.Input()
		in.Priority = 7
		in.Models = []string{"glm-5"}
		return in, nil
	})
	if err != nil {
		t.Fatalf("UpdateConnection: %v", err)
	}
	if updated.Version != 2 || updated.Priority != 7 || !slices.Equal(updated.Models, []string{"glm-5"}) {
		t.Errorf("updated = %+v, want version 2, priority 7, models [glm-5]", updated)
	}
	if updated.APIKeyPreview != created.APIKeyPreview {
		t.Errorf("APIKeyPreview after update without key = %q, want %q", updated.APIKeyPreview, created.APIKeyPreview)
	}

	if err := s.DeleteConnection(ctx, "tester", created.ID, 2); err != nil {
		t.Fatalf("DeleteConnection: %v", err)
	}
	if _, err := s.GetConnection(ctx, created.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetConnection after delete: err = %v, want ErrNotFound", err)
	}
	if err := s.DeleteConnection(ctx, "tester", created.ID, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteConnection twice: err = %v, want ErrNotFound", err)
	}
}

func TestConnectionNotFound(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	noop := func(cur store.Connection) (store.ConnectionInput, error) { return cur.Input(), nil }
	for _, tc := range []struct {
		name string
		id   string
	}{
		{name: "malformed", id: "not-a-uuid"},
		{name: "empty", id: ""},
		{name: "unknown", id: "6f1c0000-0000-4000-8000-000000000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.GetConnection(ctx, tc.id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("GetConnection: err = %v, want ErrNotFound", err)
			}
			if _, err := s.UpdateConnection(ctx, "tester", tc.id, 0, noop); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("UpdateConnection: err = %v, want ErrNotFound", err)
			}
			if err := s.DeleteConnection(ctx, "tester", tc.id, 0); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("DeleteConnection: err = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestCreateConnectionErrors(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	mustCreateConnection(t, s, connInput("taken"))
	for _, tc := range []struct {
		name   string
		modify func(*store.ConnectionInput)
		want   error
	}{
		{name: "duplicate name", modify: func(in *store.ConnectionInput) { in.Name = "taken" }, want: store.ErrConflict},
		{name: "no api key", modify: func(in *store.ConnectionInput) { in.APIKey = "" }, want: store.ErrInvalid},
		{name: "bad api style", modify: func(in *store.ConnectionInput) { in.APIStyle = "soap" }, want: store.ErrInvalid},
		{name: "overrides not an object", modify: func(in *store.ConnectionInput) {
			in.RateLimitOverrides = json.RawMessage(`[1]`)
		}, want: store.ErrInvalid},
		{name: "overrides not JSON", modify: func(in *store.ConnectionInput) {
			in.RateLimitOverrides = json.RawMessage(`{`)
		}, want: store.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := connInput("fresh-" + strings.ReplaceAll(tc.name, " ", "-"))
			tc.modify(&in)
			if _, err := s.CreateConnection(t.Context(), "tester", in); !errors.Is(err, tc.want) {
				t.Errorf("CreateConnection: err = %v, want %v", err, tc.want)
			}
		})
	}
	list, err := s.ListConnections(t.Context())
	if err != nil {
		t.Fatalf("ListConnections: %v", err)
	}
	if len(list) != 1 {
		t.Errorf("ListConnections: %d rows, want 1 (failed creates must write nothing)", len(list))
	}
}

func TestCreateConnectionDefaults(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	in := connInput("defaults")
	in.Models = nil
	in.RateLimitOverrides = json.RawMessage("null")
	c := mustCreateConnection(t, s, in)
	if c.Models == nil || len(c.Models) != 0 {
		t.Errorf("Models = %#v, want empty non-nil", c.Models)
	}
	if string(c.RateLimitOverrides) != "{}" {
		t.Errorf("RateLimitOverrides = %s, want {}", c.RateLimitOverrides)
	}
}

func TestConnectionAudit(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	in := connInput("audited")
	c := mustCreateConnection(t, s, in)
	u, err := s.UpdateConnection(ctx, "alice", c.ID, 0, func(cur store.Connection) (store.ConnectionInput, error) {
		in := cur.Input()
		in.Enabled = false
		in.APIKey = "sk-rotated-secret-value-7777"
		return in, nil
	})
	if err != nil {
		t.Fatalf("UpdateConnection: %v", err)
	}
	if err := s.DeleteConnection(ctx, "bob", c.ID, 0); err != nil {
		t.Fatalf("DeleteConnection: %v", err)
	}
	entries, err := s.ListAudit(ctx, 0, 10)
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	if len(entries) != 3 {
		t.Fatalf("ListAudit: %d entries, want 3", len(entries))
	}
	asJSON := func(c store.Connection) json.RawMessage {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i, tc := range []struct {
		actor, action string
		before, after json.RawMessage
	}{
		{actor: "bob", action: store.ActionDelete, before: asJSON(u)},
		{actor: "alice", action: store.ActionUpdate, before: asJSON(c), after: asJSON(u)},
		{actor: "tester", action: store.ActionCreate, after: asJSON(c)},
	} {
		e := entries[i]
		if e.Actor != tc.actor || e.Action != tc.action || e.Entity != store.EntityConnection || e.EntityID != c.ID {
			t.Errorf("entry %d = %s %s %s %s, want %s %s connection %s", i, e.Actor, e.Action, e.Entity, e.EntityID,
				tc.actor, tc.action, c.ID)
		}
		for _, side := range []struct {
			name      string
			got, want json.RawMessage
		}{{"before", e.Before, tc.before}, {"after", e.After, tc.after}} {
			switch {
			case side.want == nil && side.got != nil:
				t.Errorf("entry %d %s = %s, want null", i, side.name, side.got)
			case side.want != nil && (side.got == nil || !jsonEqual(t, side.want, side.got)):
				t.Errorf("entry %d %s = %s, want %s", i, side.name, side.got, side.want)
			}
		}
		for _, key := range []string{in.APIKey, "sk-rotated-secret-value-7777"} {
			if strings.Contains(string(e.Before)+string(e.After), key) {
				t.Errorf("entry %d contains the upstream key", i)
			}
		}
	}
}

func TestUpstreamKeyNotStoredInPlaintext(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	const key = "sk-PLAINTEXT-upstream-key-1234567890"
	in := connInput("secretive")
	in.APIKey = key
	c := mustCreateConnection(t, s, in)
	const key2 = "sk-SECOND-plaintext-key-0987654321"
	if _, err := s.UpdateConnection(ctx, "tester", c.ID, 0, func(cur store.Connection) (store.ConnectionInput, error) {
		in := cur.Input()
		in.APIKey = key2
		return in, nil
	}); err != nil {
		t.Fatalf("UpdateConnection: %v", err)
	}
	dump := dumpDatabase(t, s)
	if !strings.Contains(dump, c.ID) {
		t.Fatalf("dump does not contain the connection id; dump is broken:\n%s", dump)
	}
	for _, k := range []string{key, key2} {
		for _, needle := range []string{k, k[3:], hex.EncodeToString([]byte(k)), hex.EncodeToString([]byte(k[3:]))} {
			if strings.Contains(strings.ToLower(dump), strings.ToLower(needle)) {
				t.Errorf("database dump contains the upstream key (as %q)", needle)
			}
		}
	}
	secrets, err := s.ConnectionSecrets(ctx)
	if err != nil {
		t.Fatalf("ConnectionSecrets: %v", err)
	}
	if secrets[c.ID] != key2 {
		t.Errorf("ConnectionSecrets[%s] does not decrypt to the current key", c.ID)
	}
}

func TestLoadGatewayConfig(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	a := mustCreateConnection(t, s, connInput("gw-a"))
	bIn := connInput("gw-b")
	bIn.Priority = 3
	b := mustCreateConnection(t, s, bIn)
	if _, err := s.UpdateSettings(ctx, "tester", 0, func(store.Settings) (json.RawMessage, error) {
		return json.RawMessage(`{"globalMaxConcurrent": 8}`), nil
	}); err != nil {
		t.Fatalf("UpdateSettings: %v", err)
	}
	key, _, err := s.CreateClientKey(ctx, "tester", store.NewClientKeyInput("gw-agent"))
	if err != nil {
		t.Fatalf("CreateClientKey: %v", err)
	}
	cfg, err := s.LoadGatewayConfig(ctx)
	if err != nil {
		t.Fatalf("LoadGatewayConfig: %v", err)
	}
	type idKey struct{ ID, Key string }
	var got []idKey
	for _, c := range cfg.Connections {
		got = append(got, idKey{c.ID, c.APIKey})
	}
	want := []idKey{{b.ID, bIn.APIKey}, {a.ID, connInput("gw-a").APIKey}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("connections mismatch (-want +got):\n%s", diff)
	}
	if cfg.Settings.Version != 2 || !jsonEqual(t, []byte(`{"globalMaxConcurrent": 8}`), cfg.Settings.Data) {
		t.Errorf("settings = %+v, want version 2 with globalMaxConcurrent 8", cfg.Settings)
	}
	if len(cfg.ClientKeys) != 1 || cfg.ClientKeys[0].ID != key.ID || cfg.ClientKeys[0].Name != "gw-agent" {
		t.Errorf("client keys = %+v, want the one key gw-agent of the same snapshot", cfg.ClientKeys)
	}
	b2, err := json.Marshal(cfg.Connections[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b2), bIn.APIKey) {
		t.Errorf("GatewayConnection marshals its API key: %s", b2)
	}
}

func TestWrongSecretKeyCannotDecrypt(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	mustCreateConnection(t, s, connInput("locked"))
	other, err := store.New(poolOf(t, s), make([]byte, store.SecretKeySize), nil)
	if err != nil {
		t.Fatalf("store.New: %v", err)
	}
	if _, err := other.ConnectionSecrets(t.Context()); err == nil {
		t.Error("ConnectionSecrets with another secret key: no error, want a decryption failure")
	}
	if _, err := other.LoadGatewayConfig(t.Context()); err == nil {
		t.Error("LoadGatewayConfig with another secret key: no error, want a decryption failure")
	}
}

func TestInTx(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	boom := errors.New("boom")
	err := s.InTx(ctx, func(tx *store.Store) error {
		mustCreateConnection(t, tx, connInput("rolled-back"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx: err = %v, want fn's error", err)
	}
	list, err := s.ListConnections(ctx)
	if err != nil {
		t.Fatalf("ListConnections: %v", err)
	}
	if len(list) != 0 {
		t.Errorf("ListConnections after rollback: %d rows, want 0", len(list))
	}
	if n := auditCount(t, s); n != 0 {
		t.Errorf("audit rows after rollback = %d, want 0", n)
	}
}

// TestConnectionAPIStyles: every style the API accepts is stored and read
// back (migration 0005 added gemini), and no other.
func TestConnectionAPIStyles(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	for _, style := range []string{"openai", "anthropic", "gemini"} {
		in := connInput("c-" + style)
		in.APIStyle = style
		created := mustCreateConnection(t, s, in)
		got, err := s.GetConnection(t.Context(), created.ID)
		if err != nil || got.APIStyle != style {
			t.Errorf("%s: stored %q, %v", style, got.APIStyle, err)
		}
	}
	in := connInput("c-grpc")
	in.APIStyle = "grpc"
	if _, err := s.CreateConnection(t.Context(), "test", in); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("grpc style: %v, want ErrInvalid", err)
	}
}
