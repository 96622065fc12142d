package daemon

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// A stopping daemon waits for its loop without spinning: once the control
// socket has closed, nothing wakes the supervisor until the loop returns
// (it may take up to a compile's 30s).
func TestSuperviseIdlesWhileTheLoopStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	stopped := make(chan error)
	served := make(chan error, 1)
	wakes := make(chan struct{}, 1<<16)
	done := make(chan error, 1)
	go func() {
		done <- supervise(ctx, cancel, sigs, stopped, served, daemonHandlers{
			stop: func(os.Signal) {},
			wake: func() {
				select {
				case wakes <- struct{}{}:
				default:
				}
			},
		})
	}()
	<-wakes
	sigs <- syscall.SIGTERM
	<-wakes // handled the signal: ctx is cancelled
	served <- nil
	<-wakes // read the socket's clean end
	select {
	case <-wakes:
		t.Fatal("the supervisor woke again with nothing new to do: it spins while the loop stops")
	case <-time.After(200 * time.Millisecond):
	}
	stopped <- nil
	if err := <-done; err != nil {
		t.Errorf("supervise = %v after a clean stop", err)
	}
}

// A control socket that fails while running stops the daemon with its error.
func TestSuperviseStopsOnSocketFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	served := make(chan error, 1)
	broken := errors.New("accept: too many open files")
	served <- broken
	go func() {
		<-ctx.Done()
		stopped <- nil
	}()
	err := supervise(ctx, cancel, nil, stopped, served, daemonHandlers{
		socketFailed: func(err error) error { return err },
	})
	if !errors.Is(err, broken) {
		t.Errorf("supervise = %v, want %v", err, broken)
	}
}

// A storm of SIGHUPs while a reload runs costs one more reload, not one
// each: the one waiting reads the config as it is when it starts.
func TestReloadsCoalesce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started, release := make(chan struct{}, 100), make(chan struct{})
	request, _ := coalesce(ctx, func() {
		started <- struct{}{}
		<-release
	})
	request()
	<-started // the first runs and hangs
	for i := 0; i < 50; i++ {
		request()
	}
	close(release)
	<-started // the one that waited
	request()
	<-started // a later one runs again
	select {
	case <-started:
		t.Fatal("a storm of 50 requests during one run ran more than once after it")
	case <-time.After(100 * time.Millisecond):
	}
}

// A daemon that stops during a reload returns once that reload has
// finished: nothing of it runs on.
func TestReloadsDoneAtStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started, release := make(chan struct{}), make(chan struct{})
	request, done := coalesce(ctx, func() {
		close(started)
		<-release
	})
	request()
	<-started
	cancel()
	select {
	case <-done:
		t.Fatal("done before the reload under way finished")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-done
}
