package varnishadm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// Tests in this file use an in-process fake of varnishd's CLI, for what a
// real varnishd will not do on demand: split writes, stalls, torn frames.

const fakeChallenge = "abcdefghijklmnopqrstuvwxyzabcdef"

// fakeServer is a fake admin port that greets each connection, then hands
// it to its handler.
type fakeServer struct{ *varnishtest.FakeAdmin }

type fakeConfig struct {
	secret []byte // when set, greet with a 107 challenge and check the answer
	// authFail is the status sent for a wrong answer: 500 (Varnish 7)
	// or 107 (a fresh challenge, as before Varnish 7).
	authFail int
	// handle serves one connection after the greeting; n counts
	// connections from 1.
	handle func(n int, conn net.Conn, rd *bufio.Reader)
}

func startFake(tb testing.TB, cfg fakeConfig) *fakeServer {
	tb.Helper()
	return &fakeServer{varnishtest.StartFakeAdmin(tb, func(n int, conn net.Conn) {
		rd := bufio.NewReader(conn)
		if fakeGreet(conn, rd, cfg) {
			cfg.handle(n, conn, rd)
		}
	})}
}

func fakeGreet(conn net.Conn, rd *bufio.Reader, cfg fakeConfig) bool {
	if cfg.secret == nil {
		io.WriteString(conn, frame(200, "fake varnish\n"))
		return true
	}
	io.WriteString(conn, frame(107, fakeChallenge+"\n\nAuthentication required.\n"))
	line, err := rd.ReadString('\n')
	if err != nil {
		return false
	}
	if line != "auth "+authResponse(fakeChallenge, cfg.secret)+"\n" {
		if cfg.authFail == 107 {
			io.WriteString(conn, frame(107, fakeChallenge+"\n\nAuthentication required.\n"))
		} else {
			io.WriteString(conn, frame(500, ""))
		}
		return false
	}
	io.WriteString(conn, frame(200, "fake varnish\n"))
	return true
}

func (s *fakeServer) client() *Client { return New(s.Addr, nil) }

// firstConnWrites answers the first request of the first connection with
// raw and hangs up; later connections answer every request with pong.
func firstConnWrites(raw string) func(int, net.Conn, *bufio.Reader) {
	return func(n int, conn net.Conn, rd *bufio.Reader) {
		if n == 1 {
			rd.ReadString('\n')
			io.WriteString(conn, raw)
			return
		}
		serveEach(pong)(n, conn, rd)
	}
}

// serveEach answers every request line with reply(line).
func serveEach(reply func(line string) string) func(int, net.Conn, *bufio.Reader) {
	return func(_ int, conn net.Conn, rd *bufio.Reader) {
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := io.WriteString(conn, reply(line)); err != nil {
				return
			}
		}
	}
}

func pong(string) string { return frame(200, "PONG 1 1.0") }

func TestFakeSplitReads(t *testing.T) {
	body := strings.Repeat("split across many reads\n", 20)
	s := startFake(t, fakeConfig{handle: func(_ int, conn net.Conn, rd *bufio.Reader) {
		for {
			if _, err := rd.ReadString('\n'); err != nil {
				return
			}
			msg := frame(200, body)
			for i := 0; i < len(msg); i++ {
				if _, err := conn.Write([]byte{msg[i]}); err != nil {
					return
				}
				if i < 20 || i%97 == 0 {
					time.Sleep(200 * time.Microsecond)
				}
			}
		}
	}})
	c := s.client()
	defer c.Close()
	for i := 0; i < 3; i++ {
		got, err := c.Run(testCtx(t, 10*time.Second), "x")
		if err != nil || got != body {
			t.Fatalf("Run = %q, %v", got, err)
		}
	}
}

func TestFakeLargeBody(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "%08d ", i)
	}
	body := b.String()[:1<<20]
	s := startFake(t, fakeConfig{handle: serveEach(func(string) string { return frame(200, body) })})
	c := s.client()
	defer c.Close()
	got, err := c.Run(testCtx(t, 10*time.Second), "x")
	if err != nil || got != body {
		t.Fatalf("Run = %d bytes, %v; want %d bytes", len(got), err, len(body))
	}
	if n := s.Accepted(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

func TestFakeTruncatedHeader(t *testing.T) {
	s := startFake(t, fakeConfig{handle: firstConnWrites("200 12")})
	c := s.client()
	defer c.Close()
	ctx := testCtx(t, 10*time.Second)
	_, err := c.Run(ctx, "ping")
	if !errors.Is(err, errProtocol) || !strings.Contains(err.Error(), "truncated header") {
		t.Fatalf("Run = %v, want a truncated header error", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("next command: %v", err)
	}
	if n := s.Accepted(); n != 2 {
		t.Fatalf("%d connections, want 2 (re-dialled)", n)
	}
}

func TestFakeDropMidBody(t *testing.T) {
	s := startFake(t, fakeConfig{handle: firstConnWrites("200 100     \n0123456789")})
	c := s.client()
	defer c.Close()
	ctx := testCtx(t, 10*time.Second)
	if _, err := c.Run(ctx, "vcl.use", "a"); err == nil || !strings.Contains(err.Error(), "10 of 100 body bytes") {
		t.Fatalf("Run = %v, want an error about the cut body", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("next command: %v", err)
	}
	if n := s.Accepted(); n != 2 {
		t.Fatalf("%d connections, want 2 (re-dialled)", n)
	}
}

func TestFakeStall(t *testing.T) {
	stall := func(_ int, conn net.Conn, rd *bufio.Reader) {
		rd.ReadString('\n')
		io.Copy(io.Discard, rd) // never answer
	}

	tests := []struct {
		name    string
		greet   bool
		timeout time.Duration // Client.Timeout
		ctx     func() (context.Context, context.CancelFunc)
		want    error
	}{
		{"context deadline", true, 0, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 150*time.Millisecond)
		}, context.DeadlineExceeded},
		{"client timeout", true, 150 * time.Millisecond, func() (context.Context, context.CancelFunc) {
			return context.Background(), func() {}
		}, context.DeadlineExceeded},
		{"cancel", true, 0, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(150*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
		{"no greeting", false, 0, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 150*time.Millisecond)
		}, context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s *fakeServer
			if tc.greet {
				s = startFake(t, fakeConfig{handle: stall})
			} else {
				s = startSilent(t)
			}
			c := s.client()
			defer c.Close()
			if tc.timeout > 0 {
				c.Timeout = tc.timeout
			}
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			_, err := c.Run(ctx, "vcl.use", "x")
			elapsed := time.Since(start)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Run = %v, want %v", err, tc.want)
			}
			if elapsed > time.Second {
				t.Fatalf("Run returned after %v, want about 150ms", elapsed)
			}
			if !strings.Contains(err.Error(), "vcl.use on "+s.Addr) {
				t.Fatalf("error %q does not name the command and address", err)
			}
		})
	}
}

