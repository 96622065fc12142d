package lampstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// LoadProfiles renders the three profiles of cfg and loads them into v as
// gs<suffix>-<gear> (gs-light, gs-moderate, gs-heavy for suffix "").
func LoadProfiles(tb testing.TB, v *varnishtest.Varnish, cfg *config.Config, suffix string) {
	tb.Helper()
	for _, s := range state.All {
		text, err := profiles.Render(cfg.Site(), s)
		if err != nil {
			tb.Fatal(err)
		}
		file := filepath.Join(v.Dir, "gs"+suffix+"-"+s.String()+".vcl")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
		if out, err := v.Adm("vcl.load", "gs"+suffix+"-"+s.String(), file); err != nil {
			tb.Fatalf("vcl.load %s: %v\n%s", s, err, out)
		}
	}
}

// Use makes the loaded VCL name the active one.
func Use(tb testing.TB, v *varnishtest.Varnish, name string) {
	tb.Helper()
	if out, err := v.Adm("vcl.use", name); err != nil {
		tb.Fatalf("vcl.use %s: %v\n%s", name, err, out)
	}
}

// Browser is a client with its own cookie jar, following redirects as a
// browser does (at most 10: a redirect loop is an error). NewBrowser's
// requests carry X-Forwarded-For with the visitor's address, as from a
// proxy Varnish trusts no more than any client: Apache's mod_remoteip
// takes the address Varnish appends after it (loopback, trusted), then
// this one. NewVisitor's come from the visitor's own address instead.
type Browser struct {
	T    testing.TB // where transport errors and Get's failures go
	Base string     // the site's address, http(s)://host[:port], without a slash
	IP   string     // the visitor's address
	Jar  *cookiejar.Jar
	c    *http.Client

	forwarded bool       // IP goes in X-Forwarded-For (NewBrowser)
	hops      []Redirect // the redirects of the request under way
}

// NewBrowser returns a browser for the site at base with an empty jar,
// connecting from loopback and naming ip in X-Forwarded-For.
func NewBrowser(tb testing.TB, base, ip string) *Browser {
	jar, _ := cookiejar.New(nil)
	b := &Browser{T: tb, Base: base, IP: ip, Jar: jar, forwarded: true}
	b.c = &http.Client{Jar: jar, Timeout: 60 * time.Second, CheckRedirect: b.redirect}
	return b
}

// Net is how a visitor's browser reaches the sites: the names it
// resolves, and the certificates it trusts.
type Net struct {
	// Resolve maps a URL's host:port ("example.org:443") to the address
	// to connect to (curl's --resolve); others are dialed as written.
	Resolve map[string]string
	// Roots are the certificates an https site may show; nil: the
	// system's.
	Roots *x509.CertPool
}

// NewVisitor returns a browser for the site at base (http or https) that
// connects from ip, a loopback address of the visitor's own (127.0.0.2
// and up), as a visitor on the internet does: Varnish, or the TLS
// terminator in front of it, has the visitor as its peer, and no
// X-Forwarded-For is sent.
func NewVisitor(tb testing.TB, base, ip string, n Net) *Browser {
	jar, _ := cookiejar.New(nil)
	b := &Browser{T: tb, Base: base, IP: ip, Jar: jar}
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if to, ok := n.Resolve[addr]; ok {
				addr = to
			}
			return dialer.DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: n.Roots},
	}
	tb.Cleanup(tr.CloseIdleConnections)
	b.c = &http.Client{Jar: jar, Timeout: 60 * time.Second, Transport: tr, CheckRedirect: b.redirect}
	return b
}

// Redirect is one redirect a request followed.
type Redirect struct {
	Status    int      // 301, 302, ...
	From, To  string   // the URL that answered it, and its Location
	SetCookie []string // the cookies it set
}

func (b *Browser) redirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	r := req.Response
	b.hops = append(b.hops, Redirect{Status: r.StatusCode, From: r.Request.URL.String(), To: req.URL.String(),
		SetCookie: r.Header.Values("Set-Cookie")})
	return nil
}

// Page is a response as the browser saw it, after redirects.
type Page struct {
	Status int
	Header http.Header
	Body   string
	URL    string // after redirects
	// Redirects are the redirects followed to get here, in order.
	Redirects []Redirect
}

// XCache is the response's X-Cache header: HIT, MISS or PASS.
func (p Page) XCache() string { return p.Header.Get("X-Cache") }

// Do sends a request (a form, when form is not nil) to path, a path on the
// site or an absolute URL, with the extra header fields, and reads the
// answer. Transport errors end the test.
func (b *Browser) Do(method, path string, form url.Values, header map[string]string) Page {
	b.T.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	u := path
	if strings.HasPrefix(path, "/") {
		u = b.Base + path
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.T.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.forwarded && b.IP != "" {
		req.Header.Set("X-Forwarded-For", b.IP)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	b.hops = nil
	resp, err := b.c.Do(req)
	if err != nil {
		b.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.T.Fatal(err)
	}
	return Page{Status: resp.StatusCode, Header: resp.Header, Body: string(raw), URL: resp.Request.URL.String(), Redirects: b.hops}
}

// Get fetches path and ends the test unless the answer is a 200.
func (b *Browser) Get(path string) Page {
	b.T.Helper()
	p := b.Do(http.MethodGet, path, nil, nil)
	if p.Status != http.StatusOK {
		b.T.Fatalf("GET %s: status %d (X-Cache %s) at %s\n%.300s", path, p.Status, p.XCache(), p.URL, p.Body)
	}
	return p
}

// Post sends form to path.
func (b *Browser) Post(path string, form url.Values) Page {
	b.T.Helper()
	return b.Do(http.MethodPost, path, form, nil)
}

// CookieHeader is the Cookie header the browser sends for path on the
// site.
func (b *Browser) CookieHeader(path string) string {
	u, _ := url.Parse(b.Base + path)
	var parts []string
	for _, c := range b.Jar.Cookies(u) {
		parts = append(parts, c.Name+"="+c.Value)
	}
	return strings.Join(parts, "; ")
}
