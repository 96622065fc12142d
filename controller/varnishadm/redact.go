package varnishadm

import "strings"

// minRedact is the shortest run of the secret's bytes that Redact hides:
// shorter runs (a 4-character word) turn up in ordinary text by chance,
// and reveal too little of a secret to matter.
const minRedact = 8

// Redacted stands in for the secret's bytes in text Varnish sends back.
const Redacted = "[secret redacted]"

// Redact returns text with every run of at least minRedact bytes that also
// occurs in secret replaced by Redacted. Varnish quotes the source of a VCL
// that does not compile, and a VCL that includes the -S file quotes the
// secret, whole or cut into tokens; none of it may reach a log or status.
func Redact(text string, secret []byte) string {
	sec := string(secret)
	if len(sec) < minRedact || len(text) < minRedact {
		return text
	}
	var b strings.Builder
	last := 0 // text[last:i] is not yet copied
	for i := 0; i+minRedact <= len(text); {
		n := longestIn(text[i:], sec)
		if n < minRedact {
			i++
			continue
		}
		b.WriteString(text[last:i])
		b.WriteString(Redacted)
		i += n
		last = i
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// longestIn returns the length of the longest prefix of s that occurs in sec.
func longestIn(s, sec string) int {
	if !strings.Contains(sec, s[:minRedact]) {
		return 0
	}
	best := 0
	for j := 0; j < len(sec); j++ {
		n := 0
		for n < len(s) && j+n < len(sec) && s[n] == sec[j+n] {
			n++
		}
		best = max(best, n)
	}
	return best
}
