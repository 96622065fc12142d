// Package ownfile opens the files the daemon writes (its log, the flight
// recorder's history) without following a symbolic link planted at their
// path, and gives a file it creates its directory's group and the mode
// the package promises, so that the adm group reads what lives in a
// root:adm directory.
package ownfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// Mode is the mode of a file the daemon creates: root writes, the
// directory's group reads.
const Mode os.FileMode = 0o640

// Open opens path with flag (os.O_WRONLY|os.O_APPEND|os.O_CREATE, …) and
// O_NOFOLLOW: a symbolic link at path is refused (ErrSymlink), whatever it
// points at. A file it creates gets Mode (whatever the umask) and the group
// of its directory.
func Open(path string, flag int) (*os.File, error) {
	_, statErr := os.Lstat(path)
	created := errors.Is(statErr, os.ErrNotExist) && flag&os.O_CREATE != 0
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW, Mode)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, &os.PathError{Op: "open", Path: path, Err: ErrSymlink}
		}
		return nil, err
	}
	if created {
		adopt(f, filepath.Dir(path))
	}
	return f, nil
}

// ErrSymlink is a symbolic link where the daemon writes a file of its own.
var ErrSymlink = errors.New("is a symbolic link, not followed (remove it: gearshift creates the file itself)")

// adopt gives a new file Mode and its directory's group; a failure (a
// group this user may not give) leaves the file as it was created.
func adopt(f *os.File, dir string) {
	f.Chmod(Mode)
	di, err := os.Stat(dir)
	if err != nil {
		return
	}
	dst, ok := di.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	if fi, err := f.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Gid != dst.Gid {
			f.Chown(-1, int(dst.Gid))
		}
	}
}
