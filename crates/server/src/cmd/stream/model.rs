//! Stream IDs and trimming against a model of Redis's own structure: a list of listpack
//! nodes whose entries are marked deleted (never removed) until their node goes, nodes
//! started when the last one holds `stream-node-max-entries` entries, and Redis's
//! `streamTrim` run over them. Random appends (explicit and `ms-*` IDs), deletions and
//! trims (`MAXLEN`/`MINID`, `=`/`~`, `LIMIT`) must leave the server's stream with the
//! model's entries, length, first, last and largest deleted IDs and counters.

use crate::cmd::dispatch;
use crate::config::Config;
use crate::protocol::Reply;
use crate::session::Session;
use crate::shared::Shared;
use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, TestRunner};

type Id = (u64, u64);

#[derive(Default)]
struct Model {
    /// Nodes: entries with their deleted flag.
    nodes: Vec<Vec<(Id, bool)>>,
    length: u64,
    last: Id,
    first: Id,
    max_deleted: Id,
    added: u64,
}

#[derive(Clone, Debug)]
enum Op {
    /// Milliseconds ahead of the last ID, and whether the sequence is left to the stream.
    Add(u64, bool),
    Del(usize),
    Trim {
        maxlen: bool,
        value: u64,
        approx: bool,
        limit: Option<u64>,
        add: bool,
    },
}

impl Model {
    fn live(&self) -> Vec<Id> {
        self.nodes
            .iter()
            .flatten()
            .filter(|(_, d)| !d)
            .map(|(id, _)| *id)
            .collect()
    }

    fn add(&mut self, id: Id, max_entries: usize) {
        match self.nodes.last_mut() {
            Some(n) if n.len() < max_entries => n.push((id, false)),
            _ => self.nodes.push(vec![(id, false)]),
        }
        self.length += 1;
        self.added += 1;
        self.last = id;
        if self.length == 1 {
            self.first = id;
        }
    }

    fn del(&mut self, id: Id) -> bool {
        for i in 0..self.nodes.len() {
            if let Some(e) = self.nodes[i].iter_mut().find(|(x, d)| *x == id && !d) {
                e.1 = true;
                if self.nodes[i].iter().all(|(_, d)| *d) {
                    self.nodes.remove(i);
                }
                self.length -= 1;
                self.max_deleted = self.max_deleted.max(id);
                if self.length == 0 {
                    self.first = (0, 0);
                } else if id == self.first {
                    self.first = self.live()[0];
                }
                return true;
            }
        }
        false
    }

    /// Redis's `streamTrim`.
    fn trim(&mut self, maxlen: Option<u64>, minid: Option<Id>, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0;
        while !self.nodes.is_empty() {
            if maxlen.is_some_and(|m| self.length <= m) {
                break;
            }
            let entries = self.nodes[0].iter().filter(|(_, d)| !d).count() as u64;
            if limit > 0 && deleted + entries > limit {
                break;
            }
            let remove = match (maxlen, minid) {
                (Some(m), _) => self.length - entries >= m,
                (_, Some(min)) => self.nodes[0].last().unwrap().0 < min,
                _ => unreachable!(),
            };
            if remove {
                self.nodes.remove(0);
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            for e in self.nodes[0].iter_mut() {
                let stop = match (maxlen, minid) {
                    (Some(m), _) => self.length <= m,
                    (_, Some(min)) => e.0 >= min,
                    _ => unreachable!(),
                };
                if stop {
                    break;
                }
                if !e.1 {
                    e.1 = true;
                    self.length -= 1;
                    deleted += 1;
                }
            }
            break;
        }
        if self.length == 0 {
            self.first = (0, 0);
        } else if deleted > 0 {
            self.first = self.live()[0];
        }
        deleted
    }
}

fn run(sh: &Shared, s: &mut Session, args: &[String]) -> Reply {
    let args: Vec<Bytes> = args
        .iter()
        .map(|a| Bytes::from(a.clone().into_bytes()))
        .collect();
    dispatch::execute(sh, s, &args).0
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn id_text((ms, seq): Id) -> String {
    format!("{ms}-{seq}")
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u64..3, any::<bool>()).prop_map(|(ms, auto)| Op::Add(ms, auto)),
        2 => (0usize..64).prop_map(Op::Del),
        2 => (any::<bool>(), 0u64..40, any::<bool>(), prop::option::of(0u64..12), any::<bool>())
            .prop_map(|(maxlen, value, approx, limit, add)| Op::Trim { maxlen, value, approx, limit, add }),
    ]
}

