package config

import (
	"errors"
	"fmt"
	"os"
)

// MaxConfigSize is the largest config file read: a real one is a few KiB,
// and /dev/zero given by mistake must not fill the memory.
const MaxConfigSize = 1 << 20

// MaxTargets bounds varnish.targets: every target is polled and switched
// by one loop, and the status of them all must fit the control client's
// answer cap (controller's maxAnswer, 64 KiB a target).
const MaxTargets = 1024

// ReadConfigFile reads path, refusing more than MaxConfigSize bytes. Its
// errors wrap the file error (errors.Is(err, os.ErrNotExist) …).
func ReadConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	return readBounded(f, path)
}

// File is the config a command uses: the file --config names, or the
// default path, where an absent default file means the embedded defaults.
type File struct {
	Path  string // --config, or DefaultPath
	Given bool   // --config was on the command line
}

// Defaults tells whether the embedded defaults stand in for the file:
// --config was not given and the default file does not exist.
func (f File) Defaults() bool {
	if f.Given {
		return false
	}
	_, err := os.Stat(f.Path)
	return errors.Is(err, os.ErrNotExist)
}

// Describe names where the config comes from, for people.
func (f File) Describe() string {
	if f.Defaults() {
		return "embedded defaults (" + f.Path + " does not exist)"
	}
	return f.Path
}

// Load loads and validates the config (see Defaults).
func (f File) Load() (*Config, error) {
	if f.Defaults() {
		cfg := Default()
		return cfg, cfg.Validate()
	}
	return Load(f.Path)
}

// LoadOffline loads the config of a command that talks to no Varnish and
// no daemon (simulate, profiles show): see Offline.
func (f File) LoadOffline() (*Config, error) {
	cfg, err := f.Load()
	if err == nil {
		return cfg, nil
	}
	return Offline(err)
}

// LoadForDaemon loads the config of a command that acts on a running
// daemon through its pid file or socket. A file that does not validate
// (edited and not yet reloaded) must not keep the operator from the
// daemon: it is then read leniently for its paths, and the validation
// error is returned too.
func (f File) LoadForDaemon() (cfg *Config, invalid error) {
	cfg, err := f.Load()
	if err == nil {
		return cfg, nil
	}
	if lenient, lerr := LoadLenient(f.Path); lerr == nil {
		return lenient, err
	}
	return Default(), err
}

// LoadForCheck returns the config that names the daemon's socket and pid
// file, and what is wrong with the file, judged on its own settings: a
// check often runs unprivileged (a monitoring agent) and cannot open the
// admin secret, and the daemon reports a reload it refused itself. A file
// the caller may not read leaves it the defaults, without an error.
func (f File) LoadForCheck() (*Config, error) {
	if f.Defaults() {
		return Default(), nil
	}
	b, err := ReadConfigFile(f.Path)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrPermission):
		return Default(), nil
	default:
		return Default(), err
	}
	cfg, err := ParseSettings(b)
	if err == nil {
		return cfg, nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		ce.File = f.Path
	}
	if lenient, lerr := LoadLenient(f.Path); lerr == nil {
		return lenient, err
	}
	return Default(), err
}
