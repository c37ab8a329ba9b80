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

// The request log's cost (DESIGN.md "Request log and usage": with the
// log on, c=16 non-streaming throughput ≥ 0.9 × with it off, same sitting). With
// -request-log both, a second Gatehouse of the same build runs with
// GATEHOUSE_REQUEST_LOG=off on a managed Postgres of its own, and each
// repetition of a scenario with a log target measures it right beside the
// log-on Gatehouse: the pair runs back to back, so drift on a shared machine
// cancels out as it does for the ratio to direct. Which of the two goes first
// alternates, so an effect of the order cancels out too; when the log-off run
// comes second, the log-on Postgres's CPU during it (the rows just written:
// COPYs still running, autovacuum) is measured and shown.
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

// runOrder is the order of the paths in repetition rep of sc: direct,
// Gatehouse and the cluster run, reversed every other repetition, with the
// log-off run between direct and Gatehouse (see pathNoLog).
func runOrder(sc scenario, rep int, o options) []string {
	order := []string{pathDirect}
	if o.requestLog == "both" && sc.minLogRatio > 0 {
		order = append(order, pathNoLog)
	}
	order = append(order, pathGatehouse)
	if o.cluster && sc.minCluster > 0 {
		order = append(order, pathCluster)
	}
	if rep%2 == 0 {
		slices.Reverse(order)
	}
	return order
}

// logSummary is the log-off runs of one scenario beside its log-on runs.
type logSummary struct {
	OffRPS float64 `json:"logOffRequestsPerSecond"`
	OnRPS  float64 `json:"logOnRequestsPerSecond"`
	// Ratio is the median of the per-repetition on ÷ off ratios; Ratios are
	// those, OffFirst and OnFirst their medians by which run went first.
	Ratio    float64   `json:"onOffRatio"`
	Ratios   []float64 `json:"onOffRatios"`
	OffFirst float64   `json:"onOffRatioLogOffFirst"`
	OnFirst  float64   `json:"onOffRatioLogOnFirst"`
	// SpillCPUUs: the log-on Gatehouse's Postgres CPU during the log-off runs
	// that came second, per request of those runs (median).
	SpillCPUUs float64 `json:"logOnPostgresCpuDuringLogOffUs"`
	// Gatehouse and Postgres CPU per request, log off and on (medians).
	OffCPUUs         float64 `json:"logOffGatehouseCpuPerRequestUs"`
	OnCPUUs          float64 `json:"logOnGatehouseCpuPerRequestUs"`
	OffPostgresCPUUs float64 `json:"logOffPostgresCpuPerRequestUs"`
	OnPostgresCPUUs  float64 `json:"logOnPostgresCpuPerRequestUs"`
	Clean            bool    `json:"clean"`
}

func summarizeLog(sc scenario, runs []runRecord, byRep map[int]map[string]runRecord) *logSummary {
	l := &logSummary{Clean: true}
	var off, on, offCPU, onCPU, offPG, onPG, offFirst, onFirst, spill []float64
	onAt := map[int]int{} // repetition → index of its log-on run in runs (runs are in the order they ran)
	for i, r := range runs {
		if r.Scenario == sc.name && r.Path == pathGatehouse {
			onAt[r.Rep] = i
		}
	}
	for i, r := range runs {
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
		if i < onAt[r.Rep] {
			offFirst = append(offFirst, g.RPS/r.RPS)
		} else {
			onFirst = append(onFirst, g.RPS/r.RPS)
			spill = append(spill, r.LogPostgresCPUUs)
		}
	}
	if len(l.Ratios) == 0 {
		return nil
	}
	l.OffRPS, l.OnRPS, l.Ratio = median(off), median(on), median(l.Ratios)
	l.OffFirst, l.OnFirst, l.SpillCPUUs = median(offFirst), median(onFirst), median(spill)
	l.OffCPUUs, l.OnCPUUs, l.OffPostgresCPUUs, l.OnPostgresCPUUs = median(offCPU), median(onCPU), median(offPG), median(onPG)
	return l
}

// target is the request log's throughput target for one scenario.
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
			b.WriteString("\nRequest log on and off (the same build, the two runs back to back in each repetition, the log-off one first in odd repetitions; medians; Postgres = each Gatehouse's managed Postgres, the log's writes included; spill = the log-on Postgres's CPU during a log-off run that came second):\n\n")
			b.WriteString("| scenario | log off req/s | log on req/s | on ÷ off (per repetition) | off first / on first | Gatehouse CPU/req off → on | Postgres CPU/req off → on | spill |\n")
			b.WriteString("|---|---:|---:|---|---|---:|---:|---:|\n")
		}
		ratios := make([]string, len(l.Ratios))
		for i, x := range l.Ratios {
			ratios[i] = fmt.Sprintf("%.2f", x)
		}
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.2f (%s) | %.2f / %.2f | %.1f → %.1f µs | %.1f → %.1f µs | %.1f µs |\n",
			s.Name, l.OffRPS, l.OnRPS, l.Ratio, strings.Join(ratios, ", "), l.OffFirst, l.OnFirst,
			l.OffCPUUs, l.OnCPUUs, l.OffPostgresCPUUs, l.OnPostgresCPUUs, l.SpillCPUUs)
	}
}

// logInTheWay says what keeps the request log's target out of reach.
const logInTheWay = "every request becomes a row that Postgres, on the same 2 cores, COPYs into a partition with three B-tree indexes (DESIGN's): about 9–14 µs of Postgres CPU per row (with the machine's speed) against Gatehouse's 2–3 µs for the hand-off and the writer (docs/BENCHMARKS.md, \"Request log\"); every core the database takes is one the request path, the load generator and the fake upstream do not get."
