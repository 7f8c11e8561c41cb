#!/bin/bash
# bundle.sh - `make bundle`: libfaultnet.so and every library it loads at run
# time, in one folder that can be mounted read-only into a glibc image (a
# container whose image has none of them): BUILD/bundle.
#   The libraries the shim dlopens are found by their sonames, read from the
#   sources (every "libNAME.so.N" string in core/ and preload/ but those on
#   a line that only looks one up with RTLD_NOLOAD), so one added
#   there is bundled without a change here; each is copied from where this
#   machine's loader finds it, with every library it needs in turn, except
#   the C library's own (libc, libm, libdl, libpthread, libresolv, ...: the
#   image's are used, and checked by faultctl, see ctl/bundle.c).
#   Each copy's RUNPATH is set to $ORIGIN (patchelf), so that the loader
#   finds the bundle's libraries by their sonames first, from the shim's
#   dlopen and from one bundled library needing another.
#   faultnet-bundle.txt says what the bundle needs of the image: the
#   machine ("arch x86_64"), the newest GLIBC_ symbol version any file
#   needs ("glibc 2.34"), and each file's soname and origin.
# usage: bundle.sh BUILD_DIR
set -eu
build=${1:?usage: bundle.sh BUILD_DIR}
src=$(cd "$(dirname "$0")/.." && pwd)
shim=$build/libfaultnet.so
out=$build/bundle
[ -f "$shim" ] || { echo "bundle: $shim is not built" >&2; exit 1; }
command -v patchelf >/dev/null 2>&1 || { echo "bundle: patchelf is missing (apt-get install patchelf)" >&2; exit 1; }

# glibc's own sonames: never bundled (the image's C library serves them).
is_libc() {
	case $1 in
	linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
		libresolv.so.* | librt.so.* | libutil.so.* | libanl.so.* | libnsl.so.* | libmvec.so.*) return 0 ;;
	esac
	return 1
}

# Where this machine's loader finds a soname.
where() { /sbin/ldconfig -p | awk -v s="$1" '$1 == s && /x86-64|libc6,/ { print $NF; exit }'; }

# A soname only looked up in the process (dlopen with RTLD_NOLOAD: the
# app's own GnuTLS, never loaded by the shim) is not one the shim loads.
sonames=$(grep -rhE '"lib[A-Za-z0-9_+-]+\.so\.[0-9.]+"' "$src/core" "$src/preload" --include='*.c' |
	grep -v RTLD_NOLOAD | grep -oE '"lib[A-Za-z0-9_+-]+\.so\.[0-9.]+"' | tr -d '"' | sort -u)
declare -A have=()
queue=()
for s in $sonames; do queue+=("$s"); done
# The shim's own link-time needs (none outside glibc today; kept honest).
for s in $(ldd "$shim" | awk '{print $1}'); do s=${s##*/}; is_libc "$s" || queue+=("$s"); done

rm -rf "$out.tmp" && mkdir -p "$out.tmp"
manifest=$out.tmp/faultnet-bundle.txt
: >"$manifest.files"
while [ ${#queue[@]} -gt 0 ]; do
	s=${queue[0]}
	queue=("${queue[@]:1}")
	[ -n "${have[$s]:-}" ] && continue
	is_libc "$s" && continue
	f=$(where "$s")
	if [ -z "$f" ]; then
		echo "bundle: $s (loaded by the shim) is not installed on this machine" >&2
		exit 1
	fi
	have[$s]=$f
	cp -L "$f" "$out.tmp/$s"
	echo "lib $s $(readlink -f "$f")" >>"$manifest.files"
	for d in $(ldd "$f" | awk '$2 == "=>" {print $1}'); do queue+=("$d"); done
done
cp "$shim" "$out.tmp/libfaultnet.so"
for f in "$out.tmp"/*.so*; do
	patchelf --set-rpath '$ORIGIN' "$f"
	chmod 0644 "$f"
done
# The newest GLIBC_x.y any bundled file needs of the image's C library.
glibc=$(for f in "$out.tmp"/*.so*; do readelf -V --wide "$f"; done |
	grep -oE 'Name: GLIBC_[0-9]+\.[0-9]+(\.[0-9]+)?' | sed 's/Name: GLIBC_//' | sort -V | tail -1)
{
	echo "# faultnet bundle: libfaultnet.so and the libraries it loads (scripts/bundle.sh)"
	echo "arch $(uname -m)"
	echo "glibc $glibc"
	sort "$manifest.files"
} >"$manifest"
rm -f "$manifest.files"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "bundle: $out: $(ls "$out" | grep -c '\.so') files, needs glibc $glibc or newer"
