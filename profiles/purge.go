package profiles

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/gearshift/gearshift/controller/varnishadm"
)

// PurgeTokenHeader is the request header a PURGE or BAN over HTTP
// carries the purge token in (profiles.purge_token_file).
const PurgeTokenHeader = "X-Purge-Token"

// The purge token: long enough not to be guessed, and of characters a
// header and a VCL string hold as they are.
const (
	minPurgeToken = 16
	maxPurgeToken = 256
)

var purgeTokenRE = regexp.MustCompile(`^[A-Za-z0-9._~+/=-]+$`)

// ReadPurgeToken returns the trimmed content of the purge token file at
// path. Its errors never quote the file.
func ReadPurgeToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %v", path, unwrapPathError(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %v", path, unwrapPathError(err))
	}
	token := strings.TrimSpace(string(b))
	switch {
	case token == "":
		return "", fmt.Errorf("%s is empty: write a secret of %d characters or more into it (openssl rand -hex 24 > %s)", path, minPurgeToken, path)
	case len(token) < minPurgeToken:
		return "", fmt.Errorf("%s holds a token of %d characters: use %d or more (openssl rand -hex 24 > %s)", path, len(token), minPurgeToken, path)
	case len(token) > maxPurgeToken:
		return "", fmt.Errorf("%s holds more than %d characters: one token of letters and digits is wanted", path, maxPurgeToken)
	case !purgeTokenRE.MatchString(token):
		return "", fmt.Errorf("%s holds characters other than letters, digits and ._~+/=- (or more than one line): one token is wanted", path)
	}
	return token, nil
}

// RedactError returns err with the purge token p holds left out of
// Varnish's answer (a compiler's message quotes the line at fault).
func (p *Profile) RedactError(err error) error {
	err = varnishadm.RedactError(err, p.token, "<purge token>")
	for _, token := range strings.Split(p.siteTokens, "\n") {
		err = varnishadm.RedactError(err, token, "<purge token>")
	}
	return varnishadm.RedactError(err, p.guestSecret, "<guest secret>")
}

// guestSecretRE is what a guest secret may hold: it is written into
// heavy's VCL as a string.
var guestSecretRE = regexp.MustCompile(`^[A-Za-z0-9]{16,128}$`)
