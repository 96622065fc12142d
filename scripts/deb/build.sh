#!/bin/sh
# Builds gearshift_<version>_<arch>.deb with dpkg-deb from the repository:
# the binary, the config, cron.d and logrotate files as conffiles, the
# systemd unit, man pages, shell completions, the docs, the example hooks,
# the label-mode VCL snippet, and the Grafana dashboard and Prometheus
# alert rules.
#
#   scripts/deb/build.sh [OUTDIR]      (make deb; OUTDIR defaults to the repository)
#
# Reproducible: the same commit builds the same bytes. Times come from
# SOURCE_DATE_EPOCH (default: the last commit's time), the binary is built
# with -trimpath and no build id, gzip stores no names or times, and files
# are owned by root in the archive whoever builds it (no fakeroot needed).
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$repo}
command -v go >/dev/null 2>&1 || PATH=$PATH:/usr/local/go/bin
say() { printf 'deb: %s\n' "$*"; }

if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

arch=$(dpkg --print-architecture)
case $arch in
amd64 | arm64 | riscv64 | s390x) goarch=$arch ;;
ppc64el) goarch=ppc64le ;;
i386) goarch=386 ;;
*) say "no Go architecture known for $arch" >&2; exit 2 ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
mkdir -p "$root"

# The binary: static (no libc dependency), stripped, reproducible.
(cd "$repo" && CGO_ENABLED=0 GOOS=linux GOARCH=$goarch go build -trimpath -buildvcs=false \
	-ldflags '-s -w -buildid=' -o "$root/usr/bin/gearshift" ./cmd/gearshift)
bin=$root/usr/bin/gearshift
version=$("$bin" version | awk '{print $2}')
case $version in
[0-9]*) ;;
*) say "cannot read the version from gearshift version: $version" >&2; exit 1 ;;
esac

# put MODE SRC DEST: a file of the package, its mtime clamped by dpkg-deb.
put() {
	mkdir -p "$root$(dirname "$3")"
	cp "$2" "$root$3"
	chmod "$1" "$root$3"
}
# Installed paths: /usr/bin and /usr/share, not install.sh's /usr/local.
usrbin() { sed -e 's|/usr/local/bin/gearshift|/usr/bin/gearshift|g' -e 's|/usr/local/share/gearshift|/usr/share/gearshift|g' "$1"; }

usrbin "$repo/scripts/gearshift.yaml" >"$tmp/gearshift.yaml"
put 0640 "$tmp/gearshift.yaml" /etc/gearshift/gearshift.yaml
usrbin "$repo/scripts/gearshift.service" | sed -e 's|^# the server.s load changes. Installed by scripts/install.sh.|# the server'"'"'s load changes. Installed by the gearshift package.|' >"$tmp/gearshift.service"
put 0644 "$tmp/gearshift.service" /lib/systemd/system/gearshift.service
# The watchdog ships switched off: the package does not start gearshift
# before the admin has pointed it at Varnish (see docs/operating.md).
usrbin "$repo/scripts/cron.d/gearshift" | sed -e 's|^\* \* \* \* \*|#* * * * *|' \
	-e 's|^# gearshift watchdog, installed by scripts/install.sh.|# gearshift watchdog, installed by the gearshift package. Uncomment the\n# line at the bottom to turn it on, once gearshift runs.|' >"$tmp/cron"
put 0644 "$tmp/cron" /etc/cron.d/gearshift
sed -e 's|installed by scripts/install.sh|installed by the gearshift package|' "$repo/scripts/logrotate/gearshift" >"$tmp/logrotate"
put 0644 "$tmp/logrotate" /etc/logrotate.d/gearshift

"$bin" manpages "$tmp/man"
for page in "$tmp"/man/*.8; do
	gzip -9n <"$page" >"$tmp/page.gz"
	put 0644 "$tmp/page.gz" "/usr/share/man/man8/$(basename "$page").gz"
done

"$bin" completion bash >"$tmp/bash"
"$bin" completion zsh >"$tmp/zsh"
"$bin" completion fish >"$tmp/fish"
put 0644 "$tmp/bash" /usr/share/bash-completion/completions/gearshift
put 0644 "$tmp/zsh" /usr/share/zsh/vendor-completions/_gearshift
put 0644 "$tmp/fish" /usr/share/fish/vendor_completions.d/gearshift.fish

doc=/usr/share/doc/gearshift
gzip -9n <"$repo/README.md" >"$tmp/README.md.gz"
put 0644 "$tmp/README.md.gz" "$doc/README.md.gz"
# The README links docs/; they sit beside it, as in the source tree.
for page in "$repo"/docs/*.md; do
	gzip -9n <"$page" >"$tmp/page.gz"
	put 0644 "$tmp/page.gz" "$doc/docs/$(basename "$page").gz"
done
put 0644 "$tmp/gearshift.yaml" "$doc/examples/gearshift.yaml"
# Examples: on_change hooks, and the snippet for varnish.mode: label.
for hook in "$repo"/scripts/hooks/*.sh; do
	usrbin "$hook" >"$tmp/hook"
	put 0755 "$tmp/hook" "/usr/share/gearshift/hooks/$(basename "$hook")"
done
put 0644 "$repo/scripts/varnish/gearshift-label.vcl" /usr/share/gearshift/varnish/gearshift-label.vcl
# Monitoring: the Grafana dashboard and the Prometheus alert rules.
for f in "$repo"/scripts/monitoring/*; do
	put 0644 "$f" "/usr/share/gearshift/monitoring/$(basename "$f")"
done
put 0644 "$repo/scripts/deb/copyright" "$doc/copyright"
{
	printf 'gearshift (%s) unstable; urgency=medium\n\n' "$version"
	printf '  * Release %s.\n\n' "$version"
	printf ' -- gearshift maintainers <maintainers@gearshift.invalid>  %s\n' \
		"$(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$tmp/changelog.gz"
put 0644 "$tmp/changelog.gz" "$doc/changelog.gz"
put 0644 "$repo/scripts/deb/lintian-overrides" /usr/share/lintian/overrides/gearshift

mkdir -p "$root/DEBIAN"
size=$(du -sk --apparent-size "$root" | awk '{print $1}')
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
	"$repo/scripts/deb/control.in" >"$root/DEBIAN/control"
for f in conffiles postinst prerm postrm; do
	cp "$repo/scripts/deb/$f" "$root/DEBIAN/$f"
done
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles"
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"
(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z |
	xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"
find "$root" -type d -exec chmod 0755 {} +

deb=$out/gearshift_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
say "built $deb"
