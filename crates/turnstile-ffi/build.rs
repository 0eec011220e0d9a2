//! Passes the target and host triples to the C test (`tests/c_api.rs`), which configures the
//! `cc` crate with them to find the C compiler cargo would use for this target.

fn main() {
    for var in ["TARGET", "HOST"] {
        let value = std::env::var(var).unwrap_or_default();
        println!("cargo:rustc-env=TURNSTILE_FFI_{var}={value}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
