//! What the machine is: CPUs, kernel, load from other processes while the calibration ran, and
//! the date it ran, recorded beside the figures so they can be told apart later.

use std::time::{SystemTime, UNIX_EPOCH};

use super::Host;

pub(super) fn host_info(cpus: usize, pinned_cpu: usize) -> Host {
    let (sysname, release, version, arch) = uname();
    // SAFETY: sysconf only reads a configuration value.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    Host {
        cpus_available: cpus,
        cpus_online: usize::try_from(online).unwrap_or(0),
        cpu_model,
        kernel: format!("{sysname} {release}"),
        kernel_version: version,
        arch,
        date: utc_date(SystemTime::now()),
        pinned_cpu,
        others_cpu_share: 0.0,
        steal_share: 0.0,
    }
}

/// CPU time so far, in clock ticks (`/proc/stat` and `/proc/self/stat` share the unit).
#[derive(Debug, Clone, Copy)]
pub(super) struct CpuTimes {
    /// All CPUs, every column (idle included).
    pub(super) total: u64,
    /// All CPUs, busy: user, nice, system, irq, softirq.
    pub(super) busy: u64,
    /// All CPUs, stolen by the hypervisor.
    pub(super) steal: u64,
    /// This process, user + system (its finished threads included).
    pub(super) ours: u64,
}

impl CpuTimes {
    pub(super) fn now() -> Option<CpuTimes> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let cols: Vec<u64> = stat
            .lines()
            .next()?
            .strip_prefix("cpu ")?
            .split_whitespace()
            .map(|v| v.parse().ok())
            .collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal [guest guest_nice: inside user/nice]
        let col = |i: usize| cols.get(i).copied().unwrap_or(0);
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the ")" that closes the command name: state is field 3, so utime
        // (field 14) and stime (15) are the 12th and 13th after it.
        let mut after = own.rsplit_once(')')?.1.split_whitespace().skip(11);
        let utime: u64 = after.next()?.parse().ok()?;
        let stime: u64 = after.next()?.parse().ok()?;
        Some(CpuTimes {
            total: (0..8).map(col).sum(),
            busy: col(0) + col(1) + col(2) + col(5) + col(6),
            steal: col(7),
            ours: utime + stime,
        })
    }
}

/// `uname(2)`: (sysname, release, version, machine).
pub(super) fn uname() -> (String, String, String, String) {
    // SAFETY: `utsname` is arrays of C chars, for which all-zero bytes is valid.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes NUL-terminated strings into the `utsname` we own and pass.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Default::default();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (
        field(&u.sysname),
        field(&u.release),
        field(&u.version),
        field(&u.machine),
    )
}

/// `t` as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn utc_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days: days since 1970-01-01 → (year, month, day).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn cpu_times_read_from_proc() {
        let t = CpuTimes::now().expect("/proc/stat and /proc/self/stat parse");
        assert!(t.total >= t.busy + t.steal);
    }

    #[test]
    fn utc_dates_match_known_instants() {
        assert_eq!(utc_date(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_661); // 2000-02-29 01:01:01
        assert_eq!(utc_date(t), "2000-02-29T01:01:01Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_735_689_599); // last second of 2024
        assert_eq!(utc_date(t), "2024-12-31T23:59:59Z");
    }
}
