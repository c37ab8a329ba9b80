package main

import (
	"context"
	"errors"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/web"
)

// prober is the dashboard's "Test connection": gateway.Probe, its result in the
// dashboard's terms.
type prober struct{ gw *gateway.Gateway }

func (p prober) Probe(ctx context.Context, id string) (web.ProbeView, error) {
	return probeView(p.gw.Probe(ctx, id))
}

// probeView turns a gateway probe's result into the dashboard's: a refusal's
// reason, or what the request got.
func probeView(res gateway.ProbeResult, err error) (web.ProbeView, error) {
	for _, r := range []struct {
		err    error
		reason string
	}{
		{gateway.ErrProbeNotLoaded, web.ProbeNotLoaded},
		{gateway.ErrProbeUnknown, web.ProbeUnknown},
		{gateway.ErrProbeDisabled, web.ProbeDisabled},
		{gateway.ErrProbeNoModel, web.ProbeNoModel},
	} {
		if errors.Is(err, r.err) {
			return web.ProbeView{Refused: r.reason}, nil
		}
	}
	if err != nil {
		return web.ProbeView{}, err
	}
	return web.ProbeView{Model: res.Model, Status: res.Status, Text: res.Text, Code: res.Code,
		Message: res.Message, Latency: res.Latency}, nil
}
