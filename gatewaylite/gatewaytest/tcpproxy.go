package gatewaytest

import (
	"io"
	"net"
	"sync"
	"time"
)

// TCPProxy forwards TCP connections to a target and can cut the next one
// after a delay, the way a dropped network path does: both sides see the
// connection end, whatever was in flight.
type TCPProxy struct {
	Addr   string
	target string
	l      net.Listener
	mu     sync.Mutex
	cuts   []time.Duration // delays for the next connections
	conns  sync.WaitGroup
	Opened int
}

// NewTCPProxy listens on a loopback port and forwards to target.
func NewTCPProxy(target string) *TCPProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	p := &TCPProxy{Addr: l.Addr().String(), target: target, l: l}
	go p.serve()
	return p
}

// CutNext makes the next connection end after d.
func (p *TCPProxy) CutNext(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cuts = append(p.cuts, d)
}

// Port is the proxy's port.
func (p *TCPProxy) Port() int { return p.l.Addr().(*net.TCPAddr).Port }

// Close stops accepting.
func (p *TCPProxy) Close() { p.l.Close() }

func (p *TCPProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.Opened++
		cut := time.Duration(-1)
		if len(p.cuts) > 0 {
			cut, p.cuts = p.cuts[0], p.cuts[1:]
		}
		p.mu.Unlock()
		go p.forward(c, cut)
	}
}

func (p *TCPProxy) forward(c net.Conn, cut time.Duration) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if cut >= 0 {
		time.AfterFunc(cut, func() { c.Close(); up.Close() })
	}
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}
