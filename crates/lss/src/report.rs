//! Aggregation of run results: per-policy totals over volumes and ratios to ADAPT.

use crate::sim::RunResult;

/// One policy summed over all volumes of an experiment.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PolicySummary {
    pub policy: String,
    pub volumes: usize,
    pub user_bytes: u64,
    pub gc_bytes: u64,
    pub padding_bytes: u64,
    pub shadow_bytes: u64,
    pub parity_bytes: u64,
    /// Overall WA: all data bytes written over all user bytes.
    pub wa: f64,
    pub padding_ratio: f64,
    /// This policy's value over ADAPT's (`None` without an ADAPT run or when ADAPT's is 0).
    pub wa_vs_adapt: Option<f64>,
    pub gc_vs_adapt: Option<f64>,
    pub padding_vs_adapt: Option<f64>,
    pub metadata_bytes: usize,
    pub blocks_per_s: f64,
    /// Block writes per CPU second of the replaying threads (what one core sustains).
    pub blocks_per_cpu_s: Option<f64>,
}

/// Sums results per policy, in the order policies first appear.
pub fn summarize(results: &[RunResult]) -> Vec<PolicySummary> {
    let mut order: Vec<&str> = Vec::new();
    for r in results {
        if !order.contains(&r.policy.as_str()) {
            order.push(&r.policy);
        }
    }
    let mut out: Vec<PolicySummary> = order
        .iter()
        .map(|&p| {
            let rs: Vec<&RunResult> = results.iter().filter(|r| r.policy == p).collect();
            let sum = |f: fn(&RunResult) -> u64| rs.iter().map(|r| f(r)).sum::<u64>();
            let (user, gc, pad, sh) = (
                sum(|r| r.user_bytes),
                sum(|r| r.gc_bytes),
                sum(|r| r.padding_bytes),
                sum(|r| r.shadow_bytes),
            );
            let all = user + gc + pad + sh;
            let secs: f64 = rs.iter().map(|r| r.elapsed_s).sum();
            let blocks: f64 = rs.iter().map(|r| r.blocks_per_s * r.elapsed_s).sum();
            PolicySummary {
                policy: p.to_string(),
                volumes: rs.len(),
                user_bytes: user,
                gc_bytes: gc,
                padding_bytes: pad,
                shadow_bytes: sh,
                parity_bytes: sum(|r| r.parity_bytes),
                wa: if user == 0 {
                    1.0
                } else {
                    all as f64 / user as f64
                },
                padding_ratio: if all == 0 {
                    0.0
                } else {
                    pad as f64 / all as f64
                },
                wa_vs_adapt: None,
                gc_vs_adapt: None,
                padding_vs_adapt: None,
                metadata_bytes: rs.iter().map(|r| r.metadata_bytes).max().unwrap_or(0),
                blocks_per_s: blocks / secs.max(1e-9),
                blocks_per_cpu_s: crate::sim::blocks_per_cpu_s(rs.iter().copied()),
            }
        })
        .collect();
    if let Some(a) = out.iter().find(|s| s.policy == "adapt").cloned() {
        let ratio = |x: f64, y: f64| (y > 0.0).then(|| x / y);
        for s in &mut out {
            s.wa_vs_adapt = ratio(s.wa, a.wa);
            s.gc_vs_adapt = ratio(s.gc_bytes as f64, a.gc_bytes as f64);
            s.padding_vs_adapt = ratio(s.padding_bytes as f64, a.padding_bytes as f64);
        }
    }
    out
}

/// A plain-text table of summaries.
pub fn table(sums: &[PolicySummary]) -> String {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let r = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
    let mut s = format!(
        "{:<8} {:>7} {:>8} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>10}\n",
        "policy",
        "WA",
        "pad%",
        "user GiB",
        "GC GiB",
        "pad+sh GiB",
        "WA/ADAPT",
        "GC/ADAPT",
        "pad/ADAPT",
        "Mblk/s",
        "Mblk/cpu-s"
    );
    for p in sums {
        s += &format!(
            "{:<8} {:>7.3} {:>8.2} {:>10.3} {:>10.3} {:>10.3} {:>9} {:>9} {:>9} {:>9.2} {:>10}\n",
            p.policy,
            p.wa,
            p.padding_ratio * 100.0,
            gib(p.user_bytes),
            gib(p.gc_bytes),
            gib(p.padding_bytes + p.shadow_bytes),
            r(p.wa_vs_adapt),
            r(p.gc_vs_adapt),
            r(p.padding_vs_adapt),
            p.blocks_per_s / 1e6,
            p.blocks_per_cpu_s
                .map_or("-".to_string(), |b| format!("{:.2}", b / 1e6))
        );
    }
    s
}
