//! Gives the shared library the soname `libpacer.so.0`, so programs linked against it keep
//! working across compatible updates (the C ABI of `include/pacer.h`).

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libpacer.so.0");
}
