package cluster

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts are loaded by SHA (EVALSHA) and sent in full only when Redis
// does not know them yet (after a restart), so each costs one round trip.
// fair.lua is not a script of its own: the functions of a gate's fair queue,
// put in front of every script that touches a queue.
var (
	//go:embed lua/fair.lua
	fairLua string
	//go:embed lua/admit.lua
	admitLua string
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/wake.lua
	wakeLua string
	//go:embed lua/leave.lua
	leaveLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/rejoin.lua
	rejoinLua string
	//go:embed lua/turn.lua
	turnLua string
	//go:embed lua/turnback.lua
	turnbackLua string
	//go:embed lua/tokens.lua
	tokensLua string
	//go:embed lua/peek.lua
	peekLua string
	//go:embed lua/mark.lua
	markLua string
	//go:embed lua/learn.lua
	learnLua string
)

// scripts are immutable once built; one set serves every Controller.
var (
	admitScript    = redis.NewScript(admitLua)
	acquireScript  = redis.NewScript(fairLua + acquireLua)
	releaseScript  = redis.NewScript(fairLua + releaseLua)
	wakeScript     = redis.NewScript(fairLua + wakeLua)
	leaveScript    = redis.NewScript(fairLua + leaveLua)
	renewScript    = redis.NewScript(renewLua)
	rejoinScript   = redis.NewScript(fairLua + rejoinLua)
	turnScript     = redis.NewScript(turnLua)
	turnbackScript = redis.NewScript(turnbackLua)
	tokensScript   = redis.NewScript(tokensLua)
	peekScript     = redis.NewScript(peekLua)
	markScript     = redis.NewScript(markLua)
	learnScript    = redis.NewScript(learnLua)
)
