#!/bin/sh
# gearshift on_change hook: one syslog line per gear change (journal, or
# /var/log/syslog), tagged gearshift-hook, at warning priority on the way up
# to heavy and at notice otherwise.
#
#   hooks:
#     on_change: [/usr/local/share/gearshift/hooks/logger.sh]
#
# logger alone works too, without this script:
#
#     on_change: [logger, -t, gearshift-hook, "gear changed"]
#
# but only a script can put GEARSHIFT_FROM, GEARSHIFT_TO, GEARSHIFT_REASON
# and GEARSHIFT_MODE into the message: gearshift runs hooks without a shell.
set -eu
priority=user.notice
[ "$GEARSHIFT_TO" = heavy ] && priority=user.warning
exec logger -t gearshift-hook -p "$priority" -- \
	"gear $GEARSHIFT_FROM -> $GEARSHIFT_TO ($GEARSHIFT_MODE): $GEARSHIFT_REASON"
