#!/bin/sh
# gearshift on_change hook: POST the gear change as JSON to a webhook
# (Slack, Mattermost, Rocket.Chat incoming webhooks, or your own endpoint).
#
#   hooks:
#     on_change: [/usr/local/share/gearshift/hooks/webhook.sh, "https://hooks.example.com/T000/B000/XXXX"]
#     timeout: 30s
#
# gearshift runs it without a shell, with GEARSHIFT_FROM, GEARSHIFT_TO,
# GEARSHIFT_REASON and GEARSHIFT_MODE (auto or forced) in the environment;
# its output and exit status go to gearshift's log. Needs curl.
set -eu
url=${1:?usage: webhook.sh URL}

# JSON-escape a value: backslashes and double quotes (the reason holds
# neither newlines nor control characters).
esc() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }

text="$(hostname): gear $GEARSHIFT_FROM -> $GEARSHIFT_TO ($GEARSHIFT_MODE): $GEARSHIFT_REASON"
body=$(printf '{"text":"%s","from":"%s","to":"%s","mode":"%s","reason":"%s"}' \
	"$(esc "$text")" "$(esc "$GEARSHIFT_FROM")" "$(esc "$GEARSHIFT_TO")" \
	"$(esc "$GEARSHIFT_MODE")" "$(esc "$GEARSHIFT_REASON")")

# --max-time stays below hooks.timeout so that curl reports its own error.
exec curl --silent --show-error --fail --max-time 20 \
	-H 'Content-Type: application/json' --data-binary "$body" "$url"
