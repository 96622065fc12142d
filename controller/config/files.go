package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
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
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if len(b) > MaxConfigSize {
		return nil, fmt.Errorf("config %s is larger than 1 MiB: not a gearshift config (give the YAML file to --config)", path)
	}
	return b, nil
}

// CheckTrusted refuses a file that someone other than root and the daemon's
// own user could change: the file, or a directory above it, owned by
// another user, or writable by others (a directory with the sticky bit,
// /tmp, is fine). Whoever can write the config or a VCL file controls a
// root daemon: its backends, its VCL, the paths root writes. sshd's
// StrictModes is the model.
func CheckTrusted(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("resolve %s: %v", path, unwrapPathError(err))
	}
	euid := uint32(os.Geteuid())
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("cannot stat %s: %v", p, unwrapPathError(err))
		}
		what := "a directory above it, " + p + ","
		if p == abs {
			what = p
		}
		mode := fi.Mode()
		if mode.Perm()&0o002 != 0 && !(mode.IsDir() && mode&os.ModeSticky != 0) {
			return fmt.Errorf("%s is writable by every user (mode %04o), so anyone could take over the daemon: chmod o-w %s", what, mode.Perm(), p)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && st.Uid != euid {
			return fmt.Errorf("%s belongs to uid %d, who could take over the daemon: chown root %s", what, st.Uid, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
