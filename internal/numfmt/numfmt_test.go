package numfmt

import "testing"

func TestTrim(t *testing.T) {
	tests := []struct {
		v    float64
		prec int
		want string
	}{
		{1.5, 2, "1.5"},
		{2, 2, "2"},
		{0.125, 2, "0.12"},
		{10, 0, "10"},
		{-0.5, 1, "-0.5"},
		{3.14159, 3, "3.142"},
		{100.0, 1, "100"},
	}
	for _, tc := range tests {
		if got := Trim(tc.v, tc.prec); got != tc.want {
			t.Errorf("Trim(%v, %d) = %q, want %q", tc.v, tc.prec, got, tc.want)
		}
	}
}
