package web

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

func TestBuildCostViewRanksByCostWithOtherAndNoneApart(t *testing.T) {
	var rows []CostRow
	for i := range 12 {
		rows = append(rows, CostRow{Group: "model", Name: fmt.Sprintf("m%02d", i), Requests: int64(100 - i), CostMicros: int64(i * 10)})
	}
	rows = append(rows, CostRow{Group: "model", Name: "", Requests: 1000},
		CostRow{Group: "key", ID: "k1", Name: "team-a", Requests: 5, CostMicros: 7})
	v := BuildCostView("last 24 hours", rows, 10)
	if len(v.Groups) != len(CostGroups) {
		t.Fatalf("groups = %d", len(v.Groups))
	}
	m := v.Groups[0]
	if m.Group != "model" || len(m.Rows) != 10 || m.Rows[0].Name != "m11" || m.Rows[9].Name != "m02" {
		t.Fatalf("model ranking = %+v", m.Rows)
	}
	if m.Other == nil || m.OtherCount != 2 || m.Other.CostMicros != 10 || m.Other.Requests != 100+99 {
		t.Errorf("other = %+v (%d)", m.Other, m.OtherCount)
	}
	if m.None == nil || m.None.Requests != 1000 {
		t.Errorf("no model = %+v, want it apart", m.None)
	}
	if k := v.Groups[3]; k.Group != "key" || len(k.Rows) != 1 || k.Rows[0].href() != "/requests?key=k1" {
		t.Errorf("keys = %+v", k)
	}
	if v.empty() {
		t.Error("empty")
	}
}

func TestKeyCapWaitsNamesTheKeyAndItsCap(t *testing.T) {
	gates := []live.Gate{
		{Key: "key:k1", Level: live.LevelKey, Cap: 4, EffectiveCap: 4, InFlight: 4, Queued: 6},
		{Key: "key:k2", Level: live.LevelKey, Cap: 2, EffectiveCap: 2, InFlight: 1},
		{Key: "conn:c", Level: live.LevelConnection, Cap: 8, Queued: 3},
	}
	got := keyCapWaits(gates, []live.Client{{ID: "k1", Name: "team-a", Cap: 4}, {ID: "k2", Name: "team-b", Cap: 2}})
	want := []KeyCapWait{{ID: "k1", Name: "team-a", InFlight: 4, Cap: 4, Queued: 6}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
