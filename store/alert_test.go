//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestClaimAlertOnce: 8 claimers racing for one alert get one row; a claim
// within the cooldown is refused, one after it is granted; a test alert is
// always granted; updates show in RecentAlerts, newest first.
func TestClaimAlertOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	d := store.AlertDelivery{Event: "connection.health", Subject: "zai-main", Condition: "suspended", Webhook: "ops", CreatedAt: at}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Go(func() {
			_, ok, err := s.ClaimAlert(ctx, d, 15*time.Minute)
			if err != nil {
				t.Errorf("ClaimAlert: %v", err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d claimers won, want 1", won)
	}
	d.CreatedAt = at.Add(14 * time.Minute)
	if _, ok, _ := s.ClaimAlert(ctx, d, 15*time.Minute); ok {
		t.Error("a claim within the cooldown was granted")
	}
	other := d
	other.Webhook = "pager"
	if _, ok, _ := s.ClaimAlert(ctx, other, 15*time.Minute); !ok {
		t.Error("the same alert to another webhook was refused")
	}
	d.CreatedAt = at.Add(16 * time.Minute)
	got, ok, err := s.ClaimAlert(ctx, d, 15*time.Minute)
	if err != nil || !ok || got.ID == 0 || got.Status != store.AlertStatusSending {
		t.Fatalf("claim after the cooldown = %+v, %v, %v", got, ok, err)
	}
	if err := s.UpdateAlert(ctx, got.ID, "delivered", 2, "", at.Add(17*time.Minute)); err != nil {
		t.Fatal(err)
	}
	test := store.AlertDelivery{Event: store.AlertTestEvent, Subject: "ops", Webhook: "ops", CreatedAt: at.Add(20 * time.Minute)}
	for range 2 {
		if _, ok, _ := s.ClaimAlert(ctx, test, time.Hour); !ok {
			t.Error("a test alert was refused")
		}
	}
	list, err := s.RecentAlerts(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].Event != store.AlertTestEvent || list[2].ID != got.ID || list[2].Status != "delivered" || list[2].Tries != 2 {
		t.Errorf("RecentAlerts = %+v", list)
	}
}

func TestAlertSecretSealed(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	sealed := s.SealAlertSecret("whsec-1")
	if sealed == "" || sealed == "whsec-1" {
		t.Fatalf("sealed = %q", sealed)
	}
	if got, err := s.OpenAlertSecret(sealed); err != nil || got != "whsec-1" {
		t.Errorf("OpenAlertSecret = %q, %v", got, err)
	}
	if _, err := s.OpenAlertSecret("bm90IHNlYWxlZA=="); err == nil {
		t.Error("a value that was never sealed opened")
	}
}

// TestClaimAlertPrunes: a claim deletes the deliveries older than
// AlertRetention.
func TestClaimAlertPrunes(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	old := store.AlertDelivery{Event: "session.guard", Subject: "s", Webhook: "ops", CreatedAt: at}
	if _, ok, err := s.ClaimAlert(ctx, old, time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	fresh := old
	fresh.Subject, fresh.CreatedAt = "t", at.Add(store.AlertRetention+time.Hour)
	if _, ok, err := s.ClaimAlert(ctx, fresh, time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	list, err := s.RecentAlerts(ctx, 10)
	if err != nil || len(list) != 1 || list[0].Subject != "t" {
		t.Errorf("deliveries = %+v, %v; want only the fresh one", list, err)
	}
}
