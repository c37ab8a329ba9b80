//go:build unix

package outbound

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// idleConnAlive peeks, without blocking and without consuming anything, at
// an idle pooled connection's socket before a request is written on it. It
// is alive when there is nothing to read; an end of stream or an error
// means the upstream closed it, and bytes nobody asked for (a 408 before
// an idle close, a TLS alert) mean it is not safe to use either. One
// recvfrom syscall per reused connection.
func idleConnAlive(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := true
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EWOULDBLOCK), errors.Is(rerr, syscall.EINTR):
			alive = true
		default:
			alive = false
		}
		return true // one look, never wait for readability
	})
	return err == nil && alive
}
