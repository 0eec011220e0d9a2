//! The names of the secondary indexes created on each table. The engine keeps one index on
//! `k` whatever it is called, but MySQL refuses a second index of the same name (1061), so
//! the names are remembered — in a file of the data directory, so that the answer is the same
//! after a restart: one `table<TAB>NAME` line each, names upper-cased (MySQL compares index
//! names case-insensitively).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The index names of every table, kept in step with their file.
pub(crate) struct IndexNames {
    path: PathBuf,
    names: Mutex<BTreeMap<String, BTreeSet<String>>>,
}

impl IndexNames {
    /// Reads `dir`'s file; none yet is no index.
    pub(crate) fn open(dir: &Path) -> io::Result<IndexNames> {
        let path = dir.join("index-names");
        let mut names: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                for line in text.lines() {
                    if let Some((t, n)) = line.split_once('\t') {
                        names
                            .entry(t.to_string())
                            .or_default()
                            .insert(n.to_string());
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(IndexNames {
            path,
            names: Mutex::new(names),
        })
    }

    /// Records `name` on `table`; `Ok(false)` if the table has an index of that name.
    pub(crate) fn add(&self, table: &str, name: &str) -> io::Result<bool> {
        let mut names = self.names.lock().expect("index names");
        if !names
            .entry(table.to_string())
            .or_default()
            .insert(name.to_ascii_uppercase())
        {
            return Ok(false);
        }
        Self::write(&self.path, &names)?;
        Ok(true)
    }

    /// Forgets `table`'s indexes (it was dropped).
    pub(crate) fn drop_table(&self, table: &str) -> io::Result<()> {
        let mut names = self.names.lock().expect("index names");
        if names.remove(table).is_some() {
            Self::write(&self.path, &names)?;
        }
        Ok(())
    }

    /// Rewrites the file whole through a temporary one, so that a crash leaves the old list
    /// or the new one, never a torn one.
    fn write(path: &Path, names: &BTreeMap<String, BTreeSet<String>>) -> io::Result<()> {
        let mut text = String::new();
        for (t, ns) in names {
            for n in ns {
                text.push_str(&format!("{t}\t{n}\n"));
            }
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_index_of_a_name_is_refused_also_after_reopening_and_a_drop_forgets_them() {
        let dir =
            std::env::temp_dir().join(format!("turnstile-index-names-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ix = IndexNames::open(&dir).unwrap();
        assert!(ix.add("sbtest1", "k_1").unwrap());
        assert!(
            !ix.add("sbtest1", "K_1").unwrap(),
            "names are case-insensitive"
        );
        assert!(ix.add("sbtest2", "k_1").unwrap(), "per table");
        let ix = IndexNames::open(&dir).unwrap();
        assert!(!ix.add("sbtest1", "k_1").unwrap(), "kept across a restart");
        ix.drop_table("sbtest1").unwrap();
        assert!(ix.add("sbtest1", "k_1").unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
