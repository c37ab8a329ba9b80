// Package web holds the dashboard's view layer: templ components, the view models they
// draw, and the locale catalogs. It does no I/O and knows nothing of the store or the
// gateway; handlers build a view model, pick a component and render it to a buffer.
//
// # Conventions
//
// Every page component takes a Page (the chrome: localizer, signed-in user, hashed
// asset paths, flashes, request time and path) and its own view model, both as plain
// parameters — nothing travels through the context:
//
//	Layout(page Page, body templ.Component)
//	LoginPage(page Page, f LoginForm)
//	OverviewPage(page Page, v Overview)              // v from BuildOverview
//	ConnectionsPage(page Page, v ConnectionList)
//	ConnectionFormPage(page Page, f ConnectionForm)  // create (ID == "") and edit
//	ConfirmDeletePage(page Page, c ConfirmDelete)
//	SettingsPage(page Page, f SettingsForm)
//	KeysPage(page Page, v KeyList)                   // client keys
//	TokensPage(page Page, v KeyList)                 // API tokens (with Role)
//	AuditPage(page Page, v AuditList)                // entries diffed with DiffJSON
//	UsersPage(page Page, v UserList)
//	ErrorPage(page Page, status int, message string)
//
// Page components set Page.Title and Page.Nav themselves; handlers fill the rest:
//
//	page := web.Page{
//		L:       web.NewLocalizer(web.MatchLocale(r.Header.Get("Accept-Language"), langCookie)),
//		User:    &web.User{Email: u.Email, Role: u.Role}, // nil when signed out
//		CSSPath: assets.Path("app.css"), JSPath: assets.Path("app.js"), IconPath: assets.Path("favicon.svg"),
//		Flashes: flashes, Now: time.Now(), Path: r.URL.Path,
//	}
//
// # Text
//
// Every user-facing string lives in locales/en.json and locales/pt-BR.json (tests
// check both have the same keys and verbs, and that templates hold no literal text).
// Handlers localise what they put into view models — flashes, validation messages,
// confirmation titles — with Page.L.T; the catalogs hold ready keys for them
// ("flash.*", "validation.*", "confirm.*", "login.failed", "error.*"). Messages are
// fmt formats; translations may reorder arguments with %[n]s. N picks a plural form.
// The language switcher links to the current path with ?lang=en or ?lang=pt-BR: the
// handler stores that in a cookie and MatchLocale prefers the cookie over
// Accept-Language.
//
// # Forms
//
// Form fields carry the JSON names (name, provider, apiStyle, baseUrl, apiKey,
// priority, models, enabled, maxConcurrent, modelConcurrency, maxWaitMs,
// executionMaxWaitMs, maxQueueDepth, rpm, rpd, tpm, tpd, minTime, version; settings:
// globalMaxConcurrent, defaultMaxWaitMs, defaultExecutionMaxWaitMs,
// defaultMaxQueueDepth, priorityAgingMs, defaultOutputReserve, maxAttempts, suspendMs, breakerFailures,
// breakerCooldownMs, providers; client keys: weight, maxConcurrent, maxWaitMs, rpm,
// tpm, tpd, models, priority). Field values in view models are the raw typed strings, so a failed save
// re-renders exactly what was typed. The "enabled" checkbox is preceded by a hidden
// "enabled=false": the field is true when any submitted value is "true". Disabled
// (read-only) controls are not submitted at all.
//
// Errors go in FieldErrors keyed by form name; FieldErrors.AddPath maps an API error
// path (rateLimitOverrides.modelConcurrency.glm-5) onto its form field. Each error is
// drawn under its field (data-testid="error-<field>", the control gets aria-invalid
// and aria-describedby); errors under names the form does not show are listed at its
// top. Textarea errors are one message per bad line, written with LineMessage
// (`line 2: "glm-5=0": cap must be a whole number from 1 to 10000`).
//
// Routes the components post to or link to: POST /login, GET+POST /logout, GET+POST
// /account (currentPassword, newPassword, confirmPassword); create POST
// /connections/new, edit POST /connections/{id} (override with ConnectionForm.Action),
// POST /connections/{id}/toggle, GET+POST /connections/{id}/delete; POST /settings;
// POST /keys, GET+POST /keys/{id}/revoke; POST /tokens, GET+POST /tokens/{id}/revoke;
// POST /users, POST /users/{id}/role, POST /users/{id}/password, GET+POST
// /users/{id}/delete. Destructive
// actions link to a GET confirmation page (ConfirmDeletePage) that POSTs.
//
// # Live overview
//
// OverviewPage marks its root with data-live-url (Overview.LiveURL, e.g. "/live");
// static/app.js polls that URL for the GET /api/v1/gates JSON and updates, in place,
// every element carrying data-gate="<gate key>" (ratio, bar, queue, state, sparkline),
// the bottleneck marks, the connection health (data-conn="<id>") and the "Right now"
// totals. Without JavaScript the page shows the same numbers as of its rendering.
// /live?fragments=overview sends the request-log and queue parts again as HTML rendered
// by the same components (TrafficFragments, OverviewFragments), which app.js swaps in:
// one rendering, never a second one in JavaScript.
//
// # Decisions
//
//   - Charts are our own component (chart.templ, chart.go): the bars in a 100 × 100
//     viewBox stretched to a fixed-height box, the unit, y ticks and x labels as HTML
//     around it (a CSS grid), so text keeps the stylesheet's size at every width; ticks
//     step by 1, 2 or 5 × 10ⁿ with the decimals the step needs; role="img" with title
//     and desc, a legend, the numbers in a details table and a CSV link. Colours are CSS
//     classes and sizes attributes or grid tracks, because the Content-Security-Policy
//     allows no inline style; no chart needs JavaScript. TestNothingInline keeps every
//     page free of style attributes, inline script and on* handlers.
//   - On a phone (below 640 px) the tables an operator reads turn each row into a card:
//     cells carry data-label, which the stylesheet prints before the value.
//   - CSV cells starting with =, +, -, @, a tab or a carriage return get a leading ',
//     negative numbers included: a spreadsheet reads -1+1 as a formula.
//   - Validation problems carry a stable code and arguments beside their English message
//     (limits.FieldError, limits.LineError); the dashboard words each from the catalog
//     entry validation.<code> (FieldErrorMessage, LineErrorMessage), and tests fail if a
//     listed code lacks one. The REST API's problem+json keeps the English message.
//   - Wait percentiles are interpolated within live.WaitHistogram's buckets between two
//     history samples, as Prometheus's histogram_quantile does, and each names its
//     window. The summary sums connection gates only: every path has exactly one, so
//     each admission counts once.
package web
