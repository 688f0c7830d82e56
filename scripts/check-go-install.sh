#!/usr/bin/env bash
# Proves that `go install github.com/rmqguard/rmqguard/cmd/rmqguard@<version>` works for the module as it is
# committed (HEAD), without a public proxy: it builds a GOPROXY of files in a temporary directory holding
# this module at a pseudo-version (v0.0.0-<commit time>-<commit>: .info, .mod, and the module zip made by
# `git archive` with the module@version/ prefix), plus an @latest answer; dependencies come from the local
# module cache's download directory, which has the proxy layout. Then, with an empty module cache and
# GOBIN of its own, it runs `go install …@latest` and `rmqguard --help`. The checksum database is off
# (GOSUMDB=off): this module is not in it, and from here sum.golang.org may be unreachable; what is
# proved is that the go command accepts the module (no replace/exclude directives, a valid module zip)
# and that the command builds from it alone. Needs the dependencies in the module cache (any
# `go build ./...` puts them there). Exit 0 on success.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
module=github.com/rmqguard/rmqguard

tmp="$(mktemp -d)"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
commit="$(git rev-parse HEAD)"
stamp="$(TZ=UTC git show -s --format=%cd --date=format-local:%Y%m%d%H%M%S "$commit")"
version="v0.0.0-${stamp}-${commit:0:12}"
time="$(TZ=UTC git show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ "$commit")"

dir="$tmp/proxy/$module/@v"
mkdir -p "$dir"
printf '{"Version":"%s","Time":"%s"}\n' "$version" "$time" >"$dir/$version.info"
cp "$dir/$version.info" "$tmp/proxy/$module/@latest"
git show "$commit:go.mod" >"$dir/$version.mod"
git archive --format=zip --prefix="$module@$version/" -o "$dir/$version.zip" "$commit"
: >"$dir/list" # no tagged versions: @latest is answered by the @latest file

cache="$(go env GOMODCACHE)/cache/download"
export GOPROXY="file://$tmp/proxy,file://$cache" GOSUMDB=off GOFLAGS="" \
	GOMODCACHE="$tmp/modcache" GOBIN="$tmp/bin"
echo "check-go-install: go install $module/cmd/rmqguard@latest (= $version, from a file proxy)"
go install "$module/cmd/rmqguard@latest"
"$tmp/bin/rmqguard" --help >"$tmp/help.txt"
grep -q "topic" "$tmp/help.txt" || { echo "check-go-install: rmqguard --help does not list its commands" >&2; cat "$tmp/help.txt" >&2; exit 1; }
echo "check-go-install: ok ($module/cmd/rmqguard@$version installed and ran --help)"