#[test]
fn stream_ids_and_trimming_follow_redis() {
    let mut runner = TestRunner::new(PtConfig {
        cases: 40,
        failure_persistence: None,
        ..PtConfig::default()
    });
    let t = tempfile::tempdir().unwrap();
    let db = engine::DB::open(t.path(), engine::Options::default()).unwrap();
    let sh = Shared::for_test(db, &Config::default());
    let case = std::cell::Cell::new(0u32);
    runner
        .run(
            &((1usize..6), prop::collection::vec(op(), 1..80)),
            |(max_entries, ops)| {
                case.set(case.get() + 1);
                let key = format!("s{}", case.get());
                let mut s = Session::new(1);
                run(
                    &sh,
                    &mut s,
                    &strs(&[
                        "CONFIG",
                        "SET",
                        "stream-node-max-entries",
                        &max_entries.to_string(),
                    ]),
                );
                let mut m = Model::default();
                for op in ops {
                    match op {
                        Op::Add(ahead, auto) => {
                            let ms = m.last.0 + ahead;
                            let id = if ms == m.last.0 {
                                (ms, m.last.1 + 1)
                            } else {
                                (ms, 0)
                            };
                            let arg = if auto { format!("{ms}-*") } else { id_text(id) };
                            let r = run(&sh, &mut s, &strs(&["XADD", &key, &arg, "f", "v"]));
                            prop_assert_eq!(r, Reply::bulk(id_text(id)));
                            m.add(id, max_entries);
                        }
                        Op::Del(i) => {
                            let all = m.live();
                            let id = all.get(i).copied().unwrap_or((m.last.0 + 1, 0));
                            let want = m.del(id);
                            let r = run(&sh, &mut s, &strs(&["XDEL", &key, &id_text(id)]));
                            prop_assert_eq!(r, Reply::Int(want as i64));
                        }
                        Op::Trim {
                            maxlen,
                            value,
                            approx,
                            limit,
                            add,
                        } => {
                            let limit = if approx { limit } else { None };
                            let mut args = strs(&[if add { "XADD" } else { "XTRIM" }, &key]);
                            let threshold = if maxlen {
                                value.to_string()
                            } else {
                                format!("{}-0", m.first.0 + value / 4)
                            };
                            args.extend(strs(&[
                                if maxlen { "MAXLEN" } else { "MINID" },
                                if approx { "~" } else { "=" },
                                &threshold,
                            ]));
                            if let Some(l) = limit {
                                args.extend(strs(&["LIMIT", &l.to_string()]));
                            }
                            let default_limit = if approx { 100 * max_entries as u64 } else { 0 };
                            let (mx, mn) = if maxlen {
                                (Some(value), None)
                            } else {
                                (None, Some((m.first.0 + value / 4, 0)))
                            };
                            if add {
                                let id = (m.last.0 + 1, 0);
                                args.extend(strs(&[&id_text(id), "f", "v"]));
                                let r = run(&sh, &mut s, &args);
                                prop_assert_eq!(r, Reply::bulk(id_text(id)));
                                m.add(id, max_entries);
                                m.trim(mx, mn, approx, limit.unwrap_or(default_limit));
                            } else {
                                let want = m.trim(mx, mn, approx, limit.unwrap_or(default_limit));
                                let r = run(&sh, &mut s, &args);
                                if m.added == 0 {
                                    prop_assert_eq!(r, Reply::Int(0));
                                } else {
                                    prop_assert_eq!(r, Reply::Int(want as i64));
                                }
                            }
                        }
                    }
                    if m.added == 0 {
                        continue;
                    }
                    let live: Vec<Reply> = m
                        .live()
                        .into_iter()
                        .map(|id| {
                            Reply::Array(vec![
                                Reply::bulk(id_text(id)),
                                Reply::Array(vec![Reply::bulk("f"), Reply::bulk("v")]),
                            ])
                        })
                        .collect();
                    prop_assert_eq!(
                        run(&sh, &mut s, &strs(&["XLEN", &key])),
                        Reply::Int(m.length as i64)
                    );
                    prop_assert_eq!(
                        run(&sh, &mut s, &strs(&["XRANGE", &key, "-", "+"])),
                        Reply::Array(live.clone())
                    );
                    let mut rev = live.clone();
                    rev.reverse();
                    prop_assert_eq!(
                        run(&sh, &mut s, &strs(&["XREVRANGE", &key, "+", "-"])),
                        Reply::Array(rev.clone())
                    );
                    if !rev.is_empty() {
                        prop_assert_eq!(
                            run(
                                &sh,
                                &mut s,
                                &strs(&["XREVRANGE", &key, "+", "-", "COUNT", "1"])
                            ),
                            Reply::Array(vec![rev[0].clone()])
                        );
                    }
                    let Reply::Map(info) = run(&sh, &mut s, &strs(&["XINFO", "STREAM", &key]))
                    else {
                        return Err(TestCaseError::fail("XINFO STREAM is a map"));
                    };
                    let get = |name: &str| {
                        info.iter()
                            .find(|(k, _)| *k == Reply::bulk(name.to_string()))
                            .map(|(_, v)| v.clone())
                    };
                    prop_assert_eq!(get("last-generated-id"), Some(Reply::bulk(id_text(m.last))));
                    prop_assert_eq!(
                        get("recorded-first-entry-id"),
                        Some(Reply::bulk(id_text(m.first)))
                    );
                    prop_assert_eq!(
                        get("max-deleted-entry-id"),
                        Some(Reply::bulk(id_text(m.max_deleted)))
                    );
                    prop_assert_eq!(get("entries-added"), Some(Reply::Int(m.added as i64)));
                }
                Ok(())
            },
        )
        .unwrap();
}
