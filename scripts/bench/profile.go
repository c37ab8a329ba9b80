package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// profile runs an extra, unmeasured non-streaming c=16 run through Gatehouse
// while fetching /debug/pprof/profile, and summarises it with go tool pprof.
// It returns a note for the report and the top functions of the profile; a
// missing endpoint is not an error.
func (e *env) profile(ctx context.Context, o options, out string, stderr io.Writer) (string, []string) {
	return e.profileOf(ctx, o, out, stderr, "gatehouse", e.gatehouseURL)
}

// profileOf profiles the Gatehouse at url, named name in the files it writes.
func (e *env) profileOf(ctx context.Context, o options, out string, stderr io.Writer, name, url string) (string, []string) {
	client, tr := newClient(2, 30*time.Second)
	defer tr.CloseIdleConnections()
	probeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := expectStatus(probeCtx, client, http.MethodGet, url+"/debug/pprof/", e.apiToken, nil, http.StatusOK)
	cancel()
	if err != nil {
		return "skipped: Gatehouse does not serve /debug/pprof/ (" + err.Error() + ")", nil
	}
	secs := max(1, int(o.duration.Seconds()))
	fmt.Fprintf(stderr, "bench: profiling %s for %ds during non-streaming c=16 ...\n", name, secs)
	prof := filepath.Join(out, name+"-cpu.pprof")
	done := make(chan error, 1)
	go func() {
		done <- fetchTo(ctx, url+fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), e.apiToken, prof, time.Duration(secs+30)*time.Second)
	}()
	sc := standardScenarios()[1]
	t := newTarget(url+"/v1", e.clientKey, benchModel, false, nil)
	closedLoop(ctx, t, sc.conc, time.Duration(secs)*time.Second+time.Second, nil)
	if err := <-done; err != nil {
		return "failed: " + err.Error(), nil
	}
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=40", e.bin, prof).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("saved %s; go tool pprof failed: %v", prof, err), nil
	}
	topPath := filepath.Join(out, name+"-cpu-top.txt")
	if err := os.WriteFile(topPath, top, 0o644); err != nil {
		return fmt.Sprintf("saved %s; writing %s failed: %v", prof, topPath, err), nil
	}
	// Allocations since start (every run so far), for go tool pprof -sample_index=alloc_space.
	allocs := filepath.Join(out, name+"-allocs.pprof")
	if err := fetchTo(ctx, url+"/debug/pprof/allocs", e.apiToken, allocs, 30*time.Second); err != nil {
		return fmt.Sprintf("%s (top functions in %s); allocation profile failed: %v", prof, topPath, err), topLines(top, 12)
	}
	return fmt.Sprintf("%s (top functions in %s; allocations since start in %s)", prof, topPath, allocs), topLines(top, 12)
}

// topLines returns the first n entries of go tool pprof -top output (the
// lines after its "flat  flat%" header), spaces squeezed.
func topLines(top []byte, n int) []string {
	var out []string
	started := false
	for _, l := range strings.Split(string(top), "\n") {
		if !started {
			started = strings.Contains(l, "flat%")
			continue
		}
		if f := strings.Fields(l); len(f) > 0 && len(out) < n {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// fetchTo saves the body of GET url, sent with the API token apiToken, to path.
func fetchTo(ctx context.Context, url, apiToken, path string, timeout time.Duration) error {
	client, tr := newClient(1, timeout)
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
