//go:build !linux

package simweb

import "net"

// newStampConn reads c plainly: only Linux gives the kernel's receive time here.
func newStampConn(c net.Conn) *stampConn { return &stampConn{Conn: c} }

// stampOn does nothing: only Linux gives the kernel's receive time here.
func stampOn(net.Listener) {}

// stampsReady does nothing: only Linux gives the kernel's receive time here.
func stampsReady() {}
