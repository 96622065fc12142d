package ownfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOpenRefusesLinksAndGivesTheDirectorysGroup(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	os.WriteFile(target, []byte("root's file\n"), 0o600)
	link := filepath.Join(dir, "gearshift.log")
	os.Symlink(target, link)
	if _, err := Open(link, os.O_WRONLY|os.O_APPEND|os.O_CREATE); !errors.Is(err, ErrSymlink) {
		t.Errorf("Open of a link = %v, want ErrSymlink", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "root's file\n" {
		t.Errorf("the link's target was written: %q", b)
	}

	if os.Geteuid() != 0 {
		t.Skip("giving a group needs root here")
	}
	logs := filepath.Join(dir, "log")
	os.Mkdir(logs, 0o750)
	const adm = 4 // Debian's adm; any group does for root
	os.Chown(logs, 0, adm)
	old := syscall.Umask(0o077)
	f, err := Open(filepath.Join(logs, "gearshift.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o640 || st.Gid != adm {
		t.Errorf("a new file: mode %04o gid %d, want 0640 and the directory's group %d", fi.Mode().Perm(), st.Gid, adm)
	}
}
