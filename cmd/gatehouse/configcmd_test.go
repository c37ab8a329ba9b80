package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// configCLI runs gatehouse config … in this process against one test database, with a
// store of its own on that database to seed and inspect it.
type configCLI struct {
	t   *testing.T
	env map[string]string
	st  *store.Store
	dir string
}

func newConfigCLI(t *testing.T) *configCLI {
	t.Helper()
	url := storetest.URL(t)
	secret := store.GenerateSecretKey()
	st := openTestStore(t, url, secret)
	dir := t.TempDir()
	return &configCLI{t: t, st: st, dir: dir, env: map[string]string{
		"GATEHOUSE_DATABASE_URL": url,
		"GATEHOUSE_SECRET_KEY":   secret,
		"GATEHOUSE_DATA_DIR":     filepath.Join(dir, "data"),
		"GATEHOUSE_LOG_LEVEL":    "error",
	}}
}

// run runs the CLI with args and returns stdout, stderr and run's error.
func (c *configCLI) run(args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	getenv := func(k string) string { return c.env[k] }
	err := run(c.t.Context(), args, getenv, strings.NewReader(""), &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// file writes a file in the test's directory and returns its path.
func (c *configCLI) file(name, content string) string {
	c.t.Helper()
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// state returns every connection's version by name, the settings' version and the
// number of audit rows.
func (c *configCLI) state() (map[string]int64, int) {
	c.t.Helper()
	cur, err := c.st.ReadConfig(c.t.Context())
	if err != nil {
		c.t.Fatal(err)
	}
	v := map[string]int64{"settings": cur.Settings.Version}
	for _, conn := range cur.Connections {
		v[conn.Name] = conn.Version
	}
	entries, err := c.st.ListAudit(c.t.Context(), 0, store.MaxAuditLimit)
	if err != nil {
		c.t.Fatal(err)
	}
	return v, len(entries)
}

func sameVersions(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestConfigCommand: export → apply is a no-op; one edited cap is the one line of the
// diff (exit status 2) and then applied with the actor config:cli; three bad values are
// all reported and change nothing; ${ENV_VAR} keys come from the command's environment;
// --prune (after FILE) deletes what the file leaves out; a YAML error names its line.
func TestConfigCommand(t *testing.T) {
	t.Parallel()
	c := newConfigCLI(t)
	ctx := t.Context()
	if _, err := c.st.CreateConnection(ctx, store.ActorSystem, store.ConnectionInput{
		Name: "zai-main", Provider: "zai", APIStyle: "openai", BaseURL: "https://api.z.ai/api/paas/v4",
		APIKey: "sk-zai-main-0123456789", Models: []string{"glm-5", "glm-4.7"}, Enabled: true,
		RateLimitOverrides: []byte(`{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3}}`),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.st.CreateConnection(ctx, store.ActorSystem, store.ConnectionInput{
		Name: "spare", Provider: "openai", APIStyle: "openai", BaseURL: "https://api.openai.com/v1",
		APIKey: "sk-spare-0123456789", Models: []string{"gpt-5"}, Enabled: true,
	}); err != nil {
		t.Fatal(err)
	}

	exported, _, err := c.run("config", "export")
	if err != nil {
		t.Fatalf("config export: %v", err)
	}
	asJSON, _, err := c.run("config", "export", "--format", "json")
	if err != nil || !strings.HasPrefix(asJSON, "{") {
		t.Fatalf("config export --format json = %q, %v", asJSON, err)
	}
	if strings.Contains(exported+asJSON, "sk-") {
		t.Fatalf("the export shows an upstream key:\n%s", exported)
	}
	before, audits := c.state()
	for _, f := range []string{c.file("export.yaml", exported), c.file("export.json", asJSON)} {
		out, _, err := c.run("config", "apply", f)
		if err != nil || out != "no changes\n" {
			t.Fatalf("config apply %s = %q, %v; want no changes", f, out, err)
		}
	}
	if after, n := c.state(); !sameVersions(before, after) || n != audits {
		t.Fatalf("applying the export changed something: versions %v → %v, audit rows %d → %d", before, after, audits, n)
	}

	edited := strings.Replace(exported, "glm-5: 1\n", "glm-5: 2\n", 1)
	if edited == exported {
		t.Fatalf("no glm-5 cap of 1 in the export:\n%s", exported)
	}
	f := c.file("edited.yaml", edited)
	out, _, err := c.run("config", "diff", f)
	var code exitCode
	if !errors.As(err, &code) || code != 2 {
		t.Fatalf("config diff with a change: error %v, want exit status 2", err)
	}
	want := "~ connection zai-main\n    ~ rateLimitOverrides.modelConcurrency.glm-5: 1 → 2\n0 to create, 1 to update, 0 to delete\n"
	if out != want {
		t.Fatalf("config diff printed\n%s\nwant\n%s", out, want)
	}
	if after, n := c.state(); !sameVersions(before, after) || n != audits {
		t.Fatalf("config diff wrote something")
	}
	if out, _, err := c.run("config", "apply", f); err != nil || out != want {
		t.Fatalf("config apply = %q, %v; want the same plan", out, err)
	}
	entries, err := c.st.ListAudit(ctx, 0, 1)
	if err != nil || len(entries) != 1 || entries[0].Actor != "config:cli" {
		t.Fatalf("last audit row %+v (%v), want actor config:cli", entries, err)
	}
	if out, _, err := c.run("config", "diff", f); err != nil || out != "no changes\n" {
		t.Fatalf("config diff after apply = %q, %v; want no changes and status 0", out, err)
	}

	// Three bad values in three places: all reported, nothing written.
	bad := strings.Replace(edited, "glm-5: 2\n", "glm-5: 1.5\n", 1)
	bad = strings.Replace(bad, "maxAttempts: 3\n", "maxAttempts: 11\n", 1)
	bad = strings.Replace(bad, "    priority: 0\n", "    priority: high\n", 1) // the first connection: spare
	before, audits = c.state()
	_, stderr, err := c.run("config", "apply", c.file("bad.yaml", bad))
	if err == nil || !strings.Contains(err.Error(), "3 problems") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("config apply of three bad values: %v, want 3 problems and nothing changed", err)
	}
	for _, p := range []string{"connections[spare].priority: ", "connections[zai-main].rateLimitOverrides.modelConcurrency.glm-5: ", "settings.maxAttempts: "} {
		if !strings.Contains(stderr, p) {
			t.Errorf("stderr does not report %q:\n%s", p, stderr)
		}
	}
	if n := strings.Count(stderr, "\n"); n != 3 {
		t.Errorf("stderr has %d lines, want one per problem:\n%s", n, stderr)
	}
	if after, n := c.state(); !sameVersions(before, after) || n != audits {
		t.Fatalf("a rejected file changed something")
	}

	// ${ENV_VAR} from the command's environment; a client key's secret printed once.
	withNew := strings.Replace(edited, "connections:\n", `connections:
  - name: from-env
    provider: zai
    apiStyle: openai
    baseUrl: https://api.z.ai/api/paas/v4
    apiKey: ${ZAI_TEST_KEY}
    models: [glm-5]
`, 1)
	withNew = strings.Replace(withNew, "clientKeys: []\n", "clientKeys:\n  - name: ci\n", 1)
	f = c.file("new.yaml", withNew)
	// Only GATEHOUSE_SECRET_* and --env-allow names are read (issue 24, finding 10):
	// the admin password is never an upstream key, even when it is set.
	c.env["GATEHOUSE_ADMIN_PASSWORD"] = "the-admin-password-123"
	c.env["ZAI_TEST_KEY"] = "sk-from-the-environment-42"
	for _, ref := range []string{"GATEHOUSE_ADMIN_PASSWORD", "GATEHOUSE_SECRET_KEY", "ZAI_TEST_KEY"} {
		g := c.file("ref.yaml", strings.Replace(withNew, "${ZAI_TEST_KEY}", "${"+ref+"}", 1))
		_, stderr, err := c.run("config", "apply", g)
		if err == nil || !strings.Contains(stderr, "connections[from-env].apiKey: ${"+ref+"} may not be read: an apiKey reads only variables named GATEHOUSE_SECRET_*") {
			t.Fatalf("${%s}: %v\n%s", ref, err, stderr)
		}
	}
	if after, n := c.state(); !sameVersions(before, after) || n != audits {
		t.Fatalf("a refused ${ENV_VAR} changed something")
	}
	delete(c.env, "ZAI_TEST_KEY")
	if _, stderr, err := c.run("config", "apply", f, "--env-allow", "ZAI_TEST_KEY"); err == nil || !strings.Contains(stderr, "connections[from-env].apiKey: environment variable ZAI_TEST_KEY is not set") {
		t.Fatalf("unset variable: %v\n%s", err, stderr)
	}
	c.env["ZAI_TEST_KEY"] = "sk-from-the-environment-42"
	out, _, err = c.run("config", "apply", f, "--env-allow", "ZAI_TEST_KEY")
	if err != nil || !strings.Contains(out, "+ connection from-env\n") || !strings.Contains(out, "+ client_key ci\n") {
		t.Fatalf("config apply with new entries = %q, %v", out, err)
	}
	if n := strings.Count(out, store.ClientKeyPrefix); n != 1 {
		t.Errorf("the new key's secret is printed %d times, want once:\n%s", n, out)
	}
	cfg, err := c.st.LoadGatewayConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, conn := range cfg.Connections {
		if conn.Name == "from-env" && conn.APIKey != "sk-from-the-environment-42" {
			t.Errorf("from-env's key = %q, want the variable's value", conn.APIKey)
		}
	}

	// --prune after FILE: spare and from-env are not in edited.yaml.
	f = c.file("edited.yaml", edited)
	out, _, err = c.run("config", "apply", f, "--prune")
	if err != nil || !strings.Contains(out, "− connection from-env\n") || !strings.Contains(out, "− client_key ci\n") {
		t.Fatalf("config apply --prune = %q, %v", out, err)
	}
	cur, _ := c.st.ReadConfig(ctx)
	if len(cur.Connections) != 2 || len(cur.ClientKeys) != 0 {
		t.Errorf("after --prune: %d connections, %d keys; want zai-main and spare, no key", len(cur.Connections), len(cur.ClientKeys))
	}

	// A YAML error names its line; nothing is opened for it.
	_, _, err = c.run("config", "diff", c.file("broken.yaml", "settings:\n  maxAttempts: 2\nconnections:\n\t- name: x\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("broken YAML: %v, want the line", err)
	}
}

// TestConfigUsageErrors: config command lines that cannot succeed say why and open no
// database.
func TestConfigUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("a: [1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"config"}, "missing subcommand"},
		{[]string{"config", "import"}, `unknown subcommand "import"`},
		{[]string{"config", "diff"}, "missing FILE"},
		{[]string{"config", "apply", "a.yaml", "b.yaml"}, `unexpected argument "b.yaml"`},
		{[]string{"config", "apply", filepath.Join(dir, "none.yaml")}, "no such file"},
		{[]string{"config", "apply", broken}, "line 1: did not find expected"},
		{[]string{"config", "export", "--format", "toml"}, `--format must be "yaml" or "json"`},
	} {
		dataDir, getenv := dataDirOnly(t)
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), tt.args, getenv, strings.NewReader(""), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q) = %v, want an error saying %q", tt.args, err, tt.want)
		}
		if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("run(%q) started the database for a usage error", tt.args)
		}
	}
}

// gatehouseExit runs the gatehouse binary to completion and returns its output and exit
// status.
func gatehouseExit(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binPath, args...)
	cmd.Env = append(testEnv(privateDir(t, nil), freeAddr(t)), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("gatehouse %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), 0
}

// TestConfigApplyReachesGateway: against a served instance, export → edit one cap →
// diff exits 2 → apply exits 0, and the running gateway enforces the new cap within a
// second (NOTIFY); the audit log names config:cli; a bad file exits 1.
func TestConfigApplyReachesGateway(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	secret := store.GenerateSecretKey()
	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5", "glm-4.7"}})
	p := serveOnURL(t, dbURL, secret)
	conn := createConnection(t, p, up.URL(), `{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3}}`)
	modelGate := "model:" + conn.ID + ":glm-5"
	waitFor(t, 5*time.Second, "the gateway to load the connection", func() bool { return gateCap(t, p, modelGate) == 1 })

	env := []string{"GATEHOUSE_DATABASE_URL=" + dbURL, "GATEHOUSE_SECRET_KEY=" + secret, "GATEHOUSE_LOG_LEVEL=error"}
	exported, stderr, code := gatehouseExit(t, env, "config", "export")
	if code != 0 {
		t.Fatalf("config export: status %d\n%s", code, stderr)
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	same := write("same.yaml", exported)
	if out, stderr, code := gatehouseExit(t, env, "config", "diff", same); code != 0 || out != "no changes\n" {
		t.Fatalf("config diff of the export: status %d, %q\n%s", code, out, stderr)
	}
	edited := write("edited.yaml", strings.Replace(exported, "glm-5: 1\n", "glm-5: 2\n", 1))
	out, stderr, code := gatehouseExit(t, env, "config", "diff", edited)
	if code != 2 || !strings.Contains(out, "~ rateLimitOverrides.modelConcurrency.glm-5: 1 → 2\n") || strings.Count(out, "\n") != 3 {
		t.Fatalf("config diff of the edit: status %d, %q\n%s", code, out, stderr)
	}
	if _, stderr, code := gatehouseExit(t, env, "config", "apply", edited); code != 0 {
		t.Fatalf("config apply: status %d\n%s", code, stderr)
	}
	start := time.Now()
	waitFor(t, time.Second, "the gateway to enforce the applied cap", func() bool { return gateCap(t, p, modelGate) == 2 })
	t.Logf("the applied cap reached the gateway within %s of apply's exit", time.Since(start))

	var audit struct {
		Items []struct {
			Actor  string `json:"actor"`
			Entity string `json:"entity"`
		} `json:"items"`
	}
	apiDo(t, p, http.MethodGet, "/api/v1/audit?limit=1", "", &audit)
	if len(audit.Items) != 1 || audit.Items[0].Actor != "config:cli" || audit.Items[0].Entity != "connection" {
		t.Errorf("last audit entry %+v, want config:cli on the connection", audit.Items)
	}

	bad := write("bad.yaml", strings.Replace(exported, "glm-5: 1\n", "glm-5: 0.5\n", 1))
	if _, stderr, code := gatehouseExit(t, env, "config", "apply", bad); code != 1 ||
		!strings.Contains(stderr, fmt.Sprintf("connections[%s].rateLimitOverrides.modelConcurrency.glm-5", "zai-main")) {
		t.Errorf("config apply of a bad file: status %d, want 1 naming the path\n%s", code, stderr)
	}
	if got := gateCap(t, p, modelGate); got != 2 {
		t.Errorf("cap after a rejected file = %d, want 2 still", got)
	}
}
