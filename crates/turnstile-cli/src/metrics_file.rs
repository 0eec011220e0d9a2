//! `--metrics-file PATH`: a thread that writes the Prometheus text of the gates running now
//! (`turnstile_bench::live`) to PATH every second, through `PATH.tmp` and a rename so a reader
//! never sees half a file, until the run ends.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the file is rewritten.
const PERIOD: Duration = Duration::from_secs(1);

/// The running writer; dropping it writes the file a last time and stops the thread.
pub struct MetricsFile {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for MetricsFile {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Writes `text` to `path` atomically: `path.tmp`, then a rename over `path`.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Starts the writer when `path` is given: writes the file once now (so an unwritable path
/// fails before the run starts), then every second, and once more when the run ends.
pub fn start(path: Option<&Path>) -> Result<Option<MetricsFile>, String> {
    let Some(path) = path else {
        return Ok(None);
    };
    let path = path.to_path_buf();
    write_atomically(&path, &turnstile_bench::live::prometheus())
        .map_err(|e| format!("cannot write metrics file {}: {e}", path.display()))?;
    let (tx, rx) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("metrics-file".into())
        .spawn(move || {
            let mut warned = false;
            loop {
                let last = matches!(rx.recv_timeout(PERIOD), Err(RecvTimeoutError::Disconnected));
                let text = turnstile_bench::live::prometheus();
                if let Err(e) = write_atomically(&path, &text) {
                    if !warned {
                        eprintln!("cannot write metrics file {}: {e}", path.display());
                        warned = true;
                    }
                }
                if last {
                    break;
                }
            }
        })
        .map_err(|e| format!("cannot start the metrics-file thread: {e}"))?;
    Ok(Some(MetricsFile {
        stop: Some(tx),
        thread: Some(thread),
    }))
}
