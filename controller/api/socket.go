package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// MaxForce is the longest pin `force --for` accepts; longer is surely a typo
// (forget --for to pin until `auto`).
const MaxForce = 7 * 24 * time.Hour

// ErrStopped is returned for requests that reach a controller that has stopped.
var ErrStopped = errors.New("gearshift daemon is stopping")

// API is what the control socket serves. *Controller implements it.
type API interface {
	Status() Status
	// Force pins gear g on site (every site when "") until the deadline
	// (zero: until Auto) and returns the status once the gear is applied.
	// A site the config does not have is an *UnknownSiteError.
	Force(ctx context.Context, site string, g state.Gear, until time.Time) (Status, error)
	// Auto releases the pin of site, or every pin (per-site ones too)
	// when site is "".
	Auto(ctx context.Context, site string) (Status, error)
	// Reload re-reads the config and profiles; on error the old ones stay.
	Reload(ctx context.Context) (Status, error)
}

// ForceRequest is the body of POST /v1/force.
type ForceRequest struct {
	State string `json:"state"`          // light, moderate or heavy
	For   string `json:"for,omitempty"`  // Go duration ("30m"); empty or "0" = until auto
	Site  string `json:"site,omitempty"` // one site of the config's sites; empty = every site
}

// AutoRequest is the body of POST /v1/auto; an empty body releases every
// pin.
type AutoRequest struct {
	Site string `json:"site,omitempty"` // release this site's pin alone
}

type errorBody struct {
	Error string `json:"error"`
}

// NewHandler returns the HTTP handler of the control socket
// (docs/operating.md#commands), without access control (Serve adds it:
// docs/operating.md#health-check-nagios-icinga-zabbix-cron says who may
// do what).
// now is the clock used for force deadlines (time.Now when nil).
func NewHandler(api API, now func() time.Time) http.Handler {
	if now == nil {
		now = time.Now
	}
	h := &handler{api: api, now: now}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/status", h.only(http.MethodGet, h.status))
	mux.HandleFunc("/v1/force", h.only(http.MethodPost, h.force))
	mux.HandleFunc("/v1/auto", h.only(http.MethodPost, h.auto))
	mux.HandleFunc("/v1/reload", h.only(http.MethodPost, h.reload))
	notFound := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %q: use /v1/status, /v1/force, /v1/auto or /v1/reload", r.URL.Path))
	}
	mux.HandleFunc("/", notFound)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// ServeMux answers a path it would clean (/v1//status,
		// /v1/../v1/force) with a redirect, which is no answer for a
		// client of this API: such a path names no endpoint.
		if p := r.URL.Path; p == "" || p[0] != '/' || path.Clean(p) != p || r.URL.RawPath != "" && r.URL.RawPath != p {
			notFound(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type handler struct {
	api API
	now func() time.Time
}

func (h *handler) only(method string, fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method))
			return
		}
		fn(w, r)
	}
}

func (h *handler) status(w http.ResponseWriter, r *http.Request) {
	st := h.api.Status()
	if name := r.URL.Query().Get("site"); name != "" {
		site, ok := st.Site(name)
		if !ok {
			writeError(w, http.StatusNotFound, (&UnknownSiteError{Site: name}).Error())
			return
		}
		writeJSON(w, http.StatusOK, site)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (h *handler) force(w http.ResponseWriter, r *http.Request) {
	var req ForceRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`bad request body: %v (want {"state":"%s","for":"30m"})`, err, state.Heaviest))
		return
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "bad request body: trailing data after the JSON object")
		return
	}
	st, err := state.Parse(req.State)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	d, err := ParseForceDuration(req.For)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var until time.Time
	if d > 0 {
		until = h.now().Add(d)
	}
	s, err := h.api.Force(r.Context(), req.Site, st, until)
	h.reply(w, s, err)
}

func (h *handler) auto(w http.ResponseWriter, r *http.Request) {
	var req AutoRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`bad request body: %v (want {"site":"NAME"}, or nothing)`, err))
		return
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "bad request body: trailing data after the JSON object")
		return
	}
	s, err := h.api.Auto(r.Context(), req.Site)
	h.reply(w, s, err)
}

