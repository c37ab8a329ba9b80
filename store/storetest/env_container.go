//go:build !nocontainer

package storetest

import (
	"context"
	"fmt"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"go.uber.org/goleak"
)

// containerImage is the image used when Docker is the only source.
const containerImage = "postgres:16-alpine"

// startContainer runs PostgreSQL in Docker through testcontainers-go.
func (e *env) startContainer(ctx context.Context) (err error) {
	defer func() {
		// testcontainers panics in some setups without a Docker engine.
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers: %v", r)
		}
	}()
	provider, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return err
	}
	if err := provider.Health(ctx); err != nil {
		return err
	}
	ctr, err := tcpostgres.Run(ctx, containerImage,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return err
	}
	u, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return err
	}
	e.baseURL = u
	e.stop = func(context.Context) error { return testcontainers.TerminateContainer(ctr) }
	// The reaper keeps its connection open until the process exits, by design.
	e.leakOpts = []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/testcontainers/testcontainers-go.(*Reaper).connect.func1"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	}
	return nil
}
