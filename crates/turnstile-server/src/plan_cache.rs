//! A connection's plans of text statements, kept by template (the statement's literals made
//! parameters), so that text statements differing only by their literals are planned once.

use std::collections::HashMap;
use std::sync::Arc;

use crate::sql::{self, Lit, Plan, PlanError};

/// Plans of text statements kept per connection, by template (literals made parameters): a
/// sysbench run in text mode uses about a dozen; 256 leaves room for other clients' statements,
/// and the cache is emptied when full. A hit costs a few percent of a plan (the scan and one
/// lookup against parsing; docs/BENCHMARKS.md has the figures).
const TEXT_CACHE: usize = 256;

/// The longest statement text the plan cache keeps (bytes): sysbench's statements are under
/// 300 bytes as templates; 16 KiB bounds a connection's cache at 4 MiB of keys.
const TEXT_CACHE_KEY: usize = 16 * 1024;

/// One connection's text plans, by template, or by text for text no template stands for.
#[derive(Default)]
pub(crate) struct PlanCache(HashMap<String, Arc<Plan>>);

impl PlanCache {
    /// The plan for a text statement and its arguments: the statement's template (its
    /// literals made parameters, [`sql::normalize`]) from the cache, or planned and cached;
    /// text the template cannot stand for is planned as it is (and cached by its text).
    pub(crate) fn plan(&mut self, sql: &str) -> Result<(Arc<Plan>, Vec<Lit>), PlanError> {
        // A text with `?` can equal a template's key: that plan's parameters are not its own.
        if let Some(p) = self.0.get(sql).filter(|p| p.params == 0) {
            return Ok((p.clone(), Vec::new()));
        }
        if let Some((template, lits)) = sql::normalize(sql) {
            if let Some(p) = self.0.get(&template) {
                return Ok((p.clone(), lits));
            }
            if let Ok(p) = sql::plan(&template) {
                if p.params == lits.len() {
                    let p = Arc::new(p);
                    self.keep(template, p.clone());
                    return Ok((p, lits));
                }
            }
        }
        let p = Arc::new(sql::plan(sql)?);
        if p.params > 0 {
            return Err(PlanError::Syntax(
                "'?' placeholders are only accepted in prepared statements".into(),
            ));
        }
        self.keep(sql.to_string(), p.clone());
        Ok((p, Vec::new()))
    }

    fn keep(&mut self, key: String, p: Arc<Plan>) {
        // A long text (a statement carrying a large literal) is planned, not kept: the cache
        // holds at most `TEXT_CACHE` keys of at most `TEXT_CACHE_KEY` bytes, a few MiB per
        // connection, not `TEXT_CACHE` × `max_allowed_packet`.
        if key.len() > TEXT_CACHE_KEY {
            return;
        }
        if self.0.len() >= TEXT_CACHE {
            self.0.clear();
        }
        self.0.insert(key, p);
    }
}
