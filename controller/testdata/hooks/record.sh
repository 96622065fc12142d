#!/bin/sh
# Appends what gearshift told the hook to the file $1, one line per run.
printf '%s|%s|%s|%s|%s\n' "$GEARSHIFT_FROM" "$GEARSHIFT_TO" "$GEARSHIFT_MODE" "$GEARSHIFT_REASON" "$#" >>"$1"
echo "recorded $GEARSHIFT_TO"
