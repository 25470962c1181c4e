#!/usr/bin/env bash
# aws-lc.sh DEST - AWS-LC's libcrypto for the sleeve's AES-256-GCM (make AWSLC=DEST).
#
# AWS-LC (Amazon's fork of BoringSSL, FIPS-validated) seals AES-256-GCM with VAES and
# VPCLMULQDQ where the CPU has them; Debian 12's OpenSSL 3.0 does not. Debian does not
# package it, so its source comes from the one place this project's machines reach: the
# source distribution of awscrt on PyPI (AWS's CRT bindings, which vendor AWS-LC at
# crt/aws-lc), pinned by version and SHA-256. Built static with the generated assembly
# (no Go, no Perl), then every global symbol renamed with the prefix svlc_, so the
# library links beside the system's libcrypto without a clash.
#
# DEST gets include/, lib/libsvlc.a and VERSION; an existing complete DEST is left as
# it is. Needs cmake, gcc, make, objcopy and a python with pip (PYTHON, default python3).
set -euo pipefail

AWSCRT_VERSION=0.38.1
AWSCRT_SHA256=0dcebfaa70cf079133cd2352119e3d05e9b8ca1d1621736cfb54c03f3d5fef0f
AWSLC_VERSION=5.12.0        # what that awscrt vendors (include/openssl/base.h)

dest=${1:?usage: aws-lc.sh DEST}
python=${PYTHON:-python3}
if [ -f "$dest/lib/libsvlc.a" ] && [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$AWSLC_VERSION" ]; then
	exit 0
fi
for t in cmake make objcopy nm "$python"; do
	command -v "$t" >/dev/null || { echo "aws-lc.sh: $t not found (apt-get install -y cmake binutils make)" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/overlaybench-aws-lc-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "awscrt==$AWSCRT_VERSION --hash=sha256:$AWSCRT_SHA256" >"$work/req.txt"
# pip: it honours the machine's index and proxy settings (and checks the hash)
"$python" -m pip download -q --no-deps --no-binary :all: --require-hashes -r "$work/req.txt" -d "$work/dl" \
	>"$work/pip.log" 2>&1 || { tail -n 5 "$work/pip.log" >&2; exit 1; }
tar -xzf "$work/dl/awscrt-$AWSCRT_VERSION.tar.gz" -C "$work" "awscrt-$AWSCRT_VERSION/crt/aws-lc"
src="$work/awscrt-$AWSCRT_VERSION/crt/aws-lc"
got=$(sed -n 's/^#define AWSLC_VERSION_NUMBER_STRING "\(.*\)"/\1/p' "$src/include/openssl/base.h")
[ "$got" = "$AWSLC_VERSION" ] || { echo "aws-lc.sh: awscrt $AWSCRT_VERSION vendors AWS-LC $got, not $AWSLC_VERSION" >&2; exit 1; }

cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DBUILD_TOOL=OFF \
	-DBUILD_LIBSSL=OFF -DDISABLE_GO=ON -DDISABLE_PERL=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON >"$work/cmake.log" 2>&1 ||
	{ tail -n 5 "$work/cmake.log" >&2; exit 1; }
make -s -C "$work/build" -j"$(nproc)" crypto >"$work/make.log" 2>&1 || { tail -n 5 "$work/make.log" >&2; exit 1; }

# Every symbol the archive defines, renamed in definitions and references alike; what
# it only uses (libc) keeps its name.
lib="$work/build/crypto/libcrypto.a"
nm -g --defined-only "$lib" 2>/dev/null | awk 'NF == 3 { print $3 " svlc_" $3 }' | sort -u >"$work/syms"
mkdir -p "$work/out/lib"
objcopy --redefine-syms="$work/syms" "$lib" "$work/out/lib/libsvlc.a"
cp -r "$src/include" "$work/out/include"
echo "$AWSLC_VERSION" >"$work/out/VERSION"
mkdir -p "$(dirname "$dest")"
rm -rf "$dest"
mv "$work/out" "$dest"
echo "aws-lc.sh: AWS-LC $AWSLC_VERSION in $dest"
