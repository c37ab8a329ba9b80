package store_test

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestMain gives the package's tests a PostgreSQL (see storetest) and checks for
// leaked goroutines. Tests that use storetest live in package store_test: storetest
// imports store.
func TestMain(m *testing.M) { storetest.Main(m) }
