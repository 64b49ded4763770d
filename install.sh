#!/bin/sh
# Installs burrow: picks the release build for this machine, downloads it,
# checks the signature of the release's SHA256SUMS (SHA256SUMS.minisig, with
# the key written into this script when the release was signed), checks the
# download's SHA-256 against SHA256SUMS, and puts it on disk as `burrow`.
# Never uses sudo. POSIX sh (dash, busybox ash, bash, zsh as sh).
#
#   curl -fsSL https://github.com/burrow-tunnel/burrow/releases/latest/download/install.sh | sh
#
# Settings, all optional (environment):
#   BURROW_DOWNLOAD_BASE  the URL that holds the release files and SHA256SUMS
#                         (default: the latest release, or BURROW_VERSION's)
#   BURROW_VERSION        the version to install, e.g. 0.1.0 (default: the one
#                         SHA256SUMS at the base lists)
#   BURROW_INSTALL_DIR    where to put it (default: /usr/local/bin when it is
#                         writable, else ~/.local/bin)
#   BURROW_TARGET         the build, instead of detecting it: linux-x64,
#                         linux-arm64, linux-x64-musl, linux-arm64-musl,
#                         darwin-x64 or darwin-arm64
#   BURROW_INSTALL_INSECURE=1 install even when SHA256SUMS's signature is
#                         missing or does not verify (loudly; never do this
#                         for a release you did not make yourself)

set -u

# The release's minisign public key, written in by `npm run release` when it
# signs (build/release.ts); empty in a script that comes from the source.
BURROW_PUBLIC_KEY=""

RELEASES_URL="https://github.com/burrow-tunnel/burrow/releases"
DEFAULT_BASE="$RELEASES_URL/latest/download"
SYSTEM_DIR="/usr/local/bin"
TARGETS="linux-x64 linux-arm64 linux-x64-musl linux-arm64-musl darwin-x64 darwin-arm64"

# Set once known; the EXIT trap removes what they name.
tmp=""
stage=""

say() { printf 'burrow-install: %s\n' "$*"; }
warn() { printf 'burrow-install: warning: %s\n' "$*" >&2; }
die() {
	printf 'burrow-install: error: %s\n' "$*" >&2
	exit 1
}

cleanup() {
	if [ -n "$stage" ]; then rm -f "$stage"; fi
	if [ -n "$tmp" ]; then rm -rf "$tmp"; fi
}

has() { command -v "$1" >/dev/null 2>&1; }

# --- what to download -------------------------------------------------------

windows_by_hand() {
	printf 'burrow-install: this script installs on Linux and macOS only.\n' >&2
	printf 'burrow-install: on Windows, download burrow-<version>-windows-x64.exe by hand from\n' >&2
	printf 'burrow-install:   %s/\n' "$base" >&2
	printf 'burrow-install: check it against SHA256SUMS there (certutil -hashfile FILE SHA256),\n' >&2
	printf 'burrow-install: rename it burrow.exe and put it in a folder on your PATH.\n' >&2
	exit 1
}

# musl (Alpine and the like) or glibc: ask ldd first, since a glibc system may
# carry musl's loader too (Debian's musl package installs one).
is_musl() {
	ldd_says=$(ldd --version 2>&1) || true
	case "$ldd_says" in
	*[Mm][Uu][Ss][Ll]*) return 0 ;;
	*GNU* | *GLIBC* | *glibc*) return 1 ;;
	esac
	if has getconf && getconf GNU_LIBC_VERSION >/dev/null 2>&1; then return 1; fi
	for loader in /lib/ld-musl-*.so.1; do
		if [ -e "$loader" ]; then return 0; fi
	done
	return 1
}

detect_target() {
	os=$(uname -s 2>/dev/null) || die "uname -s failed: set BURROW_TARGET (one of: $TARGETS)"
	arch=$(uname -m 2>/dev/null) || die "uname -m failed: set BURROW_TARGET (one of: $TARGETS)"
	case "$os" in
	Linux) os=linux ;;
	Darwin) os=darwin ;;
	MINGW* | MSYS* | CYGWIN* | Windows_NT) windows_by_hand ;;
	*) die "unsupported operating system '$os': burrow is built for Linux, macOS and Windows (see $base/)" ;;
	esac
	case "$arch" in
	x86_64 | amd64 | x64) arch=x64 ;;
	aarch64 | arm64) arch=arm64 ;;
	*) die "unsupported CPU architecture '$arch': burrow is built for x86_64 (x64) and aarch64 (arm64) only" ;;
	esac
	# a shell under Rosetta says x86_64 on Apple silicon; the native build is better
	if [ "$os" = darwin ] && [ "$arch" = x64 ] &&
		[ "$(sysctl -n sysctl.proc_translated 2>/dev/null || true)" = 1 ]; then
		arch=arm64
	fi
	target="$os-$arch"
	if [ "$os" = linux ] && is_musl; then target="$target-musl"; fi
}

