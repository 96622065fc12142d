package profiles

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// CookieGlobRegex turns a session cookie name glob into a regex (PCRE, as
// VCL uses) that matches exactly the cookie names the glob matches, anchored
// by the caller between a cookie separator and "=".
//
// Glob syntax, one token per line:
//
//	"*"         any run of name characters, possibly empty
//	"?"         one name character
//	"[a-f0-9]"  one character from the set; "[!...]" or "[^...]" negates it
//	"{n}"       after "?" or a set: exactly n of them (1 to 255)
//	"\c"        the character c itself ("\*" is a literal star)
//
// Every other character is itself. Joomla's session cookie, 32 lower-case hex
// digits, is "[0-9a-f]{32}". Cookie names never contain white space, ';',
// '=', ',' or '"', so those are refused, and no wildcard matches them.
func CookieGlobRegex(glob string) (string, error) {
	if glob == "" {
		return "", errors.New("empty cookie name")
	}
	const nameChar = `[^\s;=]`
	var b strings.Builder
	repeatable := false // the previous atom was ? or a set
	for i := 0; i < len(glob); i++ {
		c := glob[i]
		switch {
		case c == '*':
			b.WriteString(nameChar + "*")
			repeatable = false
		case c == '?':
			b.WriteString(nameChar)
			repeatable = true
		case c == '[':
			end := strings.IndexByte(glob[i+1:], ']')
			if end < 0 {
				return "", fmt.Errorf("%q: '[' at %d has no closing ']'", glob, i)
			}
			set, err := globSet(glob[i+1 : i+1+end])
			if err != nil {
				return "", fmt.Errorf("%q: %w", glob, err)
			}
			b.WriteString(set)
			i += end + 1
			repeatable = true
		case c == '{':
			end := strings.IndexByte(glob[i+1:], '}')
			if !repeatable || end < 0 {
				return "", fmt.Errorf("%q: '{n}' at %d must follow '?' or a [...] set and end with '}'", glob, i)
			}
			n, err := strconv.Atoi(glob[i+1 : i+1+end])
			if err != nil || n < 1 || n > 255 {
				return "", fmt.Errorf("%q: '{%s}' is not a count from 1 to 255", glob, glob[i+1:i+1+end])
			}
			fmt.Fprintf(&b, "{%d}", n)
			i += end + 1
			repeatable = false
		case c == '\\':
			if i+1 == len(glob) {
				return "", fmt.Errorf("%q: trailing '\\'", glob)
			}
			i++
			if err := nameByte(glob, glob[i]); err != nil {
				return "", err
			}
			b.WriteString(literal(glob[i]))
			repeatable = false
		case c == ']' || c == '}':
			return "", fmt.Errorf("%q: unmatched '%c' at %d (write \\%c for the character)", glob, c, i, c)
		default:
			if err := nameByte(glob, c); err != nil {
				return "", err
			}
			b.WriteString(literal(c))
			repeatable = false
		}
	}
	return b.String(), nil
}

// globSet turns the inside of a [...] set into a regex class.
func globSet(s string) (string, error) {
	neg := false
	if strings.HasPrefix(s, "!") || strings.HasPrefix(s, "^") {
		neg, s = true, s[1:]
	}
	if s == "" {
		return "", errors.New("empty [] set")
	}
	var b strings.Builder
	b.WriteByte('[')
	if neg {
		b.WriteByte('^')
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' && i > 0 && i < len(s)-1 {
			if s[i-1] > s[i+1] {
				return "", fmt.Errorf("range %c-%c is backwards", s[i-1], s[i+1])
			}
			b.WriteByte('-')
			continue
		}
		if err := nameByte("["+s+"]", c); err != nil {
			return "", err
		}
		b.WriteString(literal(c))
	}
	if neg {
		// A negated set still only matches name characters.
		b.WriteString(`\s;=`)
	}
	b.WriteByte(']')
	return b.String(), nil
}

// nameByte refuses what cannot be in a cookie name.
func nameByte(glob string, c byte) error {
	if c <= ' ' || c >= 0x7f || strings.IndexByte(`;=,"`, c) >= 0 {
		return fmt.Errorf("%q: %q cannot be part of a cookie name", glob, rune(c))
	}
	return nil
}

// literal writes c so that a regex (in or out of a class) matches it only.
func literal(c byte) string {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' {
		return string(c)
	}
	// PCRE: a backslash before a non-alphanumeric is always that character.
	return `\` + string(c)
}
