//! `include/turnstile.h` is exactly what cbindgen generates from this crate's source.
//!
//! With `TURNSTILE_REGEN_HEADER=1` the test rewrites the header instead of comparing (then
//! `git diff --exit-code` on it tells whether the checked-in one was current: `.ci/run`).

use std::path::Path;

#[test]
fn checked_in_header_is_what_cbindgen_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_crate(dir)
        .generate()
        .expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let path = dir.join("include/turnstile.h");
    if std::env::var_os("TURNSTILE_REGEN_HEADER").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write include/turnstile.h");
        return;
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/turnstile.h is not what cbindgen generates from src/: regenerate it with\n  \
         TURNSTILE_REGEN_HEADER=1 cargo test -p turnstile-ffi --release --test header"
    );
}
