//! Checks on a statement's text before it is parsed: MySQL's executable comments opened into
//! the statement, expressions too deep for the parser's recursion refused, and `X'…'` literals
//! read as MySQL reads them.

use std::borrow::Cow;

use sqlparser::dialect::MySqlDialect;

use crate::plan_error::{excerpt, not_supported, PlanError};

/// The text the parser is to read for `sql` — its executable comments opened — once it passes
/// the checks that must come before parsing.
pub(crate) fn text_to_parse(sql: &str) -> Result<Cow<'_, str>, PlanError> {
    let text = open_executable_comments(sql).map_or(Cow::Borrowed(sql), Cow::Owned);
    check_expression_depth(&text)?;
    check_hex_literals(&text)?;
    Ok(text)
}

/// The deepest expression a statement may hold, counted in tokens: at any point of the text,
/// the tokens since the last separator (`,` `;`) of every parenthesis level still open, plus
/// the levels themselves. A parsed expression's depth cannot exceed it: each level of the tree
/// is an operator, a call or a parenthesis with at least one token at its own level or an
/// enclosing one, and a separator starts a sibling, not a child. sqlparser builds an operator
/// chain (`a+b+…`, `x IS NULL IS NULL …`, `f(1,2)+f(1,2)+…`) as a left-deep tree without
/// recursing, but its visitors, printer and the tree's drop recurse once per level, so an
/// unbounded chain would overflow a connection thread's stack and abort the process. Separators
/// inside a call's parentheses end nothing at the call's own level (a count that every comma
/// reset would let `POW(1,2)+POW(1,2)+…` through). 2,000 is far beyond any statement this
/// server runs (sysbench's reach about 20), and the deepest text it admits plans within a
/// connection thread's stack (the planner's test
/// `the_deepest_text_admitted_plans_within_a_connection_threads_stack`).
pub const MAX_EXPRESSION_DEPTH: usize = 2000;

/// Refuses a statement deeper than [`MAX_EXPRESSION_DEPTH`] before it is parsed (the
/// tokenizer does not recurse). A statement the tokenizer refuses goes on to the parser, which
/// says why.
fn check_expression_depth(sql: &str) -> Result<(), PlanError> {
    use sqlparser::tokenizer::{Token, Tokenizer};
    let Ok(tokens) = Tokenizer::new(&MySqlDialect {}, sql).tokenize() else {
        return Ok(());
    };
    // Tokens since the last separator, one entry per open parenthesis level (the first is the
    // statement's own); `depth` is their sum plus the levels opened.
    let mut levels: Vec<usize> = vec![0];
    let mut depth = 0usize;
    for t in &tokens {
        match t {
            Token::Whitespace(_) => continue,
            Token::Comma | Token::SemiColon => {
                let run = levels.last_mut().expect("the statement's level");
                depth -= *run;
                *run = 0;
                continue;
            }
            Token::RParen if levels.len() > 1 => {
                depth -= levels.pop().expect("an open level") + 1;
            }
            _ => {}
        }
        *levels.last_mut().expect("the statement's level") += 1;
        depth += 1;
        if matches!(t, Token::LParen) {
            levels.push(0);
            depth += 1;
        }
        if depth > MAX_EXPRESSION_DEPTH {
            return Err(not_supported(
                &format!("an expression deeper than {MAX_EXPRESSION_DEPTH} tokens"),
                sql,
            ));
        }
    }
    Ok(())
}

/// `X'…'` with an odd count of digits is a syntax error in MySQL (only `0x…` is padded); the
/// tokenizer reads both forms as one token, so the text is checked first.
fn check_hex_literals(sql: &str) -> Result<(), PlanError> {
    let b = sql.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if let q @ (b'\'' | b'"' | b'`') = b[i] {
            let hex = q == b'\''
                && i > 0
                && matches!(b[i - 1], b'x' | b'X')
                && (i < 2 || !(b[i - 2].is_ascii_alphanumeric() || b[i - 2] == b'_'));
            let start = i + 1;
            i += 1;
            while i < b.len() && b[i] != q {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            if hex && (i - start) % 2 == 1 {
                return Err(PlanError::Syntax(format!(
                    "You have an error in your SQL syntax near '{}'",
                    excerpt(&sql[start - 2..])
                )));
            }
        }
        i += 1;
    }
    Ok(())
}

/// MySQL's version this server answers as, for executable comments: `/*!80000 … */` runs on
/// 8.0.0 and later (`admin::VERSION` is 8.0.0).
const COMMENT_VERSION: u32 = 80000;

