//! The C API from C: compiles `tests/c/api_test.c` and docs/C_API.md's C example with the system
//! C compiler (found by the `cc` crate, as a build script would), links each against this
//! crate's staticlib (which `cargo test` builds beside the rlib: `crate-type` lists both), and
//! runs it. Under AddressSanitizer, leaks included, when the compiler and the machine support
//! it (probed first; otherwise the reason is printed and the program runs without it).
//!
//! Without a C compiler the tests print how to install one and pass: the README's test
//! command must not need a system package.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where this test's files go (`target/tmp/turnstile-ffi-c`).
fn work_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("turnstile-ffi-c");
    std::fs::create_dir_all(&dir).expect("create the C test's work directory");
    dir
}

/// The staticlib cargo built with this test's rlib, in the same profile directory
/// (`target/<profile>/deps/libturnstile_ffi.a`; cdylib and staticlib names carry no hash).
fn staticlib() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("the deps directory");
    let name = if cfg!(windows) {
        "turnstile_ffi.lib"
    } else {
        "libturnstile_ffi.a"
    };
    [deps.join(name), deps.join("..").join(name)]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} not found beside {}: is `staticlib` still in crate-type?",
                deps.display()
            )
        })
}

/// The system libraries a Rust staticlib needs (`rustc --print native-static-libs`).
fn native_libs() -> &'static [&'static str] {
    if cfg!(target_os = "macos") {
        &["-lSystem", "-lc", "-lm"]
    } else {
        &[
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
        ]
    }
}

/// The C compiler, configured by the `cc` crate for the target this crate was built for, or
/// why there is none.
fn compiler() -> Result<&'static cc::Tool, &'static str> {
    static TOOL: OnceLock<Result<cc::Tool, String>> = OnceLock::new();
    let tool = TOOL.get_or_init(|| {
        if cfg!(windows) {
            return Err("the C test links with Unix flags (pthreads); skipped on Windows".into());
        }
        let tool = cc::Build::new()
            .target(env!("TURNSTILE_FFI_TARGET"))
            .host(env!("TURNSTILE_FFI_HOST"))
            .opt_level(1)
            .debug(true)
            .cargo_metadata(false)
            .cargo_warnings(false)
            .try_get_compiler()
            .map_err(|e| e.to_string())?;
        match tool.to_command().arg("--version").output() {
            Ok(out) if out.status.success() => Ok(tool),
            Ok(_) | Err(_) => Err(format!("{} does not run", tool.path().display())),
        }
    });
    tool.as_ref().map_err(|e| e.as_str())
}

/// Compiles `sources` with `flags` and links them against the staticlib into `exe`.
fn build(tool: &cc::Tool, sources: &[&Path], flags: &[&str], exe: &Path) -> Output {
    let mut cmd = tool.to_command();
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-pthread"])
        .arg("-I")
        .arg(manifest_dir().join("include"))
        .args(flags)
        .args(sources)
        .arg(staticlib())
        .args(native_libs())
        .arg("-o")
        .arg(exe);
    cmd.output().expect("run the C compiler")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const ASAN: &[&str] = &["-fsanitize=address", "-fno-omit-frame-pointer"];
const ASAN_OPTIONS: &str = "detect_leaks=1:abort_on_error=0:exitcode=23";

/// Whether a program built with AddressSanitizer runs here with leak detection, or why not.
fn asan(tool: &cc::Tool) -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let dir = work_dir();
            let src = dir.join("asan_probe.c");
            std::fs::write(
                &src,
                "#include <stdlib.h>\nint main(void) { void *p = malloc(16); free(p); return 0; }\n",
            )
            .expect("write the ASan probe");
            let exe = dir.join("asan_probe");
            let mut cmd = tool.to_command();
            let out = cmd.args(ASAN).arg(&src).arg("-o").arg(&exe).output();
            match out {
                Ok(out) if out.status.success() => {}
                Ok(out) => return Err(format!("the compiler refuses -fsanitize=address: {}", text(&out).trim())),
                Err(e) => return Err(format!("the compiler did not run: {e}")),
            }
            let run = Command::new(&exe).env("ASAN_OPTIONS", ASAN_OPTIONS).output();
            match run {
                Ok(out) if out.status.success() => Ok(()),
                Ok(out) => Err(format!("an ASan program does not run here: {}", text(&out).trim())),
                Err(e) => Err(format!("an ASan program does not run here: {e}")),
            }
        })
        .clone()
}

/// Builds `sources` into `name` (under ASan when it works here) and runs it; returns its
/// output, or `None` when there is no C compiler.
fn build_and_run(name: &str, sources: &[&Path]) -> Option<String> {
    let tool = match compiler() {
        Ok(tool) => tool,
        Err(why) => {
            eprintln!(
                "SKIPPED {name}: no usable C compiler ({why}). Install one to run it, e.g. \
                 `apt-get install gcc` (Debian, Ubuntu) or `xcode-select --install` (macOS)."
            );
            return None;
        }
    };
    let exe = work_dir().join(name);
    let sanitized = match asan(tool) {
        Ok(()) => {
            let out = build(tool, sources, ASAN, &exe);
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "linking with -fsanitize=address failed: {}",
                    text(&out).trim()
                ))
            }
        }
        Err(why) => Err(why),
    };
    let mut run = Command::new(&exe);
    match &sanitized {
        Ok(()) => {
            eprintln!("{name}: built with AddressSanitizer (leak detection on)");
            run.env("ASAN_OPTIONS", ASAN_OPTIONS);
        }
        Err(why) => {
            eprintln!("{name}: running without AddressSanitizer: {why}");
            let out = build(tool, sources, &[], &exe);
            assert!(
                out.status.success(),
                "{name} does not compile:\n{}",
                text(&out)
            );
        }
    }
    let out = run.output().expect("run the C program");
    let output = text(&out);
    assert!(
        out.status.success(),
        "{name} failed ({}):\n{output}",
        out.status
    );
    println!("{output}");
    Some(output)
}

#[test]
fn c_program_checks_statuses_misuse_limits_counters_and_leaks_under_threads() {
    let src = manifest_dir().join("tests/c/api_test.c");
    if let Some(output) = build_and_run("api_test", &[&src]) {
        assert!(output.contains("ok: "), "{output}");
        for policy in ["classic", "polling", "flifo", "timer", "unlimited"] {
            assert!(
                output.contains(&format!("{policy:<9}")),
                "no {policy} run:\n{output}"
            );
        }
    }
}

/// docs/C_API.md's C example, between the markers, compiles as written and runs.
#[test]
fn doc_c_example_compiles_and_runs() {
    let doc =
        std::fs::read_to_string(manifest_dir().join("../../docs/C_API.md")).expect("docs/C_API.md");
    let start =
        "<!-- c-example: compiled and run by crates/turnstile-ffi/tests/c_api.rs -->\n```c\n";
    let begin = doc.find(start).expect("docs/C_API.md's C example marker") + start.len();
    let len = doc[begin..]
        .find("```")
        .expect("the end of docs/C_API.md's C example");
    let src = work_dir().join("doc_example.c");
    std::fs::write(&src, &doc[begin..begin + len]).expect("write the docs/C_API.md example");
    if let Some(output) = build_and_run("doc_example", &[&src]) {
        assert!(output.contains("queries inside"), "{output}");
    }
}
