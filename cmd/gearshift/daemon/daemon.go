// Package daemon is gearshift's process wiring: signals, the pid file, the
// log file, the control socket and metrics listeners, and systemd's notify
// protocol around the controller's loop.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller"
	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/pidfile"
	"github.com/gearshift/gearshift/controller/sdnotify"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/top"
	"github.com/gearshift/gearshift/controller/varnish"
)

// Options are what Run needs besides the config.
type Options struct {
	LoadConfig func() (*config.Config, error) // reads the config again, for a reload; required
	Console    io.Writer                      // a human-formatted copy of the log (a terminal, the journal); nil for none
	// Detached: the daemon was detached by `gearshift start`, whose
	// NOTIFY_SOCKET wants READY=1 and nothing after (start is gone then).
	Detached bool
}

// ErrConfig marks an error of Run that the config caused (a log
// level, profiles the daemon cannot use), as opposed to a runtime failure.
var ErrConfig = errors.New("unusable config")

type configError struct{ error }

func (e configError) Is(target error) bool { return target == ErrConfig }
func (e configError) Unwrap() error        { return e.error }

// Run runs the daemon with cfg until SIGTERM or SIGINT: the log
// file, the pid file, the controller's loop, the control socket, metrics
// and systemd's notify protocol. It returns nil after a clean stop, an
// error matching ErrConfig for a config it cannot use, and another error
// when it cannot start (log file, pid file, socket, another daemon
// running) or its control socket fails. It removes the pid file and the
// control socket at exit. SIGHUP reloads through opts.LoadConfig; SIGUSR1
// reopens the log file.
func Run(cfg *config.Config, opts Options) error {
	// Catch the signals before anyone can know the pid (pid file, socket):
	// a SIGHUP or SIGUSR1 sent during start would otherwise kill the
	// daemon. They are handled once it runs.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	level, err := logging.ParseLevel(cfg.Log.Level)
	if err != nil {
		return configError{fmt.Errorf("log.level: %w", err)}
	}
	logFile, err := logging.OpenFile(cfg.Log.File)
	if err != nil {
		return fmt.Errorf("log.file %s: %w", cfg.Log.File, err)
	}
	defer logFile.Close()
	atom := zap.NewAtomicLevelAt(level)
	log := logging.New(logFile, opts.Console, atom)
	defer log.Sync()
	// Why the daemon could not start goes to the log file too: a detached
	// daemon's stderr is seen by no one. (On stderr Main prints it.)
	fileLog := logging.New(logFile, nil, atom)
	cannotStart := func(err error) error {
		fileLog.Error("cannot start", zap.Error(err))
		return err
	}

	pid, err := pidfile.Write(cfg.PIDFile)
	if err != nil {
		return cannotStart(err)
	}
	defer pid.Remove()

	notifier := sdnotify.New(opts.Detached)
	notify := func(state ...string) {
		if _, err := notifier.Notify(state...); err != nil {
			log.Warn("notify systemd", zap.Error(err))
		}
	}
	watchdog, err := sdnotify.WatchdogInterval()
	if err != nil {
		log.Warn("systemd watchdog: not sending keep-alives", zap.Error(err))
	}

	sens, err := sensor.NewHost(cfg.SensorConfig())
	if err != nil {
		return cannotStart(configError{err})
	}
	cpus, cpusFrom := sens.CPUs()
	log.Info("sensors", zap.Int(logging.FieldCPUs, cpus), zap.String(logging.FieldCPUsFrom, cpusFrom),
		zap.Strings(logging.FieldSources, sens.Sources()))

	metrics := controller.NewMetrics()
	running := cfg
	guests, err := newGuests(cfg, log)
	if err != nil {
		return cannotStart(err)
	}
	// Heavy asks the daemon for guest pages only while it listens: the
	// profiles carry the secret of this start then, and only then.
	cfg.GuestSecret = guests.SecretFor(cfg)
	loadConfig := func() (*config.Config, error) {
		next, err := opts.LoadConfig()
		if next != nil {
			next.GuestSecret = guests.SecretFor(next)
		}
		return next, err
	}
	refusals, refusalsFrom := newRefusals(cfg)
	doors := &top.Doors{}
	ctrl, err := controller.New(controller.Options{
		Guest:            guests.Server(),
		GuestError:       guests.Error,
		Refusals:         refusals,
		Doors:            doors,
		Metrics:          metrics,
		Config:           cfg,
		Sensor:           sens,
		Dial:             varnish.DialAdmin(time.Duration(cfg.Varnish.Timeout)),
		Build:            controller.BuildProfiles,
		LoadConfig:       loadConfig,
		Logger:           log,
		Notify:           notify,
		WatchdogInterval: watchdog,
		LogHealth:        logFile.Health,
		OnChange: func(s api.Status) {
			notify("STATUS=gear " + s.State)
		},
		OnReload: func(next *config.Config) {
			if l, err := logging.ParseLevel(next.Log.Level); err == nil {
				atom.SetLevel(l)
			}
			logConfigWarnings(log, next)
			for _, key := range config.RestartKeys(running, next) {
				log.Warn("config change needs a restart to apply", zap.String(logging.FieldKey, key))
			}
		},
	})
	if err != nil {
		return cannotStart(configError{err})
	}

	access, err := api.NewAccess(cfg.Control.AdminGroup)
	if err != nil {
		return cannotStart(configError{err})
	}
	ln, err := api.ListenSocket(cfg.Control.Socket, cfg.Control.Group)
	if err != nil {
		return cannotStart(err)
	}

	var metricsLn net.Listener
	if cfg.MetricsListen != "" {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			ln.Close()
			return cannotStart(fmt.Errorf("metrics_listen %s: %w", cfg.MetricsListen, err))
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- api.Serve(ctx, ln, ctrl, access) }()
	go followRefusals(ctx, refusals, refusalsFrom, log)
	go followDoors(ctx, doors, doorsName(cfg), log)
	if metricsLn != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", metrics.Handler())
		mux.Handle("/", api.NewPage(api.PageOptions{
			Status:     ctrl.Status,
			Rules:      ctrl.Rules,
			HistoryDir: cfg.History.Dir, // a restart applies a new one
		}))
		go func() {
			if err := api.ServeMetrics(ctx, metricsLn, mux); err != nil {
				log.Error("metrics listener failed", zap.Error(err))
			}
		}()
		log.Info("serving metrics and the status page", zap.String(logging.FieldListen, metricsLn.Addr().String()))
	}
	stopped := make(chan error, 1)
	go func() { stopped <- ctrl.Run(ctx) }()

	log.Info("started", zap.String(logging.FieldVersion, controller.Version), zap.Int(logging.FieldPID, os.Getpid()),
		zap.String(logging.FieldSocket, cfg.Control.Socket), zap.Int(logging.FieldTargets, len(cfg.Varnish.Targets)),
		zap.Duration(logging.FieldPollInterval, time.Duration(cfg.PollInterval)))
	controller.WarnNarrowSessions(log, cfg)
	logConfigWarnings(log, cfg)
	// READY=1 comes from the loop once its first poll has finished.

	requestReload, reloadsDone := coalesce(ctx, func() {
		ctrl.Reload(ctx) // the answer is in the loop's log and status
	})
	go guests.serve(ctx, func() {
		log.Info(logging.MsgReloading, zap.String(logging.FieldReason, "the guest listener changed"))
		requestReload()
	})

	// A reload that runs when the daemon stops ends before Run returns:
	// nothing of the daemon outlives it.
	defer func() { cancel(); <-reloadsDone }()
	return supervise(ctx, cancel, sigs, stopped, served, daemonHandlers{
		reload: func() {
			log.Info(logging.MsgReloading, zap.String(logging.FieldSignal, "SIGHUP"))
			requestReload()
		},
		reopen: func() {
			if err := logFile.Reopen(); err != nil {
				log.Error("reopen log file", zap.Error(err))
			} else {
				log.Info("log file reopened")
			}
		},
		stop: func(sig os.Signal) {
			log.Info("stopping", zap.String(logging.FieldSignal, sig.String()))
			notify("STOPPING=1")
		},
		socketFailed: func(err error) error {
			log.Error("control socket failed", zap.Error(err))
			return fmt.Errorf("control socket %s failed: %v", cfg.Control.Socket, err)
		},
	})
}