// startSilent accepts connections and never writes a byte.
func startSilent(tb testing.TB) *fakeServer {
	tb.Helper()
	return &fakeServer{varnishtest.StartFakeAdmin(tb, func(_ int, conn net.Conn) { io.Copy(io.Discard, conn) })}
}

func TestFakeStaleConnectionIsRedialled(t *testing.T) {
	// The first connection answers one command, then the server goes away
	// (varnishd restarted while the client was idle).
	s := startFake(t, fakeConfig{handle: firstConnWrites(pong(""))})
	c := s.client()
	defer c.Close()
	ctx := testCtx(t, 10*time.Second)
	for i := 0; i < 3; i++ {
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.Accepted(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

func TestFakeCLIErrorKeepsConnection(t *testing.T) {
	s := startFake(t, fakeConfig{handle: serveEach(func(line string) string {
		if strings.HasPrefix(line, "vcl.use") {
			return frame(106, "No VCL named nope known\n")
		}
		if strings.HasPrefix(line, "quit") {
			return frame(500, "Closing CLI connection")
		}
		return pong(line)
	})})
	c := s.client()
	defer c.Close()
	ctx := testCtx(t, 10*time.Second)
	err := c.VCLUse(ctx, "nope")
	var cliErr *CLIError
	if !errors.As(err, &cliErr) || cliErr.Status != 106 || cliErr.Text != "No VCL named nope known\n" {
		t.Fatalf("VCLUse = %v, want CLIError 106", err)
	}
	if want := "varnish cli status 106: No VCL named nope known"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q lacks %q", err, want)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.Accepted(); n != 1 {
		t.Fatalf("%d connections, want 1: a CLI error must not drop the session", n)
	}
	// 500 means the server closes the session: the client dials again.
	if _, err := c.Run(ctx, "quit"); !errors.As(err, &cliErr) || cliErr.Status != 500 {
		t.Fatalf("quit = %v, want CLIError 500", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.Accepted(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

func TestFakeAuth(t *testing.T) {
	secret := []byte("fake secret\n")
	for _, authFail := range []int{500, 107} {
		t.Run(fmt.Sprintf("wrong secret answered %d", authFail), func(t *testing.T) {
			s := startFake(t, fakeConfig{secret: secret, authFail: authFail, handle: serveEach(pong)})
			ctx := testCtx(t, 10*time.Second)
			good := New(s.Addr, secret)
			defer good.Close()
			if err := good.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			bad := New(s.Addr, []byte("fake secret"))
			defer bad.Close()
			err := bad.Ping(ctx)
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("Ping with a wrong secret = %v, want ErrAuth", err)
			}
			if strings.Contains(err.Error(), "fake secret") {
				t.Fatalf("error %q contains the secret", err)
			}
		})
	}
}

func TestFakeConcurrent(t *testing.T) {
	s := startFake(t, fakeConfig{handle: serveEach(func(line string) string {
		return frame(200, strings.TrimSuffix(line, "\n"))
	})})
	c := s.client()
	defer c.Close()
	ctx := testCtx(t, 30*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				arg := fmt.Sprintf("g%d-%d", g, i)
				got, err := c.Run(ctx, "echo", arg)
				if err != nil || got != "echo "+arg {
					errs <- fmt.Errorf("Run(echo %s) = %q, %v", arg, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := s.Accepted(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

func TestFakeClose(t *testing.T) {
	s := startFake(t, fakeConfig{handle: func(_ int, conn net.Conn, rd *bufio.Reader) {
		io.Copy(io.Discard, rd)
	}})
	c := s.client()
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(testCtx(t, 30*time.Second), "ping")
		done <- err
	}()
	for s.Accepted() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("stalled command succeeded after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not interrupt the command in flight")
	}
	if err := c.Ping(testCtx(t, time.Second)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Ping after Close = %v, want net.ErrClosed", err)
	}
}

func TestFakeDialFailure(t *testing.T) {
	s := startSilent(t)
	addr := s.Addr
	s.Close()
	c := New(addr, []byte("secret\n"))
	defer c.Close()
	err := c.Ping(testCtx(t, 5*time.Second))
	if err == nil || !strings.Contains(err.Error(), "ping on "+addr+": connect") {
		t.Fatalf("Ping = %v, want a connect error naming %s", err, addr)
	}
}
