package cluster

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts are loaded by SHA (EVALSHA) and sent in full only when Redis
// does not know them yet (after a restart), so each costs one round trip.
var (
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/leave.lua
	leaveLua string
	//go:embed lua/renew.lua
	renewLua string
)

// scripts are immutable once built; one set serves every Controller.
var (
	acquireScript = redis.NewScript(acquireLua)
	releaseScript = redis.NewScript(releaseLua)
	leaveScript   = redis.NewScript(leaveLua)
	renewScript   = redis.NewScript(renewLua)
)
