// Package frontdoor starts the TLS terminators a real host puts in front
// of Varnish (Debian's hitch, nginx, Apache mod_ssl), on loopback ports
// with a self-signed certificate, for the tests of the front door.
package frontdoor

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

// SelfSigned writes a self-signed certificate for localhost, 127.0.0.1
// and example.org with its key into dir: in one PEM file (hitch's) and
// apart (nginx's, Apache's). It returns the three paths.
func SelfSigned(tb testing.TB, dir string) (both, cert, key string) {
	tb.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost", "example.org"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		tb.Fatal(err)
	}
	c := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	k := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	both, cert, key = filepath.Join(dir, "both.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for f, text := range map[string]string{both: k + c, cert: c, key: k} {
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return both, cert, key
}

// StartTerminator runs a TLS terminator (args, its program first) until
// the test ends, in a process group of its own (Apache's workers go with
// it), its output kept for a failure, and returns once addr, its TLS
// listener, accepts a connection.
func StartTerminator(tb testing.TB, addr string, args ...string) {
	tb.Helper()
	startTerminator(tb, addr, args...)
}

// startTerminator is StartTerminator, returning the terminator's pid: its
// process group's.
func startTerminator(tb testing.TB, addr string, args ...string) int {
	tb.Helper()
	name := filepath.Base(args[0])
	cmd := exec.Command(args[0], args[1:]...)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	testenv.DiesWithTest(cmd)
	cmd.SysProcAttr.Setpgid = true
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			tb.Fatalf("%s exited at start:\n%s", name, out)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not listen on %s within 20s", name, addr)
		}
	}
}

// StartHitch runs Debian's hitch on a free loopback port, terminating TLS
// with a self-signed certificate and speaking PROXY v2 to backend (a
// varnishd -a NAME=ADDR,PROXY listener); it returns hitch's address.
func StartHitch(tb testing.TB, backend string) string {
	tb.Helper()
	return RunHitch(tb, backend).Addr
}

// Hitch is a running hitch: its TLS listener and the certificate it
// shows (SelfSigned's, for localhost, 127.0.0.1 and example.org).
type Hitch struct {
	Addr string // host:port
	Cert string // the certificate's PEM file, for a client to trust (Roots)
	// Pid is hitch's manager, the leader of a process group that holds
	// its workers too (their CPU time is the terminator's).
	Pid int
}

// RunHitch is StartHitch, also giving the certificate hitch shows. It
// runs one worker.
func RunHitch(tb testing.TB, backend string) Hitch {
	tb.Helper()
	return RunHitchWorkers(tb, backend, 1)
}

// RunHitchWorkers is RunHitch with workers worker processes (hitch's
// manual recommends one per CPU core, as a production host runs it).
func RunHitchWorkers(tb testing.TB, backend string, workers int) Hitch {
	tb.Helper()
	bin := testenv.Need(tb, "hitch", "hitch")
	dir := tb.TempDir()
	both, cert, _ := SelfSigned(tb, dir)
	addr := testenv.FreeAddr(tb)
	host, port, _ := net.SplitHostPort(addr)
	bhost, bport, _ := net.SplitHostPort(backend)
	conf := filepath.Join(dir, "hitch.conf")
	text := fmt.Sprintf("frontend = \"[%s]:%s\"\nbackend = \"[%s]:%s\"\npem-file = %q\nwrite-proxy-v2 = on\nworkers = %d\ndaemon = off\nuser = \"root\"\n",
		host, port, bhost, bport, both, max(1, workers))
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
	pid := startTerminator(tb, addr, bin, "--config="+conf)
	return Hitch{Addr: addr, Cert: cert, Pid: pid}
}

// Roots is a pool holding the certificates of the PEM file cert, for a
// TLS client that trusts SelfSigned's certificate and nothing else.
func Roots(tb testing.TB, cert string) *x509.CertPool {
	tb.Helper()
	raw, err := os.ReadFile(cert)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		tb.Fatalf("no certificate in %s", cert)
	}
	return pool
}