// coalesce runs work in a goroutine of its own, one run at a time, each
// time the function it returns is called, until ctx is done. A call while
// a run waits to start adds nothing (the waiting run comes after it), so a
// storm of calls costs one or two runs, not a goroutine each: a reload
// reads the config off the loop, which polls on, and a storm of SIGHUPs
// reads it once or twice. done is closed once ctx is done and a run under
// way has finished.
func coalesce(ctx context.Context, work func()) (request func(), done <-chan struct{}) {
	pending := make(chan struct{}, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-ctx.Done():
				return
			case <-pending:
				work()
			}
		}
	}()
	return func() {
		select {
		case pending <- struct{}{}:
		default: // one is waiting already
		}
	}, finished
}

// logConfigWarnings logs what Config.Warnings finds risky in cfg; the
// daemon runs with it all the same.
func logConfigWarnings(log *zap.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		log.Warn("config warning", zap.String(logging.FieldKey, w.Path), zap.String(logging.FieldWarning, w.Msg))
	}
}

// shownRules are the thresholds of cfg and its signals, as the status page
// shows them.
// daemonHandlers are supervise's reactions to signals and failures.
type daemonHandlers struct {
	reload       func()                // SIGHUP
	reopen       func()                // SIGUSR1
	stop         func(sig os.Signal)   // SIGTERM, SIGINT: before the loop is cancelled
	socketFailed func(err error) error // the control socket broke while running; returns the daemon's error
	wake         func()                // called on every wake-up of the loop; tests count them
}

// supervise reacts to signals until the loop (stopped) and the control
// socket (served) have both returned, and returns the daemon's error. A
// stop cancels ctx; a control socket that fails while running stops the
// daemon too.
func supervise(ctx context.Context, cancel context.CancelFunc, sigs <-chan os.Signal, stopped, served <-chan error, h daemonHandlers) error {
	var servedErr error
	servedDone := false
	for {
		if h.wake != nil {
			h.wake()
		}
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGHUP:
				h.reload()
			case syscall.SIGUSR1:
				h.reopen()
			default:
				h.stop(sig)
				cancel()
			}
		case err := <-stopped:
			cancel()
			if !servedDone {
				servedErr = <-served
			}
			if err == nil {
				err = servedErr
			}
			return err
		case err := <-served:
			// Kept, not put back on the channel: that would select it again
			// and again until the loop returns.
			servedErr, servedDone, served = err, true, nil // a nil channel is never ready
			if ctx.Err() != nil {
				continue // a clean stop: the loop is finishing too
			}
			// The socket broke: keep no daemon nobody can talk to.
			cancel()
			<-stopped
			return h.socketFailed(err)
		}
	}
}
