//! `LATENCY LATEST|HISTORY|RESET|DOCTOR|GRAPH|HISTOGRAM|HELP`: the latency monitor
//! ([`crate::latency`]) and the per-command latency distributions of
//! [`crate::cmdstats`].

use super::table::c;
use super::{text, wrong_args, CmdResult, Ctx};
use crate::protocol::Reply;
use bytes::Bytes;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("latency", -2, [ADMIN NOSCRIPT LOADING STALE SUBCOMMANDS], 0, 0, 0, Server, latency),
];

fn latency(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let m = &cx.sh.latency;
    let sub = text(&a[0]).to_ascii_lowercase();
    let rest = &a[1..];
    let names = || rest.iter().map(|n| text(n)).collect::<Vec<_>>();
    match (sub.as_str(), rest) {
        ("latest", []) => Ok(Reply::Array(
            m.latest()
                .into_iter()
                .map(|(e, s, max)| {
                    Reply::Array(vec![
                        Reply::bulk(e),
                        Reply::Int(s.time),
                        Reply::Int(s.ms as i64),
                        Reply::Int(max as i64),
                    ])
                })
                .collect(),
        )),
        ("history", [event]) => Ok(Reply::Array(
            m.history(&text(event).to_ascii_lowercase())
                .into_iter()
                .map(|s| Reply::Array(vec![Reply::Int(s.time), Reply::Int(s.ms as i64)]))
                .collect(),
        )),
        ("reset", _) => Ok(Reply::Int(m.reset(&names()) as i64)),
        ("doctor", []) => Ok(Reply::Text(m.doctor())),
        ("graph", [event]) => match m.graph(&text(event).to_ascii_lowercase()) {
            Some(g) => Ok(Reply::Text(g)),
            None => Err(Reply::err(format!(
                "No samples available for event '{}'",
                text(event)
            ))),
        },
        ("histogram", _) => Ok(Reply::Map(
            cx.sh
                .cmdstats
                .histograms(&names())
                .into_iter()
                .map(|(name, calls, cdf)| {
                    (
                        Reply::bulk(name),
                        Reply::Map(vec![
                            (Reply::bulk("calls"), Reply::Int(calls as i64)),
                            (
                                Reply::bulk("histogram_usec"),
                                Reply::Map(
                                    cdf.into_iter()
                                        .map(|(us, n)| (Reply::Int(us as i64), Reply::Int(n as i64)))
                                        .collect(),
                                ),
                            ),
                        ]),
                    )
                })
                .collect(),
        )),
        ("help", []) => Ok(Reply::Array(
            [
                "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DOCTOR",
                "    Return a human readable latency analysis report.",
                "GRAPH <event>",
                "    Return a latency graph for the <event> as a text chart.",
                "HISTORY <event>",
                "    Return time-latency samples for the <event> class.",
                "LATEST",
                "    Return the latest latency samples for all events.",
                "RESET [<event> ...]",
                "    Reset latency data of one or more <event> classes.",
                "    (default: reset all data for all event classes)",
                "HISTOGRAM [COMMAND ...]",
                "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
                "    If no commands are specified then all histograms are replied.",
                "HELP",
                "    Prints this help.",
            ]
            .into_iter()
            .map(Reply::bulk)
            .collect(),
        )),
        ("latest" | "history" | "doctor" | "graph" | "help", _) => {
            Err(wrong_args(&format!("latency|{sub}")))
        }
        _ => Err(Reply::err(format!(
            "unknown subcommand '{}'. Try LATENCY HELP.",
            text(&a[0])
        ))),
    }
}
