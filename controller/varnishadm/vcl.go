package varnishadm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Ping checks that the session is alive and authenticated.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.Run(ctx, "ping")
	return err
}

// Status returns the manager's view of the cache child, e.g.
// "Child in state running".
func (c *Client) Status(ctx context.Context) (string, error) {
	body, err := c.Run(ctx, "status")
	return strings.TrimSpace(body), err
}

// ChildState returns the state of the cache child as the manager reports
// it: "running" while Varnish serves, "stopped" after `varnishadm stop`
// (nothing is served), or a passing state ("starting", "stopping", …).
func (c *Client) ChildState(ctx context.Context) (string, error) {
	body, err := c.Status(ctx)
	if err != nil {
		return "", err
	}
	return parseChildState(body)
}

// ErrChildState is the error of an answer to `status` that names no state.
var ErrChildState = errors.New("status: the answer names no child state")

// parseChildState reads the answer to `status`: "Child in state running".
func parseChildState(body string) (string, error) {
	const prefix = "Child in state "
	s, ok := strings.CutPrefix(strings.TrimSpace(body), prefix)
	if !ok || s == "" || strings.ContainsAny(s, " \t\n") {
		if len(body) > 80 {
			body = body[:80] + "…"
		}
		return "", fmt.Errorf("%w: %q", ErrChildState, body)
	}
	return s, nil
}

// Banner returns the CLI banner: platform, storage and Varnish version.
func (c *Client) Banner(ctx context.Context) (string, error) {
	return c.Run(ctx, "banner")
}

// VCLInline compiles src and loads it as name. state is "warm", "cold",
// "auto", or "" for Varnish's default (auto). A VCL that does not compile
// is a *CLIError whose Text carries the VCC compiler's message.
func (c *Client) VCLInline(ctx context.Context, name, src, state string) error {
	args := []string{"vcl.inline", name, src}
	if state != "" {
		if err := checkState(state); err != nil {
			return fmt.Errorf("vcl.inline %s on %s: %w", name, c.addr, err)
		}
		args = append(args, state)
	}
	_, err := c.Run(ctx, args...)
	return err
}

// VCLUse makes the loaded VCL (or label) name the active one.
func (c *Client) VCLUse(ctx context.Context, name string) error {
	_, err := c.Run(ctx, "vcl.use", name)
	return err
}

// VCLState sets the state of a loaded VCL: "warm", "cold" or "auto".
func (c *Client) VCLState(ctx context.Context, name, state string) error {
	if err := checkState(state); err != nil {
		return fmt.Errorf("vcl.state %s on %s: %w", name, c.addr, err)
	}
	_, err := c.Run(ctx, "vcl.state", name, state)
	return err
}

// VCLLabel points the label at the loaded VCL target, creating the label
// when it does not exist. A VCL that hands requests to the label with
// return (vcl(label)) follows at once; the active VCL is left alone.
// Varnish refuses a cold target ("set to auto or warm first").
func (c *Client) VCLLabel(ctx context.Context, label, target string) error {
	_, err := c.Run(ctx, "vcl.label", label, target)
	return err
}

// VCLDiscard unloads a VCL that is neither active nor labelled.
func (c *Client) VCLDiscard(ctx context.Context, name string) error {
	_, err := c.Run(ctx, "vcl.discard", name)
	return err
}

func checkState(state string) error {
	switch state {
	case "warm", "cold", "auto":
		return nil
	}
	return fmt.Errorf("invalid VCL state %q: want warm, cold or auto", state)
}

// VCL is one entry of vcl.list.
type VCL struct {
	Name        string
	Status      string // "active", "available", "discarded"
	State       string // "auto", "warm", "cold", or "label" for a label
	Temperature string // "init", "warm", "cold", "busy", "cooling"
	Busy        int    // requests still using this VCL
	Labels      int    // labels pointing at this VCL
	LabelOf     string // for a label: the VCL it points to
	LabelRefs   int    // for a label: the VCLs that hand requests to it with return (vcl(...))
}

// IsLabel reports whether v is a label rather than a VCL program.
func (v VCL) IsLabel() bool { return v.State == "label" }

// Active reports whether v is the VCL new requests are handled by.
func (v VCL) Active() bool { return v.Status == "active" }

// listCLILimit is the cli_limit VCLList sets when vcl.list does not fit
// varnishd's: room for some 20,000 labels.
const listCLILimit = "4m"

// VCLList returns the loaded VCLs. It reads `vcl.list -j`: the text format
// changed between Varnish 6.0 and 6.2, the JSON one did not.
func (c *Client) VCLList(ctx context.Context) ([]VCL, error) {
	status, body, err := c.run(ctx, []string{"vcl.list", "-j"})
	if err != nil {
		return nil, err
	}
	if status == statusTruncated {
		// Many sites are many labels: a list longer than varnishd's
		// cli_limit (48k by default, some 200 labels) is cut. The
		// limit is a runtime parameter; raise it once and ask again.
		if _, _, err := c.run(ctx, []string{"param.set", "cli_limit", listCLILimit}); err != nil {
			return nil, fmt.Errorf("vcl.list on %s: answer truncated by varnishd's cli_limit, and raising it failed: %w", c.addr, err)
		}
		if status, body, err = c.run(ctx, []string{"vcl.list", "-j"}); err != nil {
			return nil, err
		}
	}
	if status == statusTruncated {
		return nil, fmt.Errorf("vcl.list on %s: answer truncated by varnishd's cli_limit parameter (%s); raise it", c.addr, listCLILimit)
	}
	vcls, err := parseVCLList(body)
	if err != nil {
		return nil, fmt.Errorf("vcl.list on %s: %w", c.addr, err)
	}
	return vcls, nil
}

// parseVCLList parses the JSON answer of `vcl.list -j`:
// [ version, [args], timestamp, {vcl}, {vcl}, ... ]. It reads the entries
// one by one as they come: at hundreds of labels the list is tens of kB,
// read every few seconds.
func parseVCLList(body string) ([]VCL, error) {
	dec := json.NewDecoder(strings.NewReader(body))
	bad := func(format string, args ...any) error {
		return fmt.Errorf("parse vcl.list -j: "+format, args...)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, bad("not a JSON array")
	}
	var version int
	var args, stamp json.RawMessage
	for i, v := range []any{&version, &args, &stamp} {
		if !dec.More() {
			return nil, bad("%d elements, want at least 3", i)
		}
		if err := dec.Decode(v); err != nil {
			return nil, bad("element %d: %w", i, err)
		}
	}
	if version < 1 {
		return nil, bad("bad version %d", version)
	}
	var vcls []VCL
	for i := 0; dec.More(); i++ {
		var e struct {
			Status      string `json:"status"`
			State       string `json:"state"`
			Temperature string `json:"temperature"`
			Busy        int    `json:"busy"`
			Name        string `json:"name"`
			Labels      int    `json:"labels"`
			Label       *struct {
				Name string `json:"name"`
				Refs int    `json:"refs"`
			} `json:"label"`
		}
		if err := dec.Decode(&e); err != nil {
			return nil, bad("entry %d: %w", i, err)
		}
		if e.Name == "" {
			return nil, bad("entry %d has no name", i)
		}
		v := VCL{Name: e.Name, Status: e.Status, State: e.State, Temperature: e.Temperature, Busy: e.Busy, Labels: e.Labels}
		if e.Label != nil {
			v.LabelOf, v.LabelRefs = e.Label.Name, e.Label.Refs
		}
		vcls = append(vcls, v)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return nil, bad("the array does not end")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("more after the array")
	}
	return vcls, nil
}
