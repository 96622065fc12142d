package main

import (
	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller"
	"github.com/gearshift/gearshift/internal/manpage"
)

// manSection is the section of every page: gearshift is a system
// administration command.
const manSection = "8"

// newManpagesCmd is the build step that writes the manual: gearshift(8) and a
// gearshift-<command>(8) page per subcommand, from the command tree itself.
// Hidden: packagers run it (make man), operators read the result.
func newManpagesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "manpages DIR",
		Short:  "Write gearshift's manual pages (section 8) into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) (int, error) {
			err := manpage.Write(cmd.Root(), args[0], manpage.Page{
				Section:      manSection,
				Source:       "gearshift " + controller.Version,
				Manual:       "gearshift manual",
				RootSections: rootSections,
			})
			if err != nil {
				return exitFailure, err
			}
			return exitOK, nil
		}),
	}
}

// rootSections are the parts of gearshift(8) that no single command's help
// holds: where things live, and how it exits.
const rootSections = `.SH FILES
.TP
\fI/etc/gearshift/gearshift.yaml\fR
the config (see \fBgearshift\-config\fR(8)); without it the built-in defaults apply, which match a stock Debian Varnish
.TP
\fI/run/gearshift/gearshift.sock\fR
the control socket (status, sites, force, auto, check)
.TP
\fI/run/gearshift/gearshift.pid\fR
the pid file (stop, reload, logrotate)
.TP
\fI/var/log/gearshift/gearshift.log\fR
the log, JSON lines (see \fBgearshift\-logs\fR(8))
.TP
\fI/lib/systemd/system/gearshift.service\fR
the systemd unit, which runs \fBgearshift run\fR
.TP
\fI/etc/cron.d/gearshift\fR
the watchdog, \fBgearshift check \-\-restart \-\-quiet\fR every minute
.SH EXIT STATUS
0 on success, 1 on a runtime failure (the daemon unreachable, Varnish refused), 2 on a usage or config error.
\fBgearshift check\fR exits as a monitoring plugin does: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
`
