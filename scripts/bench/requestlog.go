package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The request log's cost (issue 25; DESIGN.md "Request log and usage": with the
// log on, c=16 non-streaming throughput ≥ 0.9 × with it off, same sitting). With
// -request-log both, a second Gatehouse of the same build runs with
// GATEHOUSE_REQUEST_LOG=off on a managed Postgres of its own, and each
// repetition of a scenario with a log target measures it right before the
// log-on Gatehouse: the pair runs back to back, so drift on a shared machine
// cancels out as it does for the ratio to direct. The log-off run never follows
// a log-on run of its own scenario, so the rows the other one just wrote (their
// COPYs, autovacuum) cannot slow it down and flatter the ratio.
const pathNoLog = "gatehouse-nolog"

// startNoLog starts the log-off Gatehouse.
func (e *env) startNoLog(ctx context.Context, o options, tmp, out, bin string, childEnv []string) error {
	gh, url, err := e.startGatehouse(ctx, o, "gatehouse-nolog", filepath.Join(tmp, "data-nolog"), "", "off", out, bin, childEnv)
	if gh != nil {
		e.noLog, e.noLogURL = gh, url
	}
	return err
}

// stopNoLog stops what startNoLog started.
func (e *env) stopNoLog(tmp string) error {
	if e.noLog == nil {
		return nil
	}
	err := e.noLog.shutdown(30 * time.Second)
	return errors.Join(err, removeOutsideCluster(filepath.Join(tmp, "data-nolog"), tmp))
}

// runOrder is the order of the paths in repetition rep of sc: direct and
// Gatehouse swap places every other repetition, the cluster run comes beside
// the single process's, and the log-off run comes right before the log-on run,
// after a run that logs nothing (see pathNoLog).
func runOrder(sc scenario, rep int, o options) []string {
	withCluster := o.cluster && sc.minCluster > 0
	withNoLog := o.requestLog == "both" && sc.minLogRatio > 0
	if !withNoLog {
		order := []string{pathDirect, pathGatehouse}
		if withCluster {
			order = append(order, pathCluster)
		}
		if rep%2 == 0 {
			slices.Reverse(order)
		}
		return order
	}
	if rep%2 == 1 {
		order := []string{pathDirect, pathNoLog, pathGatehouse}
		if withCluster {
			order = append(order, pathCluster)
		}
		return order
	}
	order := []string{pathNoLog}
	if withCluster {
		order = append(order, pathCluster)
	}
	return append(order, pathGatehouse, pathDirect)
}

// logSummary is the log-off runs of one scenario beside its log-on runs.
type logSummary struct {
	OffRPS float64 `json:"logOffRequestsPerSecond"`
	OnRPS  float64 `json:"logOnRequestsPerSecond"`
	// Ratio is the median of the per-repetition on ÷ off ratios; Ratios are those.
	Ratio  float64   `json:"onOffRatio"`
	Ratios []float64 `json:"onOffRatios"`
	// Gatehouse and Postgres CPU per request, log off and on (medians).
	OffCPUUs         float64 `json:"logOffGatehouseCpuPerRequestUs"`
	OnCPUUs          float64 `json:"logOnGatehouseCpuPerRequestUs"`
	OffPostgresCPUUs float64 `json:"logOffPostgresCpuPerRequestUs"`
	OnPostgresCPUUs  float64 `json:"logOnPostgresCpuPerRequestUs"`
	Clean            bool    `json:"clean"`
}

func summarizeLog(sc scenario, runs []runRecord, byRep map[int]map[string]runRecord) *logSummary {
	l := &logSummary{Clean: true}
	var off, on, offCPU, onCPU, offPG, onPG []float64
	for _, r := range runs {
		if r.Scenario != sc.name || r.Path != pathNoLog {
			continue
		}
		if r.OK != int(r.Requests) || r.Requests == 0 {
			l.Clean = false
		}
		g, ok := byRep[r.Rep][pathGatehouse]
		if !ok || r.RPS == 0 {
			continue
		}
		off, offCPU, offPG = append(off, r.RPS), append(offCPU, r.GatehouseCPUUs), append(offPG, r.PostgresCPUUs)
		on, onCPU, onPG = append(on, g.RPS), append(onCPU, g.GatehouseCPUUs), append(onPG, g.PostgresCPUUs)
		l.Ratios = append(l.Ratios, g.RPS/r.RPS)
	}
	if len(l.Ratios) == 0 {
		return nil
	}
	l.OffRPS, l.OnRPS, l.Ratio = median(off), median(on), median(l.Ratios)
	l.OffCPUUs, l.OnCPUUs, l.OffPostgresCPUUs, l.OnPostgresCPUUs = median(offCPU), median(onCPU), median(offPG), median(onPG)
	return l
}

// target is issue 25's throughput target for one scenario.
func (l *logSummary) target(sc scenario) targetCheck {
	return targetCheck{
		What: sc.name + " request log on ÷ off req/s", Want: fmt.Sprintf("≥ %.2f", sc.minLogRatio),
		Got: fmt.Sprintf("%.2f", l.Ratio), Pass: l.Clean && l.Ratio >= sc.minLogRatio,
	}
}

// writeLog renders the request log's table.
func (r *report) writeLog(b *strings.Builder) {
	head := false
	for _, s := range r.Scenarios {
		l := s.Log
		if l == nil {
			continue
		}
		if !head {
			head = true
			b.WriteString("\nRequest log on and off (the same build, the log-off run right before the log-on one in each repetition; medians; Postgres = the Gatehouse's managed Postgres, the log's writes included):\n\n")
			b.WriteString("| scenario | log off req/s | log on req/s | on ÷ off (per repetition) | Gatehouse CPU/req off → on | Postgres CPU/req off → on |\n")
			b.WriteString("|---|---:|---:|---|---:|---:|\n")
		}
		ratios := make([]string, len(l.Ratios))
		for i, x := range l.Ratios {
			ratios[i] = fmt.Sprintf("%.2f", x)
		}
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.2f (%s) | %.1f → %.1f µs | %.1f → %.1f µs |\n",
			s.Name, l.OffRPS, l.OnRPS, l.Ratio, strings.Join(ratios, ", "), l.OffCPUUs, l.OnCPUUs, l.OffPostgresCPUUs, l.OnPostgresCPUUs)
	}
}

// logInTheWay says what keeps the request log's target out of reach.
const logInTheWay = "every request becomes a row that Postgres, on the same 2 cores, COPYs into a partition with three B-tree indexes (DESIGN's): about 9–11 µs of Postgres CPU per row against Gatehouse's 2–3 µs for the hand-off and the writer (docs/BENCHMARKS.md, \"Request log (issue 25)\"); every core the database takes is one the request path, the load generator and the fake upstream do not get."
