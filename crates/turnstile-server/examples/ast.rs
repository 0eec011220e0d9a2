use sqlparser::ast::{visit_expressions_mut, visit_relations_mut, Expr, Ident, ObjectName, ObjectNamePart, Value};
use std::ops::ControlFlow;
fn main() {
    let d = sqlparser::dialect::MySqlDialect {};
    for s in std::env::args().skip(1) {
        match sqlparser::parser::Parser::parse_sql(&d, &s) {
            Ok(mut v) => {
                let mut vals = Vec::new();
                let _ = visit_expressions_mut(&mut v, |e: &mut Expr| {
                    if let Expr::Value(vs) = e {
                        vals.push(vs.value.clone());
                        vs.value = Value::Placeholder("?".into());
                    }
                    ControlFlow::<()>::Continue(())
                });
                let mut tables = Vec::new();
                let _ = visit_relations_mut(&mut v, |n: &mut ObjectName| {
                    tables.push(n.to_string());
                    *n = ObjectName(vec![ObjectNamePart::Identifier(Ident::new("t"))]);
                    ControlFlow::<()>::Continue(())
                });
                println!("{s}\n  => {}\n  vals {vals:?} tables {tables:?}", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" ;; "));
                if std::env::var("DBG").is_ok() { println!("{v:#?}"); }
            }
            Err(e) => println!("{s}\nERR {e}\n"),
        }
    }
}
