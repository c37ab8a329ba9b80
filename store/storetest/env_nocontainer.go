//go:build nocontainer

package storetest

import (
	"context"
	"errors"
)

// startContainer without testcontainers-go: test binaries built with the
// nocontainer tag link far less (scripts/mutate builds one per mutant) and need
// the PostgreSQL server binaries or GATEHOUSE_TEST_DATABASE_URL.
func (e *env) startContainer(context.Context) error {
	return errors.New("built with the nocontainer tag: no Docker fallback")
}
