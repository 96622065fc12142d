package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/guest"
	"github.com/gearshift/gearshift/controller/logging"
)

// guests is the daemon's side of heavy's guest pages
// (profiles.guest_pages: auto): the guest.Server, the secret of this
// start its answers carry, and the listener at profiles.guest_listen.
// Heavy asks the daemon only while the daemon holds that listener: the
// profiles carry the secret (Secret) only then, and without it heavy is
// rendered without asking anyone, so a process that took the address
// first is never asked. A nil *guests is guest pages off.
type guests struct {
	srv    *guest.Server
	secret string
	addr   string
	log    *zap.Logger

	mu  sync.Mutex
	ln  net.Listener // nil while the daemon does not listen
	err string       // why it does not listen; "" when it does
}

// newGuests returns the guest pages of cfg, listening already when the
// address is free; nil when guest_pages is off. serve answers the asks.
func newGuests(cfg *config.Config, log *zap.Logger) (*guests, error) {
	if !cfg.Profiles.Guests() {
		return nil, nil
	}
	secret, err := guest.NewSecret()
	if err != nil {
		return nil, fmt.Errorf("guest pages: %w", err)
	}
	g := &guests{
		srv: guest.New(guest.Options{
			Backend: net.JoinHostPort(cfg.Backend.Host, strconv.Itoa(cfg.Backend.Port)),
			Timeout: time.Duration(cfg.Backend.FirstByteTimeout),
			Logger:  log,
			Secret:  secret,
		}),
		secret: secret,
		addr:   cfg.Profiles.GuestListen,
		log:    log,
	}
	g.listen()
	return g, nil
}

// Server is the guest.Server, nil when guest pages are off.
func (g *guests) Server() *guest.Server {
	if g == nil {
		return nil
	}
	return g.srv
}

// Secret is what heavy's profile must check guest answers for: the
// secret while the daemon listens, "" otherwise (heavy asks nobody).
func (g *guests) Secret() string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln == nil {
		return ""
	}
	return g.secret
}

// SecretFor is Secret for a heavy rendered from cfg: "" when cfg's
// guest_listen is not the address the daemon holds (a reload changed it;
// a restart applies it), so that heavy never asks another's listener.
func (g *guests) SecretFor(cfg *config.Config) string {
	if g == nil || cfg.Profiles.GuestListen != g.addr {
		return ""
	}
	return g.Secret()
}

// Error says why heavy does not ask the daemon: "" when it listens, or
// when guest pages are off.
func (g *guests) Error() string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// listen takes the address, and tells whether the daemon listens now.
func (g *guests) listen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		return true
	}
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		g.err = fmt.Sprintf("cannot listen at profiles.guest_listen %s (%v): heavy fetches guest pages from the backend until it can", g.addr, errors.Unwrap(err))
		return false
	}
	g.ln, g.err = ln, ""
	return true
}

// lost records that the listener failed.
func (g *guests) lost(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ln = nil
	g.err = fmt.Sprintf("the listener at profiles.guest_listen %s failed (%v): heavy fetches guest pages from the backend until it listens again", g.addr, err)
}

// Backoff of a guest listener that cannot listen: heavy fetches from the
// backend meanwhile, as with guest_pages off.
const (
	guestRetryFirst = time.Second
	guestRetryMax   = time.Minute
)

// serve answers heavy's asks until ctx ends. An address it cannot listen
// at (taken, not yet up) is tried again with backoff, and said so in the
// log; once it listens, rebuild renders heavy to ask it again. The daemon
// runs on meanwhile.
func (g *guests) serve(ctx context.Context, rebuild func()) {
	if g == nil {
		return
	}
	srv := &http.Server{
		Handler:           g.srv,
		ReadHeaderTimeout: 5 * time.Second,
		// A check is two backend fetches.
		WriteTimeout: 2*time.Minute + 5*time.Second,
		ErrorLog:     zap.NewStdLog(g.log),
	}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	wait := guestRetryFirst
	for ctx.Err() == nil {
		wasDown := g.Secret() == ""
		if !g.listen() {
			g.log.Warn("guest pages: cannot listen, heavy fetches them from the backend meanwhile",
				zap.String(logging.FieldListen, g.addr), zap.String(logging.FieldError, g.Error()), zap.Duration("retry_in", wait))
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, guestRetryMax)
			continue
		}
		wait = guestRetryFirst
		g.mu.Lock()
		ln := g.ln
		g.mu.Unlock()
		g.log.Info("serving guest pages to heavy", zap.String(logging.FieldListen, ln.Addr().String()))
		if wasDown {
			rebuild()
		}
		err := srv.Serve(ln)
		if err == nil || errors.Is(err, http.ErrServerClosed) || ctx.Err() != nil {
			return
		}
		g.log.Error("guest listener failed", zap.Error(err))
		g.lost(err)
		rebuild()
	}
}
