package handlers

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestMain runs the tests against real PostgreSQL databases (store/storetest) and fails
// the run on leaked goroutines.
func TestMain(m *testing.M) { storetest.Main(m) }
