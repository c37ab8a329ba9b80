package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// budgetCollector reports, at scrape time, the share of each client key's
// money budgets spent (this replica's count, which budget.threshold alerts
// read too): the 80 % and 100 % conditions as Prometheus sees them.
type budgetCollector struct {
	g    *Gateway
	used *prometheus.Desc
}

func newBudgetCollector(g *Gateway) *budgetCollector {
	return &budgetCollector{g: g, used: prometheus.NewDesc("gatehouse_client_budget_used_ratio",
		"Share (1 = all) of a client key's (by name) daily or monthly money budget spent.",
		[]string{"client", "budget"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.used }

// Collect implements prometheus.Collector.
func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.g.state.Load()
	if s == nil {
		return
	}
	now := c.g.now()
	for _, ks := range s.keyOrder {
		if !ks.Lim.Spends() {
			continue
		}
		sp := ks.Carry.Rate.SpendNow(now)
		for _, b := range [...]struct {
			name         string
			spent, limit int64
		}{{limits.KeyBudgetUSDDaily, sp.Day, ks.Lim.BudgetDay}, {limits.KeyBudgetUSDMonthly, sp.Month, ks.Lim.BudgetMonth}} {
			if b.limit > 0 {
				ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(b.spent)/float64(b.limit), ks.Name, b.name)
			}
		}
	}
}
