package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	godaemon "github.com/sevlyar/go-daemon"
	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/pidfile"
	"github.com/gearshift/gearshift/controller/sdnotify"
)

func newStartCmd(a *app) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start the daemon in the background; exit 0 once its first poll has finished",
		Long: `Start the daemon detached from the terminal, with its pid file and log file
as the config says. start returns once the daemon is ready, as systemd
would see it (READY=1: the first poll has finished, every Varnish tried,
waiting 10s at most for a slow one), so a check right after start tells
the truth; or it fails with the reason (from the daemon's log when it
exited).
Under systemd use the unit (gearshift run) instead.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			return a.start(ctxOrBackground(cmd.Context()), wait)
		}),
	}
	cmd.Flags().DurationVar(&wait, "wait", defaultStartWait, "how long to wait for the daemon to be ready")
	return cmd
}

func (a *app) start(ctx context.Context, wait time.Duration) (int, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return exitUsage, err
	}
	if godaemon.WasReborn() {
		// The detached child: be the daemon.
		return runDaemon(a, cfg, false)
	}
	if os.Getenv("NOTIFY_SOCKET") != "" {
		return exitUsage, errors.New("start detaches from its supervisor: under systemd run `gearshift run` (Type=notify) instead")
	}
	if pid, err := pidfile.Running(cfg.PIDFile); err != nil {
		return exitFailure, err
	} else if pid > 0 {
		return exitFailure, fmt.Errorf("gearshift is already running (pid %d from %s); stop it first or use reload", pid, cfg.PIDFile)
	}
	ctxq, cancel := context.WithTimeout(ctx, time.Second)
	_, err = api.NewClient(cfg.Control.Socket).Status(ctxq)
	cancel()
	if err == nil {
		return exitFailure, fmt.Errorf("a gearshift daemon already answers on %s; stop it first", cfg.Control.Socket)
	}
	// The socket's directory first, and 0755 whatever the umask: when the
	// pid file or log shares it, creating it 0750 would lock
	// control.group out of the socket.
	if err := api.MkdirAllMode(filepath.Dir(cfg.Control.Socket), 0o755); err != nil {
		return exitFailure, fmt.Errorf("create %s: %w", filepath.Dir(cfg.Control.Socket), err)
	}
	for _, p := range []string{cfg.PIDFile, cfg.Log.File} {
		if p == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			return exitFailure, fmt.Errorf("create %s: %w", filepath.Dir(p), err)
		}
	}
	args := []string{os.Args[0], "start"}
	if a.configSet {
		abs, err := filepath.Abs(a.configPath)
		if err != nil {
			return exitUsage, err
		}
		args = append(args, "--config", abs)
	}
	// The daemon says it is ready as it does to systemd: READY=1 on a
	// notify socket, here one of start's own.
	ready, err := sdnotify.Listen()
	if err != nil {
		return exitFailure, err
	}
	defer ready.Close()
	dctx := &godaemon.Context{
		// The daemon itself writes and removes the pid file, as under
		// `gearshift run`; go-daemon only detaches.
		LogFileName: cfg.Log.File, // a panic's trace lands beside the log entries
		LogFilePerm: 0o640,
		WorkDir:     "/",
		Umask:       0o027,
		Args:        args,
		Env:         append(sdnotify.ChildEnv(os.Environ()), ready.Env()),
	}
	var logOffset int64
	if fi, err := os.Stat(cfg.Log.File); err == nil {
		logOffset = fi.Size()
	}
	child, err := dctx.Reborn()
	if err != nil {
		return exitFailure, fmt.Errorf("detach the daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() {
		st, err := child.Wait()
		if err == nil && !st.Success() {
			err = errors.New(st.String())
		}
		exited <- err
	}()
	if err := waitReady(ctx, ready, cfg.Control.Socket, wait, exited); err != nil {
		if last := logging.LastError(cfg.Log.File, logOffset); last != "" {
			err = fmt.Errorf("%w; its log says: %s", err, last)
		}
		return exitFailure, err
	}
	fmt.Fprintf(a.stdout, "gearshift started (pid %d), control socket %s\n", child.Pid, cfg.Control.Socket)
	return exitOK, nil
}

// waitReady waits for READY=1 on ready, then for the daemon to answer on
// socket; it fails when the process exits (a message on exited) or wait
// passes.
func waitReady(ctx context.Context, ready *sdnotify.Listener, socket string, wait time.Duration, exited <-chan error) error {
	deadline := time.Now().Add(wait)
	got := ready.Ready(deadline)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	select {
	case <-got:
	case err := <-exited:
		if err == nil {
			return errors.New("the daemon exited during start")
		}
		return fmt.Errorf("the daemon exited during start (%v)", err)
	case <-ctx.Done():
		return fmt.Errorf("the daemon was not ready within %s (its first poll did not finish)", wait)
	}
	return api.WaitAnswering(ctx, socket, time.Until(deadline), exited)
}
