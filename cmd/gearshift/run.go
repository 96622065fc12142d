package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/sdnotify"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/profiles"
)

func newRunCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the daemon in the foreground (systemd Type=notify); logs also go to stderr",
		Long: `Run the daemon in the foreground: poll the server's vitals, choose a gear,
keep every Varnish target on that gear's VCL, and answer on the control socket.

Signals: SIGHUP reloads the config and profiles (the old ones stay on error),
SIGUSR1 reopens the log file (logrotate), SIGTERM and SIGINT stop cleanly
(applying on_exit). Under systemd (NOTIFY_SOCKET set) it reports READY=1 and
STATUS=gear <state>.`,
		Args: cobra.NoArgs,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			cfg, err := a.loadConfig()
			if err != nil {
				return exitUsage, err
			}
			return runDaemon(a, cfg, true)
		}),
	}
}

// runDaemon runs the daemon with cfg until SIGTERM or SIGINT and returns
// the exit code: 0 after a clean stop, 2 for a config the daemon cannot use
// (log level, profiles), 1 when it cannot start (log file, pid file, socket,
// another daemon running). It writes the pid file and removes it, and the
// control socket, at exit. logToStderr copies the log to a.stderr in a
// human format (`run`; a detached daemon passes false). Reloads re-read the
// config through a.loadConfig.
func runDaemon(a *app, cfg *profiles.Config, logToStderr bool) (int, error) {
	// Catch the signals before anyone can know the pid (pid file, socket):
	// a SIGHUP or SIGUSR1 sent during start would otherwise kill the
	// daemon. They are handled once it runs.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	level, err := logging.ParseLevel(cfg.Log.Level)
	if err != nil {
		return exitUsage, fmt.Errorf("log.level: %w", err)
	}
	logFile, err := logging.OpenFile(cfg.Log.File)
	if err != nil {
		return exitFailure, fmt.Errorf("log.file %s: %w", cfg.Log.File, err)
	}
	defer logFile.Close()
	atom := zap.NewAtomicLevelAt(level)
	var console io.Writer
	if logToStderr {
		console = a.stderr
	}
	log := logging.New(logFile, console, atom)
	defer log.Sync()
	// Why the daemon could not start goes to the log file too: a detached
	// daemon's stderr is seen by no one. (On stderr Main prints it.)
	fileLog := logging.New(logFile, nil, atom)
	cannotStart := func(code int, err error) (int, error) {
		fileLog.Error("cannot start", zap.Error(err))
		return code, err
	}

	if err := writePIDFile(cfg.PIDFile); err != nil {
		return cannotStart(exitFailure, err)
	}
	defer removePIDFile(cfg.PIDFile)

	running := cfg
	ctrl, err := controller.New(controller.Options{
		Config:     cfg,
		Sensor:     sensor.NewProc(cfg.CPUs),
		Dial:       controller.DialAdmin(time.Duration(cfg.Varnish.Timeout)),
		Build:      controller.BuildProfiles,
		LoadConfig: a.loadConfig,
		Logger:     log,
		OnChange: func(s controller.Status) {
			if _, err := sdnotify.Notify("STATUS=gear " + s.State); err != nil {
				log.Warn("notify systemd", zap.Error(err))
			}
		},
		OnReload: func(next *profiles.Config) {
			if l, err := logging.ParseLevel(next.Log.Level); err == nil {
				atom.SetLevel(l)
			}
			// These are bound at start; a restart applies them.
			for key, change := range map[string]bool{
				"control.socket": next.Control.Socket != running.Control.Socket,
				"control.group":  next.Control.Group != running.Control.Group,
				"log.file":       next.Log.File != running.Log.File,
				"pid_file":       next.PIDFile != running.PIDFile,
				"cpus":           next.CPUs != running.CPUs,
				"metrics_listen": next.MetricsListen != running.MetricsListen,
			} {
				if change {
					log.Warn("config change needs a restart to apply", zap.String("key", key))
				}
			}
		},
	})
	if err != nil {
		return cannotStart(exitUsage, err)
	}

	ln, err := controller.ListenSocket(cfg.Control.Socket, cfg.Control.Group)
	if err != nil {
		return cannotStart(exitFailure, err)
	}

	var metricsLn net.Listener
	if cfg.MetricsListen != "" {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			ln.Close()
			return cannotStart(exitFailure, fmt.Errorf("metrics_listen %s: %w", cfg.MetricsListen, err))
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- controller.Serve(ctx, ln, ctrl) }()
	if metricsLn != nil {
		go func() {
			if err := controller.ServeMetrics(ctx, metricsLn, ctrl.Status); err != nil {
				log.Error("metrics listener failed", zap.Error(err))
			}
		}()
		log.Info("serving metrics", zap.String("listen", metricsLn.Addr().String()))
	}
	stopped := make(chan error, 1)
	go func() { stopped <- ctrl.Run(ctx) }()

	log.Info("started", zap.String("version", controller.Version), zap.Int("pid", os.Getpid()),
		zap.String("socket", cfg.Control.Socket), zap.Int("targets", len(cfg.Varnish.Targets)),
		zap.Duration("poll_interval", time.Duration(cfg.PollInterval)))
	if _, err := sdnotify.Notify("READY=1", "STATUS=gear "+ctrl.Status().State); err != nil {
		log.Warn("notify systemd", zap.Error(err))
	}

	for {
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGHUP:
				log.Info("reloading", zap.String("signal", "SIGHUP"))
				// The loop does the work; the answer is in its log and status.
				go ctrl.Reload(ctx)
			case syscall.SIGUSR1:
				if err := logFile.Reopen(); err != nil {
					log.Error("reopen log file", zap.Error(err))
				} else {
					log.Info("log file reopened")
				}
			default:
				log.Info("stopping", zap.String("signal", sig.String()))
				sdnotify.Notify("STOPPING=1")
				cancel()
			}
		case err := <-stopped:
			cancel()
			if serr := <-served; err == nil {
				err = serr
			}
			if err != nil {
				return exitFailure, err
			}
			return exitOK, nil
		case err := <-served:
			if ctx.Err() != nil {
				served <- err // a clean stop: the loop is finishing too
				continue
			}
			// The socket broke: keep no daemon nobody can talk to.
			log.Error("control socket failed", zap.Error(err))
			cancel()
			<-stopped
			return exitFailure, fmt.Errorf("control socket %s failed: %v", cfg.Control.Socket, err)
		}
	}
}

// writePIDFile writes this process's pid to path, creating its directory.
// It fails when the file names another live gearshift process.
func writePIDFile(path string) error {
	if path == "" {
		return nil
	}
	if pid, err := readPIDFile(path); err == nil && pid != os.Getpid() && isGearshift(pid) {
		return fmt.Errorf("gearshift is already running (pid %d, pid file %s)", pid, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create pid file directory: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write pid file: %w", err)
	}
	return nil
}

// removePIDFile removes path if it still holds this process's pid.
func removePIDFile(path string) {
	if pid, err := readPIDFile(path); err == nil && pid == os.Getpid() {
		os.Remove(path)
	}
}

func readPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s: no pid in it", path)
	}
	return pid, nil
}
