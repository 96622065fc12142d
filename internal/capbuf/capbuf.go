// Package capbuf is a bounded buffer for a child process's output: it keeps
// the first Max bytes written to it and counts the rest.
package capbuf

import (
	"errors"
	"sync"
)

// ErrTooLarge is what Write returns once a buffer with an Overflow func has
// overflowed.
var ErrTooLarge = errors.New("output too large")

// Buffer keeps at most Max bytes. Past that, with an Overflow func, it calls
// it once (to stop the writer) and refuses further writes with ErrTooLarge;
// without one it drops the excess quietly, counting it. It is safe for
// concurrent use (a command's stdout and stderr may share one).
type Buffer struct {
	Max      int
	Overflow func()

	mu         sync.Mutex
	b          []byte
	dropped    int
	overflowed bool
}

func (c *Buffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.overflowed {
		c.dropped += len(p)
		c.mu.Unlock()
		return 0, ErrTooLarge
	}
	room := c.Max - len(c.b)
	if len(p) <= room {
		c.b = append(c.b, p...)
		c.mu.Unlock()
		return len(p), nil
	}
	room = max(room, 0)
	c.b = append(c.b, p[:room]...)
	c.dropped += len(p) - room
	overflow := c.Overflow
	if overflow == nil {
		c.mu.Unlock()
		return len(p), nil
	}
	c.overflowed = true
	c.mu.Unlock()
	overflow()
	return 0, ErrTooLarge
}

// Bytes returns what was kept.
func (c *Buffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b
}

// String returns what was kept, as it was written.
func (c *Buffer) String() string { return string(c.Bytes()) }

// Dropped is how many bytes written were not kept.
func (c *Buffer) Dropped() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// Overflowed tells whether the Overflow func was called.
func (c *Buffer) Overflowed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overflowed
}
