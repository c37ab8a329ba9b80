package static

import (
	"net/http"

	"github.com/klauspost/compress/gzhttp"
)

// compress is the wrapper Compressed applies: gzip (or zstd, when the browser prefers
// it) for bodies of 1 KiB and more whose type is not compressed already. The ETag of a
// compressed body is dropped: it names the uncompressed bytes, and a validator must
// never be shared by two encodings; the assets are cached as immutable anyway.
var compress = func() func(http.Handler) http.HandlerFunc {
	w, err := gzhttp.NewWrapper(gzhttp.MinSize(gzhttp.DefaultMinSize), gzhttp.DropETag())
	if err != nil {
		panic("static: compression wrapper: " + err.Error()) // the options above are constant
	}
	return w
}()

// Compressed returns h answering compressed to browsers that accept it (gzip or zstd),
// with Vary: Accept-Encoding on every answer, compressed or not. It is for the
// dashboard's pages, its polled JSON and its assets — never for the gateway's answers,
// whose streams must reach the client as the upstream sends them.
func Compressed(h http.Handler) http.Handler { return compress(h) }