check_target() {
	for known in $TARGETS; do
		if [ "$known" = "$1" ]; then return 0; fi
	done
	case "$1" in
	windows*) windows_by_hand ;;
	esac
	die "BURROW_TARGET '$1' is not a build this script installs (one of: $TARGETS)"
}

# --- tools -----------------------------------------------------------------

pick_tools() {
	if has curl; then
		fetcher=curl
	elif has wget; then
		fetcher=wget
	else
		die "needs curl or wget to download; install one of them and run this again"
	fi
	if has sha256sum; then
		hasher=sha256sum
	elif has shasum; then
		hasher=shasum
	else
		die "needs sha256sum or shasum to verify the download, and will not install it unverified"
	fi
}

# download URL FILE: fails on HTTP errors, leaves no output on the terminal
download() {
	case "$fetcher" in
	curl) curl -fsSL --connect-timeout 30 --retry 2 -o "$2" "$1" ;;
	wget) wget -q -T 30 -O "$2" "$1" ;;
	esac
}

# sha256_of FILE: the lowercase hex digest
sha256_of() {
	case "$hasher" in
	sha256sum) digest=$(sha256sum <"$1") || return 1 ;;
	shasum) digest=$(shasum -a 256 <"$1") || return 1 ;;
	esac
	printf '%s\n' "${digest%% *}" | tr 'A-F' 'a-f'
}

# --- the signature of SHA256SUMS ------------------------------------------------

# b64d: base64 from stdin, decoded (GNU, busybox and macOS spell it differently)
b64d() { base64 -d 2>/dev/null || base64 -D; }

# verify_with_openssl SUMS SIG: minisign's check made with openssl (3.0 or later):
# the key id, Ed25519 over BLAKE2b-512 of SUMS, and over the signature and its trusted comment
verify_with_openssl() {
	w="$tmp/sig"
	mkdir -p "$w" || return 1
	printf '%s\n' "$BURROW_PUBLIC_KEY" | b64d >"$w/key" || return 1
	# the key as DER (SubjectPublicKeyInfo for Ed25519: a fixed 12-byte prefix, then the 32-byte key)
	{ printf '\060\052\060\005\006\003\053\145\160\003\041\000' && tail -c 32 "$w/key"; } >"$w/key.der" || return 1
	sed -n 2p "$2" | b64d >"$w/sig" || return 1
	[ "$(head -c 2 "$w/sig")" = "ED" ] || return 1
	[ "$(tail -c +3 "$w/sig" | head -c 8 | od -An -tx1)" = "$(tail -c +3 "$w/key" | head -c 8 | od -An -tx1)" ] || return 1
	tail -c 64 "$w/sig" >"$w/sig64" || return 1
	openssl dgst -blake2b512 -binary "$1" >"$w/digest" 2>/dev/null || return 1
	openssl pkeyutl -verify -pubin -keyform DER -inkey "$w/key.der" -rawin -in "$w/digest" -sigfile "$w/sig64" >/dev/null 2>&1 || return 1
	trusted=$(sed -n 3p "$2")
	case "$trusted" in
	"trusted comment: "*) trusted=${trusted#trusted comment: } ;;
	*) return 1 ;;
	esac
	{ cat "$w/sig64" && printf '%s' "$trusted"; } >"$w/global.msg" || return 1
	sed -n 4p "$2" | b64d >"$w/global.sig" || return 1
	openssl pkeyutl -verify -pubin -keyform DER -inkey "$w/key.der" -rawin -in "$w/global.msg" -sigfile "$w/global.sig" >/dev/null 2>&1
}

# can_verify_with_openssl: openssl 3 with Ed25519 over raw messages, BLAKE2b, base64
can_verify_with_openssl() {
	has openssl && has base64 && has od && openssl pkeyutl -help 2>&1 | grep -q rawin && openssl dgst -blake2b512 </dev/null >/dev/null 2>&1
}

