// Package migrations holds Adal's versioned schema migrations in goose's format, one directory per dialect
// (postgres/, sqlite/), each with the atlas.sum that pins its files. `go run ./cmd/migrations NAME` writes
// new ones from the ent schema; storage.Migrate applies them. See docs/migrations.md.
package migrations

import "embed"

// FS holds the migration directories.
//
//go:embed postgres sqlite
var FS embed.FS
