// Package loopback holds real parts on loopback ports for exercising the
// gateway: a target API that acts and counts its effects, a fault proxy
// that cuts HTTP exchanges at chosen points, a plain MCP pass-through
// proxy (the baseline the gateway is measured against), and an MCP client
// with bearer-token authentication and a naive retry layer. The demo runs
// its scripted incident on them; the gateway's tests, chaos run and
// benchmarks use the same parts. Nothing here is test scaffolding: it
// links no testing package.
package loopback

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Server is an HTTP server on a loopback port.
type Server struct {
	URL string // http://127.0.0.1:port
	srv *http.Server
}

// Serve starts serving h on a free loopback port.
func Serve(h http.Handler) *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("loopback: listen: " + err.Error())
	}
	s := &Server{URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go s.srv.Serve(ln)
	return s
}

// closeWait bounds how long Close waits for requests in flight.
const closeWait = 10 * time.Second

// Close stops the server: it stops accepting, lets requests in flight
// finish (up to closeWait), then closes every connection left.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	s.srv.Shutdown(ctx)
	s.srv.Close()
}