# check_signature: SHA256SUMS verified against the key written into this script, or refused
check_signature() {
	if [ -z "$BURROW_PUBLIC_KEY" ]; then
		say "this install.sh carries no release key (it comes from the source, not a signed release): the download is checked against SHA256SUMS only"
		return 0
	fi
	if ! download "$base/SHA256SUMS.minisig" "$tmp/SHA256SUMS.minisig"; then
		insecure_or_die "the release at $base/ has no SHA256SUMS.minisig: it is not signed"
		return 0
	fi
	if has minisign; then
		if minisign -V -q -P "$BURROW_PUBLIC_KEY" -m "$tmp/SHA256SUMS" -x "$tmp/SHA256SUMS.minisig" >/dev/null 2>&1; then
			say "signature ok: SHA256SUMS is signed by the release key (minisign)"
			return 0
		fi
	elif can_verify_with_openssl; then
		if verify_with_openssl "$tmp/SHA256SUMS" "$tmp/SHA256SUMS.minisig"; then
			say "signature ok: SHA256SUMS is signed by the release key (openssl)"
			return 0
		fi
	else
		insecure_or_die "cannot check SHA256SUMS's signature here: install minisign, or openssl 3"
		return 0
	fi
	insecure_or_die "SHA256SUMS's signature does not verify with the release key: the files at $base/ are not the release's"
}

insecure_or_die() {
	if [ "${BURROW_INSTALL_INSECURE:-}" = "1" ]; then
		warn "$1"
		warn "BURROW_INSTALL_INSECURE=1: installing anyway, UNVERIFIED"
		return 0
	fi
	die "$1; nothing installed (BURROW_INSTALL_INSECURE=1 installs anyway, unverified)"
}

# --- SHA256SUMS --------------------------------------------------------------

