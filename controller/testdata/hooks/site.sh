#!/bin/sh
# Appends the site and gears gearshift told the hook to the file $1.
printf '%s|%s|%s|%s\n' "$GEARSHIFT_SITE" "$GEARSHIFT_FROM" "$GEARSHIFT_TO" "$GEARSHIFT_MODE" >>"$1"
