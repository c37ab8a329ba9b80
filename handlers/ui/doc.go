// Package ui serves the dashboard: server-rendered pages (templates in package web)
// for operators signed in with a session cookie (httpkit.SessionStore), with the sign-in
// throttle, the cross-origin write guard (http.CrossOriginProtection), the language
// choice, flashes, the live fragments the pages poll, CSV downloads and the gate
// history behind the sparklines.
//
// Handlers have the uiHandler shape and return errors; Serve wraps each with the
// session, the role check and an HTML error page for the error. The routes
// themselves are listed in handlers/routes.go.
package ui