# find_build SUMS_FILE: sets name and sum from the one line that names the raw
# executable for $target (of $version when set). Lines are GNU sha256sum's:
# "<64 hex>  <name>" ("<64 hex> *<name>" in binary mode).
find_build() {
	name=""
	sum=""
	found=0
	listed=""
	cr=$(printf '\r')
	while IFS= read -r line || [ -n "$line" ]; do
		line=${line%"$cr"}
		case "$line" in
		*' '*) ;;
		*) continue ;;
		esac
		line_sum=${line%% *}
		line_name=${line#* }
		case "$line_name" in
		' '* | '*'*) line_name=${line_name#?} ;;
		esac
		case "$line_name" in
		burrow-*.tar.gz | burrow-*.zip | burrow-*.exe) continue ;;
		burrow-*) listed="$listed $line_name" ;;
		*) continue ;;
		esac
		if [ -n "$version" ]; then
			[ "$line_name" = "burrow-$version-$target" ] || continue
		else
			case "$line_name" in
			burrow-*-"$target") ;;
			*) continue ;;
			esac
		fi
		found=$((found + 1))
		name=$line_name
		sum=$line_sum
	done <"$1"

	if [ "$found" -eq 0 ]; then
		if [ -n "$version" ]; then
			wanted="burrow-$version-$target"
		else
			wanted="burrow-<version>-$target"
		fi
		if [ -n "$listed" ]; then
			die "SHA256SUMS at $base/ lists no $wanted (it lists:$listed)"
		fi
		die "SHA256SUMS at $base/ lists no burrow executables: is BURROW_DOWNLOAD_BASE right?"
	fi
	if [ "$found" -gt 1 ]; then
		die "SHA256SUMS at $base/ lists several builds for $target; set BURROW_VERSION to pick one"
	fi
	case "$sum" in
	'' | *[!0-9a-fA-F]*) die "SHA256SUMS at $base/ has a malformed line for $name" ;;
	esac
	[ "${#sum}" -eq 64 ] || die "SHA256SUMS at $base/ has a malformed line for $name"
	sum=$(printf '%s\n' "$sum" | tr 'A-F' 'a-f')
	# the name becomes part of a URL: nothing but a plain file name
	case "$name" in
	*/* | *[!A-Za-z0-9._+-]*) die "SHA256SUMS at $base/ names an unexpected file '$name'" ;;
	esac
	version=${name#burrow-}
	version=${version%-"$target"}
}

# --- where to install ----------------------------------------------------------

pick_dir() {
	if [ -n "${BURROW_INSTALL_DIR:-}" ]; then
		dir=$BURROW_INSTALL_DIR
	elif [ "$(id -u 2>/dev/null || echo x)" = 0 ] || [ -w "$SYSTEM_DIR" ]; then
		dir=$SYSTEM_DIR
	else
		[ -n "${HOME:-}" ] || die "HOME is not set: set BURROW_INSTALL_DIR to say where to install"
		dir="$HOME/.local/bin"
	fi
	case "$dir" in
	/*) ;;
	*) dir="$(pwd)/$dir" ;;
	esac
	# what can be checked before downloading; the dir is created only after
	# the download is verified, so a failed run leaves nothing behind
	if [ -d "$dir" ]; then
		[ -w "$dir" ] || die "cannot write to $dir (this script never uses sudo): set BURROW_INSTALL_DIR to a directory you can write"
		[ ! -d "$dir/burrow" ] || die "$dir/burrow is a directory; not replacing it"
	elif [ -e "$dir" ]; then
		die "$dir is not a directory"
	fi
}

make_dir() {
	mkdir -p "$dir" 2>/dev/null || die "cannot create $dir: set BURROW_INSTALL_DIR to a directory you can write; nothing installed"
	dir=$(cd "$dir" && pwd) || die "cannot enter $dir; nothing installed"
	[ -w "$dir" ] || die "cannot write to $dir (this script never uses sudo): set BURROW_INSTALL_DIR to a directory you can write; nothing installed"
}

path_advice() {
	case ":${PATH:-}:" in
	*":$dir:"*)
		found_first=$(command -v burrow 2>/dev/null || true)
		if [ -n "$found_first" ] && [ "$found_first" != "$dir/burrow" ]; then
			warn "another burrow comes first on your PATH: $found_first"
		fi
		;;
	*)
		if [ -n "${HOME:-}" ] && [ "$dir" = "$HOME/.local/bin" ]; then
			# shellcheck disable=SC2016 # printed for the user to paste, unexpanded
			line='export PATH="$HOME/.local/bin:$PATH"'
		else
			line="export PATH=\"$dir:\$PATH\""
		fi
		warn "$dir is not on your PATH; add this line to your shell's startup file (~/.profile, ~/.bashrc or ~/.zshrc):"
		printf '  %s\n' "$line" >&2
		;;
	esac
}

# --- main ----------------------------------------------------------------------

main() {
	version=${BURROW_VERSION:-}
	version=${version#v}
	case "$version" in
	*[!A-Za-z0-9._+-]*) die "BURROW_VERSION '$version' is not a version (e.g. 0.1.0)" ;;
	esac
	if [ -n "${BURROW_DOWNLOAD_BASE:-}" ]; then
		base=$BURROW_DOWNLOAD_BASE
	elif [ -n "$version" ]; then
		base="$RELEASES_URL/download/v$version"
	else
		base=$DEFAULT_BASE
	fi
	while :; do
		case "$base" in
		*/) base=${base%/} ;;
		*) break ;;
		esac
	done

	if [ -n "${BURROW_TARGET:-}" ]; then
		target=$BURROW_TARGET
		check_target "$target"
	else
		detect_target
	fi
	pick_tools
	pick_dir

	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	tmp=$(mktemp -d 2>/dev/null || mktemp -d -t burrow-install) || die "cannot create a temporary directory"
	[ -d "$tmp" ] || die "cannot create a temporary directory"

	download "$base/SHA256SUMS" "$tmp/SHA256SUMS" ||
		die "cannot download $base/SHA256SUMS, which is needed to verify the download; nothing installed"
	check_signature
	find_build "$tmp/SHA256SUMS"

	say "downloading $name ($target) from $base/"
	download "$base/$name" "$tmp/burrow" || die "cannot download $base/$name; nothing installed"
	got=$(sha256_of "$tmp/burrow") || die "cannot compute the SHA-256 of $name; nothing installed"
	if [ "$got" != "$sum" ]; then
		die "checksum mismatch for $name: expected $sum, got $got; not installed"
	fi
	say "checksum ok: sha256 $sum"
	make_dir

	# staged under a temporary name beside the target, tried, then renamed over
	# it: a failed run leaves any burrow already there untouched
	stage="$dir/.burrow-install.$$"
	cp "$tmp/burrow" "$stage" || die "cannot write $stage; nothing installed"
	chmod 0755 "$stage" || die "cannot make $stage executable; nothing installed"
	if ! ran=$("$stage" --version 2>&1); then
		ran=$(printf '%s\n' "$ran" | head -n 1)
		die "$name passed its checksum but does not run on this machine ('burrow --version' failed${ran:+: $ran}); not installed"
	fi
	mv -f "$stage" "$dir/burrow" || die "cannot move $stage to $dir/burrow; nothing installed"
	stage=""

	say "installed $name (version $version) as $dir/burrow"
	say "burrow --version: $(printf '%s\n' "$ran" | head -n 1)"
	path_advice
}

main "$@"
