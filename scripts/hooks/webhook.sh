#!/bin/sh
# gearshift on_change hook: POST the gear change as JSON to a webhook
# (Slack, Mattermost, Rocket.Chat incoming webhooks, or your own endpoint).
#
#   hooks:
#     on_change: [/usr/local/share/gearshift/hooks/webhook.sh, /etc/gearshift/webhook.url]
#     timeout: 30s
#
# The argument is a file holding the webhook's URL on its first line
# (chmod 0600: the URL is the secret), or the URL itself, which `ps` then
# shows in this script's command line. curl gets the URL on its stdin
# (--config -), never on its command line.
#
# gearshift runs it without a shell, with GEARSHIFT_FROM, GEARSHIFT_TO,
# GEARSHIFT_REASON and GEARSHIFT_MODE (auto or forced) in the environment,
# GEARSHIFT_INCIDENT above light and, on the step back to light,
# GEARSHIFT_SUMMARY (the incident in one line, posted as the text); its
# output and exit status go to gearshift's log. Needs curl.
set -eu
url=${1:?usage: webhook.sh URL-FILE | URL}
if [ -f "$url" ]; then
	url=$(sed -n '1{s/[[:space:]]*$//;p;}' "$url")
	[ -n "$url" ] || { echo "webhook.sh: $1 holds no URL on its first line" >&2; exit 2; }
fi

# JSON-escape a value: backslashes and double quotes (the reason holds
# neither newlines nor control characters).
esc() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }

incident=${GEARSHIFT_INCIDENT:-}
summary=${GEARSHIFT_SUMMARY:-}
text="$(hostname): gear $GEARSHIFT_FROM -> $GEARSHIFT_TO ($GEARSHIFT_MODE): $GEARSHIFT_REASON"
if [ -n "$summary" ]; then
	text="$(hostname): back in $GEARSHIFT_TO, $summary"
fi
body=$(printf '{"text":"%s","from":"%s","to":"%s","mode":"%s","reason":"%s","incident":"%s","summary":"%s"}' \
	"$(esc "$text")" "$(esc "$GEARSHIFT_FROM")" "$(esc "$GEARSHIFT_TO")" \
	"$(esc "$GEARSHIFT_MODE")" "$(esc "$GEARSHIFT_REASON")" "$(esc "$incident")" "$(esc "$summary")")

# --max-time stays below hooks.timeout so that curl reports its own error.
# The URL goes in curl's config syntax on stdin: a quoted string, with
# backslashes and double quotes escaped.
printf 'url = "%s"\n' "$(esc "$url")" |
	curl --silent --show-error --fail --max-time 20 --config - \
		-H 'Content-Type: application/json' --data-binary "$body"