/// MySQL runs the text of an executable comment — `/*! … */`, or `/*!NNNNN … */` on servers
/// of version NNNNN and later — as part of the statement; sqlparser drops it as a comment,
/// which silently changed what a statement did (`DELETE … WHERE id = 3 /*! AND k = 999 */`
/// deleted row 3). Returns the text with each such comment opened (its markers blanked) and
/// other comments left for the tokenizer; `None` when there is none. Quotes and ordinary
/// comments are skipped as MySQL's lexer does, so a marker inside a string is text.
pub fn open_executable_comments(sql: &str) -> Option<String> {
    let b = sql.as_bytes();
    if !sql.contains("/*!") {
        return None;
    }
    let mut out = Vec::with_capacity(b.len());
    let (mut i, mut inside) = (0, false);
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"' | b'`') => {
                let start = i;
                i += 1;
                while i < b.len() {
                    if b[i] == b'\\' && q != b'`' {
                        i += 2;
                    } else if b[i] == q {
                        i += 1;
                        if b.get(i) != Some(&q) {
                            break;
                        }
                        i += 1;
                    } else {
                        i += 1;
                    }
                }
                out.extend_from_slice(&b[start..i.min(b.len())]);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') && !inside && b.get(i + 2) == Some(&b'!') => {
                let digits = b[i + 3..].iter().take_while(|c| c.is_ascii_digit()).count();
                let runs = match digits {
                    0 => true,
                    5 | 6 => sql[i + 3..i + 3 + digits]
                        .parse::<u32>()
                        .is_ok_and(|v| v <= COMMENT_VERSION),
                    _ => true, // `/*!1 …`: MySQL reads the digits as text
                };
                let skip = if digits == 5 || digits == 6 {
                    3 + digits
                } else {
                    3
                };
                if runs {
                    out.extend(std::iter::repeat_n(b' ', skip));
                    i += skip;
                    inside = true;
                } else {
                    // A comment for a later version: an ordinary comment.
                    let end = sql[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                    out.extend_from_slice(&b[i..end]);
                    i = end;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') && !inside => {
                let end = sql[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                out.extend_from_slice(&b[i..end]);
                i = end;
                continue;
            }
            b'*' if inside && b.get(i + 1) == Some(&b'/') => {
                out.extend_from_slice(b"  ");
                i += 2;
                inside = false;
                continue;
            }
            b'#' if !inside => {
                let end = sql[i..].find('\n').map_or(b.len(), |e| i + e);
                out.extend_from_slice(&b[i..end]);
                i = end;
                continue;
            }
            b'-' if b.get(i + 1) == Some(&b'-')
                && b.get(i + 2)
                    .is_none_or(|c| c.is_ascii_whitespace() || c.is_ascii_control())
                && !inside =>
            {
                let end = sql[i..].find('\n').map_or(b.len(), |e| i + e);
                out.extend_from_slice(&b[i..end]);
                i = end;
                continue;
            }
            c => out.push(c),
        }
        i += 1;
    }
    // Only ASCII bytes were replaced, by ASCII spaces: still UTF-8.
    Some(String::from_utf8(out).expect("ASCII replaced by ASCII"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_as_too_deep<T>(r: &Result<T, PlanError>) -> bool {
        matches!(r, Err(PlanError::NotSupported(m)) if m.contains("deeper than"))
    }

    #[test]
    fn a_chain_of_twenty_thousand_operators_of_any_kind_is_refused() {
        for chain in [
            format!("SELECT 1{}", "+1".repeat(20_000)),
            format!("SELECT c FROM t WHERE id = 1{}", " AND id = 1".repeat(600)),
            // Keyword operators, and chains through parentheses: unguarded, each would
            // overflow a connection thread's stack and abort the process.
            format!(
                "SELECT c FROM sbtest1 WHERE id = 1{}",
                " IS NULL".repeat(200_000)
            ),
            format!(
                "SELECT c FROM sbtest1 WHERE id = 1{}",
                " IN (1)".repeat(200_000)
            ),
            format!(
                "SELECT c FROM sbtest1 WHERE id = 1{}",
                " DIV 1".repeat(200_000)
            ),
            // Commas inside each term's call do not end the chain the terms make.
            format!(
                "SELECT c FROM sbtest1 WHERE id = POW(1,2){}",
                "+POW(1,2)".repeat(20_000)
            ),
            format!(
                "SELECT c FROM sbtest1 WHERE id = 1 /*! {} */",
                "+1".repeat(20_000)
            ),
        ] {
            assert!(
                refused_as_too_deep(&text_to_parse(&chain)),
                "{:?}",
                &chain[..60]
            );
        }
    }

    #[test]
    fn an_executable_comment_is_opened_and_a_marker_in_text_or_a_comment_is_not() {
        assert_eq!(
            open_executable_comments("DELETE FROM t WHERE id = 3 /*! AND k = 999 */").unwrap(),
            "DELETE FROM t WHERE id = 3     AND k = 999   "
        );
        // A version at or below ours runs; a later one is a comment.
        assert_eq!(
            open_executable_comments("SELECT 1 /*!80000 +1 */ /*!99999 +1 */").unwrap(),
            "SELECT 1          +1    /*!99999 +1 */"
        );
        // Markers inside strings and ordinary comments are text.
        assert_eq!(
            open_executable_comments("SELECT '/*! x */' /* /*! y */").unwrap(),
            "SELECT '/*! x */' /* /*! y */"
        );
        assert_eq!(open_executable_comments("SELECT 1 /* x */"), None);
    }

    #[test]
    fn an_odd_count_of_hex_digits_is_a_syntax_error_only_in_x_quotes() {
        for sql in ["SELECT X'414'", "SELECT c FROM t WHERE id = x'1'"] {
            assert!(
                matches!(text_to_parse(sql), Err(PlanError::Syntax(_))),
                "{sql}"
            );
        }
        for sql in [
            "SELECT X'41'",
            "SELECT 0x414",
            "SELECT 'x''414'",
            "SELECT ax'414'",
            "SELECT \"x'414'\"",
        ] {
            assert!(text_to_parse(sql).is_ok(), "{sql}");
        }
    }
}
