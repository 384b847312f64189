// Package gatewaytest holds what only the gateway's tests need beside the
// loopback parts of demo/loopback (target, fault proxy, pass-through,
// naive agent): a real OpenSSH server, a TCP proxy that cuts connections,
// a dead URL, and JSON for test data.
package gatewaytest

import (
	"encoding/json"
	"net"
)

// DeadURL returns an http URL on a loopback port nothing listens on: a
// connection is refused before any byte is sent.
func DeadURL() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// MustJSON marshals v or panics (test data).
func MustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
