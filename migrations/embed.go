// Package migrations holds the SQL schema migrations, applied in file-name order by
// store.Migrate. Files are named NNNN_name.sql; each runs in its own transaction.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
