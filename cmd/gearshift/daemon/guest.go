package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/guest"
	"github.com/gearshift/gearshift/controller/logging"
)

// newGuests returns the guest-page server of cfg (profiles.guest_pages:
// auto), nil when off. serveGuests makes it answer.
func newGuests(cfg *config.Config, log *zap.Logger) *guest.Server {
	if !cfg.Profiles.Guests() {
		return nil
	}
	return guest.New(guest.Options{
		Backend: net.JoinHostPort(cfg.Backend.Host, strconv.Itoa(cfg.Backend.Port)),
		Timeout: time.Duration(cfg.Backend.FirstByteTimeout),
		Logger:  log,
	})
}

// Backoff of a guest listener that cannot listen: heavy fetches from the
// backend meanwhile, as with guest_pages off.
const (
	guestRetryFirst = time.Second
	guestRetryMax   = time.Minute
)

// serveGuests answers heavy's asks at profiles.guest_listen until ctx
// ends. An address it cannot listen on (taken, not yet up) is tried again
// with backoff, and said so in the log; the daemon runs on meanwhile.
func serveGuests(ctx context.Context, g *guest.Server, addr string, log *zap.Logger) {
	if g == nil {
		return
	}
	srv := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 5 * time.Second,
		// A check is two backend fetches.
		WriteTimeout: 2*time.Minute + 5*time.Second,
		ErrorLog:     zap.NewStdLog(log),
	}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	wait := guestRetryFirst
	for ctx.Err() == nil {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			log.Warn("guest pages: cannot listen, heavy fetches them from the backend meanwhile",
				zap.String(logging.FieldListen, addr), zap.Error(err), zap.Duration("retry_in", wait))
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, guestRetryMax)
			continue
		}
		log.Info("serving guest pages to heavy", zap.String(logging.FieldListen, ln.Addr().String()))
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("guest listener failed", zap.Error(err))
			continue
		}
		return
	}
}
