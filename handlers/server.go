// Package handlers serves Gatehouse over HTTP: it wires the dashboard (package ui),
// the REST API under /api/v1 (package api), health and readiness probes and runtime
// profiles, and mounts the gateway under /v1.
//
// Every route is listed in routes.go. Handlers return errors; one adapter per surface
// (problem+json for the API, an HTML page for the dashboard) maps them to a status and
// logs what the client must not see.
package handlers

import (
	"github.com/gatehouse-dev/gatehouse/handlers/api"
	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/handlers/ui"
)

// The wiring's vocabulary lives in httpkit, which both surfaces import; these names
// keep the entry point in one package for cmd.
type (
	Deps          = httpkit.Deps
	GateSource    = httpkit.GateSource
	SessionSource = httpkit.SessionSource
	AlertSource   = httpkit.AlertSource
	Prober        = httpkit.Prober
	UpstreamDeny  = httpkit.UpstreamDeny
	AuthThrottle  = httpkit.AuthThrottle
)

// DefaultUpstreamDeny is GATEHOUSE_UPSTREAM_DENY's value when unset.
const DefaultUpstreamDeny = httpkit.DefaultUpstreamDeny

var (
	// NewAuthThrottle, ParseTrustedProxies and ParseUpstreamDeny are httpkit's.
	NewAuthThrottle     = httpkit.NewAuthThrottle
	ParseTrustedProxies = httpkit.ParseTrustedProxies
	ParseUpstreamDeny   = httpkit.ParseUpstreamDeny
)

// Server holds the two surfaces over their shared core.
type Server struct {
	core *httpkit.Core
	deps Deps
	api  *api.Server
	dash *ui.Server
}

// New returns a Server for d.
func New(d Deps) *Server {
	core := httpkit.NewCore(d)
	return &Server{core: core, deps: core.Deps(), api: api.New(core), dash: ui.New(core)}
}
