#!/bin/sh
# Installs libpacer (shared and static), pacer.h and pacer.pc under PREFIX (default /usr/local),
# so applications build with `cc app.c $(pkg-config --cflags --libs pacer)`.
# Usage: dist/install-client.sh [PREFIX]
set -eu
prefix=${1:-/usr/local}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --release -p pacer-client
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
install -d "$prefix/lib" "$prefix/include" "$prefix/lib/pkgconfig"
install -m 0755 target/release/libpacer.so "$prefix/lib/libpacer.so.0"
ln -sf libpacer.so.0 "$prefix/lib/libpacer.so"
install -m 0644 target/release/libpacer.a "$prefix/lib/libpacer.a"
install -m 0644 crates/client/include/pacer.h "$prefix/include/pacer.h"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" crates/client/pacer.pc.in > "$prefix/lib/pkgconfig/pacer.pc"
echo "installed libpacer $version under $prefix"