func (h *handler) reload(w http.ResponseWriter, r *http.Request) {
	s, err := h.api.Reload(r.Context())
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrStopped) {
		// The daemon is fine; the new config is not.
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	h.reply(w, s, err)
}

func (h *handler) reply(w http.ResponseWriter, s Status, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, s)
	case errors.As(err, new(*UnknownSiteError)):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrStopped):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, "request abandoned: "+err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// ParseForceDuration parses the "for" of a force request: empty or zero means
// until auto; negative durations and durations over MaxForce are refused.
func ParseForceDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: use e.g. 30m, 2h", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("bad duration %q: must not be negative", s)
	}
	if d > MaxForce {
		return 0, fmt.Errorf("bad duration %q: at most %s (omit it to pin until auto)", s, "168h")
	}
	return d, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: "encode answer: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg})
}

// ListenSocket opens the control socket at path: its directory is created
// (0755) when missing, a stale socket file left by a dead daemon is removed,
// and the socket gets mode 0660 and, when group is set, that group. It fails
// when another daemon answers on path.
func ListenSocket(path, group string) (net.Listener, error) {
	gid := -1
	if group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			return nil, fmt.Errorf("control.group %q: %w", group, err)
		}
		gid, _ = strconv.Atoi(g.Gid)
	}
	if err := MkdirAllMode(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create control socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("control socket %s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another gearshift daemon is listening on %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale control socket: %w", err)
		}
	}
	// The umask gives the socket its mode 0660 as bind creates it: no
	// window where others may connect, and no chmod by path afterwards.
	old := syscall.Umask(0o117)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on control socket: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if gid >= 0 {
		if err := chownGroup(path, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("chown control socket to group %s: %w", group, err)
		}
	}
	return ln, nil
}

// chownGroup gives path the group gid without following a symlink: should
// path have been swapped for one since bind, root changes the link, not
// whatever file it points to.
func chownGroup(path string, gid int) error {
	return os.Lchown(path, -1, gid)
}

// MkdirAllMode creates dir and its missing parents with mode perm exactly,
// whatever the umask: the control socket's directory must let
// control.group through (0755) even under a daemon's 027 umask. A
// directory that exists already is left as the admin made it.
func MkdirAllMode(dir string, perm os.FileMode) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range missing {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			continue
		}
		if err := os.Chmod(d, perm); err != nil {
			return err
		}
	}
	return nil
}

// serverTimeouts bound what a client of the control socket or the metrics
// listener may hold: a connection that sends nothing, reads nothing or sits
// idle between requests is closed.
type serverTimeouts struct {
	readHeader, read, write, idle time.Duration
}

// controlTimeouts: the write timeout runs from the request to the end of
// the answer, so it outlasts the longest force or reload (a VCL compile
// on every target, 30s, and the client's 90s wait).
var controlTimeouts = serverTimeouts{readHeader: 5 * time.Second, read: 10 * time.Second, write: 3 * time.Minute, idle: 30 * time.Second}

var metricsTimeouts = serverTimeouts{readHeader: 5 * time.Second, read: 10 * time.Second, write: 10 * time.Second, idle: 30 * time.Second}

func (st serverTimeouts) apply(srv *http.Server) *http.Server {
	srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = st.readHeader, st.read, st.write, st.idle
	return srv
}

// Serve answers control requests for api on ln until ctx is done; access
// says who may change the daemon's course.
func Serve(ctx context.Context, ln net.Listener, api API, access Access) error {
	return serve(ctx, ln, api, access, controlTimeouts)
}

func serve(ctx context.Context, ln net.Listener, api API, access Access, timeouts serverTimeouts) error {
	srv := timeouts.apply(&http.Server{
		Handler:     access.guard(NewHandler(api, nil)),
		BaseContext: func(net.Listener) context.Context { return ctx },
		ConnContext: peerContext,
	})
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			srv.Shutdown(sctx)
			cancel()
		case <-done:
		}
	}()
	err := srv.Serve(ln)
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ServeMetrics serves h, the daemon's metrics, on ln (metrics_listen) until
// ctx is done.
func ServeMetrics(ctx context.Context, ln net.Listener, h http.Handler) error {
	return serveHTTP(ctx, ln, h, metricsTimeouts)
}

func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, timeouts serverTimeouts) error {
	srv := timeouts.apply(&http.Server{Handler: h})
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
