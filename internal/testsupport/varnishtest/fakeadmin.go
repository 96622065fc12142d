package varnishtest

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// FakeAdmin is an in-process stand-in for a Varnish admin port, for what a
// real varnishd will not do on demand: stalls, torn frames, dropped
// connections. The handler writes the greeting itself (see Frame).
type FakeAdmin struct {
	Addr     string
	ln       net.Listener
	accepted atomic.Int32
}

// StartFakeAdmin listens on a free loopback port and serves every connection
// with serve in a goroutine of its own; n counts connections from 1. When
// the test ends it closes the listener and every connection and waits for
// the handlers to return.
func StartFakeAdmin(tb testing.TB, serve func(n int, conn net.Conn)) *FakeAdmin {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := &FakeAdmin{Addr: ln.Addr().String(), ln: ln}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(f.accepted.Add(1))
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				serve(n, conn)
			}()
		}
	}()
	return f
}

// Accepted returns how many connections the fake has accepted.
func (f *FakeAdmin) Accepted() int { return int(f.accepted.Load()) }

// Close stops accepting connections (a Varnish that went away).
func (f *FakeAdmin) Close() { f.ln.Close() }

// Frame returns one response of Varnish's CLI protocol: the 13-byte header
// "%-3d %-8d\n" (status, body length), the body, and a newline the length
// does not count.
func Frame(status int, body string) string {
	n := strconv.Itoa(len(body))
	return strconv.Itoa(status) + " " + n + strings.Repeat(" ", max(0, 8-len(n))) + "\n" + body + "\n"
}
