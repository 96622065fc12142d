package capbuf

import (
	"errors"
	"testing"
)

func TestBuffer(t *testing.T) {
	tests := []struct {
		name         string
		max          int
		withOverflow bool
		writes       []string
		want         string
		dropped      int
		overflowed   bool
		lastErr      error
	}{
		{name: "within the cap", max: 8, writes: []string{"abc", "def"}, want: "abcdef"},
		{name: "exactly the cap", max: 6, writes: []string{"abc", "def"}, want: "abcdef"},
		{name: "past the cap, dropped quietly", max: 4, writes: []string{"abc", "def", "gh"}, want: "abcd", dropped: 4},
		{name: "past the cap, overflow stops the writer", max: 4, withOverflow: true, writes: []string{"abc", "def", "gh"},
			want: "abcd", dropped: 4, overflowed: true, lastErr: ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			b := &Buffer{Max: tc.max}
			if tc.withOverflow {
				b.Overflow = func() { calls++ }
			}
			var err error
			for _, w := range tc.writes {
				var n int
				n, err = b.Write([]byte(w))
				if err == nil && n != len(w) {
					t.Errorf("Write(%q) = %d, nil", w, n)
				}
			}
			if b.String() != tc.want || b.Dropped() != tc.dropped || b.Overflowed() != tc.overflowed || !errors.Is(err, tc.lastErr) {
				t.Errorf("kept %q, dropped %d, overflowed %v, last error %v; want %q, %d, %v, %v",
					b.String(), b.Dropped(), b.Overflowed(), err, tc.want, tc.dropped, tc.overflowed, tc.lastErr)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.overflowed]; calls != want {
				t.Errorf("overflow called %d times, want %d", calls, want)
			}
		})
	}
}
