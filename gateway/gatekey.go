package gateway

import (
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// Gate keys are built and read here only (and by gateway/cluster, which keys
// Redis by them): "global", "provider:<p>", "connection:<id>" and
// "model:<id>:<M>". Everyone else reads the fields of live.Gate.
const gateGlobal = "global"

func providerGateKey(provider string) string { return "provider:" + provider }

func connGateKey(connID string) string { return "connection:" + connID }

func modelGateKey(connID, model string) string { return "model:" + connID + ":" + model }

// The keys of shadow gates (package health counts them).
func shadowConnKey(connID string) string         { return "shadow:connection:" + connID }
func shadowModelKey(connID, model string) string { return "shadow:model:" + connID + ":" + model }

// gateIdentity fills the Key, ConnectionID, Provider and Model of a live.Gate
// from the key of one of the gateway's gates. A gate of a connection that is
// still configured takes its provider from s; one left over from an earlier
// config (still holding requests) has no provider. s may be nil.
func gateIdentity(s *state, key, level string) live.Gate {
	g := live.Gate{Key: key, Level: level}
	switch {
	case key == gateGlobal:
	case strings.HasPrefix(key, "provider:"):
		g.Provider = key[len("provider:"):]
	case strings.HasPrefix(key, "connection:"):
		g.ConnectionID = key[len("connection:"):]
	case strings.HasPrefix(key, "model:"):
		g.ConnectionID, g.Model = splitModelKey(s, key[len("model:"):])
	}
	if s != nil && g.ConnectionID != "" {
		if c := s.byID[g.ConnectionID]; c != nil {
			g.Provider = c.provider
		}
	}
	return g
}

// splitModelKey splits "<id>:<M>" into the connection id and the model. A
// model id may hold colons ("llama3:8b"); so may, in principle, a connection
// id, so the first split naming a configured connection wins, else the
// first colon.
func splitModelKey(s *state, rest string) (connID, model string) {
	if s != nil {
		for i := range len(rest) {
			if rest[i] == ':' && s.byID[rest[:i]] != nil {
				return rest[:i], rest[i+1:]
			}
		}
	}
	connID, model, _ = strings.Cut(rest, ":")
	return connID, model
}
