package admission

import "testing"

// A prepared request's gates are looked up by key once: its first admission
// fills the route cache its copies share, and the next ones use it.
func TestPreparedRequestResolvesItsPathOnce(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:c1": 2})
	req := Prepare(Request{Gates: refs("connection:c1", "model:c1:m")})
	if r := req.route.r.Load(); r != nil {
		t.Fatalf("route cached before any use: %+v", r)
	}
	p, ok := c.TryAcquire(req)
	if !ok {
		t.Fatal("prepared request not admitted")
	}
	p.Release()
	r := req.route.r.Load()
	if r == nil || r.c != c || r.n != 2 || r.gates[0] != c.gates["connection:c1"] || r.gates[1] != c.gates["model:c1:m"] {
		t.Fatalf("route after the first admission = %+v, want the path's two gates of this controller", r)
	}
	copyReq := req
	copyReq.Client = "k"
	p, ok = c.TryAcquire(copyReq)
	if !ok {
		t.Fatal("copy of the prepared request not admitted")
	}
	p.Release()
	if got := req.route.r.Load(); got != r {
		t.Errorf("a copy's admission resolved the path again (route %p, want %p)", got, r)
	}
}
