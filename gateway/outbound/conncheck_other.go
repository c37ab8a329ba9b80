//go:build !unix

package outbound

import "net"

// idleConnAlive cannot peek at a socket here: a pooled connection is taken
// as alive, and a stale one fails on use (UnansweredError).
func idleConnAlive(net.Conn) bool { return true }
