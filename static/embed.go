// Package static holds Gatehouse's own stylesheet, script and images, embedded in the
// binary and served under content-hashed names so browsers may cache them forever.
//
// Build an Assets once at start-up with New, give templates the hashed URLs from Path
// and mount Handler at "/static/".
package static

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed app.css app.js favicon.svg
var files embed.FS

// Prefix is the URL path under which Handler serves the assets.
const Prefix = "/static/"

// hashLen is how many hex digits of the SHA-256 go into a hashed name.
const hashLen = 8

// asset is one embedded file with its content-hashed name.
type asset struct {
	hashed      string // e.g. "app.1a2b3c4d.css"
	body        []byte
	contentType string
	etag        string
}

// Assets is the immutable set of embedded files, indexed by plain and by hashed name.
type Assets struct {
	byName   map[string]*asset // "app.css" → asset
	byHashed map[string]*asset // "app.1a2b3c4d.css" → asset
}

// New reads every embedded file and computes its content hash.
func New() (*Assets, error) {
	a := &Assets{byName: map[string]*asset{}, byHashed: map[string]*asset{}}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		body, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		h := hex.EncodeToString(sum[:])[:hashLen]
		ext := path.Ext(p)
		ct := mime.TypeByExtension(ext)
		if ct == "" {
			ct = http.DetectContentType(body)
		}
		as := &asset{
			hashed:      strings.TrimSuffix(p, ext) + "." + h + ext,
			body:        body,
			contentType: ct,
			etag:        `"` + h + `"`,
		}
		a.byName[p] = as
		a.byHashed[as.hashed] = as
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("static: read embedded files: %w", err)
	}
	return a, nil
}

// Path returns the URL of the named file under its content-hashed name, for example
// Path("app.css") = "/static/app.1a2b3c4d.css". An unknown name yields Prefix+name,
// which Handler answers with 404, so a typo shows up as a broken asset, not a panic.
func (a *Assets) Path(name string) string {
	if as, ok := a.byName[name]; ok {
		return Prefix + as.hashed
	}
	return Prefix + name
}

// Handler serves the assets under their hashed names below Prefix with a one-year
// immutable Cache-Control. Unknown names, plain (unhashed) names and stale hashes get
// 404: a page asking for an old hash must not be handed different content to cache
// forever.
func (a *Assets) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		as, found := a.byHashed[name]
		if !ok || !found {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", as.contentType)
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("ETag", as.etag)
		http.ServeContent(w, r, as.hashed, time.Time{}, bytes.NewReader(as.body))
	})
}
