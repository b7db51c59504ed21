//! Pub/sub: who is subscribed to which channel, pattern or shard channel, and delivery of
//! messages to their connections.
//!
//! Each subscribed connection has a [`Mailbox`]: an unbounded queue whose bytes are counted
//! before anything is put in it. `PUBLISH` runs on the publisher's thread and never waits
//! for a subscriber; the subscriber's connection task takes messages off its queue and
//! writes them. A subscriber that does not read cannot grow the server's memory: as
//! Redis's `client-output-buffer-limit pubsub <hard> <soft> <seconds>`, a message that would
//! take its queue past the hard limit, or past the soft limit after it has been over it
//! for `seconds`, is not queued and the connection is closed instead. The limits are
//! checked against the bytes already queued plus the new message, before it is queued.
//!
//! Delivery is at most once and in publish order per publisher, as in Redis; a message
//! published while a client subscribes reaches it or not, and a message is queued only
//! after the subscription's confirmation reply has been produced (the confirmation is the
//! command's reply; messages are written after the replies of the batch they arrived in).

use crate::pattern;
use crate::protocol::Reply;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Bytes one connection's subscriptions (channel and pattern names together) may take:
/// names are the client's bytes, kept as long as it is subscribed.
pub const MAX_SUBSCRIPTION_BYTES: usize = 16 << 20;

/// What a subscription is to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    /// The words of a confirmation (`subscribe`, `unsubscribe`) and of a message.
    fn words(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Kind::Channel => ("subscribe", "unsubscribe", "message"),
            Kind::Pattern => ("psubscribe", "punsubscribe", "pmessage"),
            Kind::Shard => ("ssubscribe", "sunsubscribe", "smessage"),
        }
    }
}

/// `client-output-buffer-limit pubsub`: bytes queued for a subscriber (0: no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub hard: usize,
    pub soft: usize,
    pub soft_seconds: u64,
}

impl Default for Limits {
    /// Redis's defaults: 32 MiB hard, 8 MiB for 60 seconds.
    fn default() -> Limits {
        Limits {
            hard: 32 << 20,
            soft: 8 << 20,
            soft_seconds: 60,
        }
    }
}

/// A message (or a keyspace event) on a subscriber's queue, with the bytes it was
/// counted as.
pub struct Push(pub Reply, pub usize);

/// A subscribed connection's queue (see the module's doc).
pub struct Mailbox {
    id: u64,
    tx: mpsc::UnboundedSender<Push>,
    /// Closes the subscriber's connection (its `CLIENT KILL` switch), whatever it is
    /// waiting for: a connection that does not read may never look at its queue again.
    kill: Option<Arc<tokio::sync::watch::Sender<bool>>>,
    queued: AtomicUsize,
    /// Since when the queue has been over the soft limit.
    soft_since: Mutex<Option<Instant>>,
    closed: AtomicBool,
}

impl Mailbox {
    /// A mailbox for client `id`, the receiving end its connection reads, and `kill`,
    /// which closes the connection.
    pub fn new(
        id: u64,
        kill: Option<Arc<tokio::sync::watch::Sender<bool>>>,
    ) -> (Arc<Mailbox>, Inbox) {
        let (tx, rx) = mpsc::unbounded_channel();
        let m = Arc::new(Mailbox {
            id,
            tx,
            kill,
            queued: AtomicUsize::new(0),
            soft_since: Mutex::new(None),
            closed: AtomicBool::new(false),
        });
        (m.clone(), Inbox { rx, mailbox: m })
    }

    /// Queues `msg` of `size` bytes unless that would pass `limits` (the connection is then
    /// told to close); whether it was queued.
    fn deliver(&self, msg: Reply, size: usize, limits: &Limits) -> bool {
        if self.closed.load(Relaxed) {
            return false;
        }
        let after = self.queued.load(Relaxed) + size;
        let over_hard = limits.hard > 0 && after > limits.hard;
        let over_soft = limits.soft > 0 && after > limits.soft && {
            let mut since = self.soft_since.lock();
            let now = Instant::now();
            let start = *since.get_or_insert(now);
            now.duration_since(start) >= Duration::from_secs(limits.soft_seconds)
        };
        if limits.soft > 0 && after <= limits.soft {
            *self.soft_since.lock() = None;
        }
        if over_hard || over_soft {
            if !self.closed.swap(true, Relaxed) {
                tracing::warn!(
                    "closing connection {}: its unread pub/sub messages passed client-output-buffer-limit pubsub",
                    self.id
                );
                if let Some(k) = &self.kill {
                    k.send_replace(true);
                }
            }
            return false;
        }
        self.queued.fetch_add(size, Relaxed);
        self.tx.send(Push(msg, size)).is_ok()
    }
}

/// The connection's end of its [`Mailbox`].
pub struct Inbox {
    rx: mpsc::UnboundedReceiver<Push>,
    mailbox: Arc<Mailbox>,
}

impl Inbox {
    /// The next push (`None`: the mailbox is gone, nothing more will come).
    pub async fn recv(&mut self) -> Option<Push> {
        let p = self.rx.recv().await;
        self.taken(&p);
        p
    }

    /// A push already queued, without waiting.
    pub fn try_recv(&mut self) -> Option<Push> {
        let p = self.rx.try_recv().ok();
        self.taken(&p);
        p
    }

    fn taken(&self, p: &Option<Push>) {
        if let Some(Push(_, size)) = p {
            self.mailbox.queued.fetch_sub(*size, Relaxed);
        }
    }

    /// Whether the subscriber was cut off for passing its limits.
    #[cfg(test)]
    fn cut_off(&self) -> bool {
        self.mailbox.closed.load(Relaxed)
    }
}

/// One client's subscriptions.
#[derive(Default)]
struct Subs {
    channels: BTreeSet<Bytes>,
    patterns: BTreeSet<Bytes>,
    shard: BTreeSet<Bytes>,
    bytes: usize,
}

impl Subs {
    fn set(&mut self, kind: Kind) -> &mut BTreeSet<Bytes> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// What a confirmation counts: channels and patterns together, or shard channels.
    fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty()
    }
}

type Subscribers = HashMap<u64, Arc<Mailbox>>;

#[derive(Default)]
struct State {
    channels: HashMap<Bytes, Subscribers>,
    patterns: HashMap<Bytes, Subscribers>,
    shard: HashMap<Bytes, Subscribers>,
    clients: HashMap<u64, Subs>,
}

impl State {
    fn map(&mut self, kind: Kind) -> &mut HashMap<Bytes, Subscribers> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    fn remove(&mut self, kind: Kind, name: &Bytes, id: u64) {
        let map = self.map(kind);
        if let Some(subs) = map.get_mut(name) {
            subs.remove(&id);
            if subs.is_empty() {
                map.remove(name);
            }
        }
    }
}

/// Every subscription of the server (in [`crate::shared::Shared`]).
#[derive(Default)]
pub struct Hub {
    state: RwLock<State>,
    limits: RwLock<Limits>,
    /// `MONITOR`'s connections, which receive a line for every command the server runs
    /// ([`crate::cmd::observe::monitor`]); their count, read by every command.
    monitors: RwLock<Subscribers>,
    monitoring: AtomicUsize,
}

impl Hub {
    pub fn limits(&self) -> Limits {
        *self.limits.read()
    }

    pub fn set_limits(&self, l: Limits) {
        *self.limits.write() = l;
    }

    /// Subscribes `mailbox`'s client to `names`: a confirmation each (`[subscribe, name,
    /// count]`), or an error before any subscription if the names would pass
    /// [`MAX_SUBSCRIPTION_BYTES`].
    pub fn subscribe(&self, kind: Kind, mailbox: &Arc<Mailbox>, names: &[Bytes]) -> Reply {
        let id = mailbox.id;
        let mut st = self.state.write();
        let have = st.clients.get(&id).map_or(0, |s| s.bytes);
        let adding: usize = names.iter().map(|n| n.len()).sum();
        if have.saturating_add(adding) > MAX_SUBSCRIPTION_BYTES {
            return Reply::err(format!(
                "subscriptions of more than {MAX_SUBSCRIPTION_BYTES} bytes of names refused"
            ));
        }
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            let subs = st.clients.entry(id).or_default();
            if subs.set(kind).insert(n.clone()) {
                subs.bytes += n.len();
            }
            let count = subs.count(kind);
            st.map(kind)
                .entry(n.clone())
                .or_default()
                .insert(id, mailbox.clone());
            out.push(confirmation(kind.words().0, Reply::Bulk(n.clone()), count));
        }
        Reply::Many(out)
    }

    /// Unsubscribes client `id` from `names` (all of its subscriptions of `kind` if empty):
    /// a confirmation each, one with a null name if it had none.
    pub fn unsubscribe(&self, kind: Kind, id: u64, names: &[Bytes]) -> Reply {
        let mut st = self.state.write();
        let names: Vec<Bytes> = if names.is_empty() {
            st.clients
                .get_mut(&id)
                .map(|s| s.set(kind).iter().cloned().collect())
                .unwrap_or_default()
        } else {
            names.to_vec()
        };
        let word = kind.words().1;
        if names.is_empty() {
            let count = st.clients.get(&id).map_or(0, |s| s.count(kind));
            return Reply::Many(vec![confirmation(word, Reply::Nil, count)]);
        }
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            let mut count = 0;
            if let Some(subs) = st.clients.get_mut(&id) {
                if subs.set(kind).remove(&n) {
                    subs.bytes -= n.len();
                }
                count = subs.count(kind);
                if subs.is_empty() {
                    st.clients.remove(&id);
                }
            }
            st.remove(kind, &n, id);
            out.push(confirmation(word, Reply::Bulk(n), count));
        }
        Reply::Many(out)
    }

    /// `MONITOR`: `mailbox`'s client receives the command feed from now on; `false` if it
    /// did already.
    pub fn monitor(&self, mailbox: &Arc<Mailbox>) -> bool {
        let mut m = self.monitors.write();
        let added = m.insert(mailbox.id, mailbox.clone()).is_none();
        self.monitoring.store(m.len(), Relaxed);
        added
    }

    /// Whether any connection monitors (a relaxed read: a command that runs as `MONITOR`
    /// is answered may or may not be shown, as in Redis).
    pub fn monitoring(&self) -> bool {
        self.monitoring.load(Relaxed) > 0
    }

    /// Sends `line` (a status line, without `+` and CRLF) to every monitoring connection,
    /// within the pub/sub output limits: a monitor that does not read is cut off as a
    /// subscriber that does not read is.
    pub fn feed_monitors(&self, line: String) {
        let limits = self.limits();
        let size = line.len() + 3;
        for m in self.monitors.read().values() {
            m.deliver(Reply::Status(line.clone()), size, &limits);
        }
    }

    /// Forgets every subscription of client `id` (it disconnected, or `RESET`), and its
    /// `MONITOR`.
    pub fn forget(&self, id: u64) {
        {
            let mut m = self.monitors.write();
            if m.remove(&id).is_some() {
                self.monitoring.store(m.len(), Relaxed);
            }
        }
        let mut st = self.state.write();
        let Some(subs) = st.clients.remove(&id) else {
            return;
        };
        for (kind, set) in [
            (Kind::Channel, subs.channels),
            (Kind::Pattern, subs.patterns),
            (Kind::Shard, subs.shard),
        ] {
            for n in set {
                st.remove(kind, &n, id);
            }
        }
    }

    /// How many subscriptions client `id` has (channels, patterns, shard channels).
    pub fn count(&self, id: u64) -> (usize, usize, usize) {
        self.state.read().clients.get(&id).map_or((0, 0, 0), |s| {
            (s.channels.len(), s.patterns.len(), s.shard.len())
        })
    }

    /// Delivers `msg` on `channel` to its subscribers and to the subscribers of every
    /// pattern it matches (`shard`: to the shard channel's subscribers only); how many
    /// received it.
    pub fn publish(&self, shard: bool, channel: &Bytes, msg: &Bytes) -> usize {
        let limits = self.limits();
        let st = self.state.read();
        // What a message costs a subscriber: the names and framing, as queued.
        let size = |extra: usize| channel.len() + msg.len() + extra + 48;
        let mut n = 0;
        if shard {
            for m in st.shard.get(channel).into_iter().flat_map(|s| s.values()) {
                let push = push3("smessage", channel.clone(), msg.clone());
                n += m.deliver(push, size(0), &limits) as usize;
            }
            return n;
        }
        for m in st
            .channels
            .get(channel)
            .into_iter()
            .flat_map(|s| s.values())
        {
            let push = push3("message", channel.clone(), msg.clone());
            n += m.deliver(push, size(0), &limits) as usize;
        }
        for (pat, subs) in &st.patterns {
            if !pattern::matches(pat, channel) {
                continue;
            }
            for m in subs.values() {
                let push = Reply::Push(vec![
                    Reply::bulk("pmessage"),
                    Reply::Bulk(pat.clone()),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(msg.clone()),
                ]);
                n += m.deliver(push, size(pat.len()), &limits) as usize;
            }
        }
        n
    }

    /// The channels (`shard`: shard channels) with subscribers, matching `pat` if given.
    pub fn channels(&self, shard: bool, pat: Option<&[u8]>) -> Vec<Bytes> {
        let st = self.state.read();
        let map = if shard { &st.shard } else { &st.channels };
        map.keys()
            .filter(|c| pat.is_none_or(|p| pattern::matches(p, c)))
            .cloned()
            .collect()
    }

    /// How many clients subscribe to `channel` (`shard`: the shard channel).
    pub fn numsub(&self, shard: bool, channel: &[u8]) -> usize {
        let st = self.state.read();
        let map = if shard { &st.shard } else { &st.channels };
        map.get(channel).map_or(0, HashMap::len)
    }

    /// How many distinct patterns have subscribers.
    pub fn numpat(&self) -> usize {
        self.state.read().patterns.len()
    }
}

fn push3(word: &'static str, channel: Bytes, msg: Bytes) -> Reply {
    Reply::Push(vec![
        Reply::bulk(word),
        Reply::Bulk(channel),
        Reply::Bulk(msg),
    ])
}

fn confirmation(word: &'static str, name: Reply, count: usize) -> Reply {
    Reply::Push(vec![Reply::bulk(word), name, Reply::Int(count as i64)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn drain(inbox: &mut Inbox) -> Vec<Reply> {
        let mut out = Vec::new();
        while let Some(Push(r, _)) = inbox.try_recv() {
            out.push(r);
        }
        out
    }

    #[test]
    fn messages_reach_channel_and_pattern_subscribers_once_each() {
        let hub = Hub::default();
        let (m1, mut in1) = Mailbox::new(1, None);
        let (m2, mut in2) = Mailbox::new(2, None);
        hub.subscribe(Kind::Channel, &m1, &[b("news"), b("news")]);
        hub.subscribe(Kind::Pattern, &m2, &[b("n*"), b("*s")]);
        assert_eq!(hub.publish(false, &b("news"), &b("hi")), 3);
        assert_eq!(drain(&mut in1).len(), 1);
        assert_eq!(drain(&mut in2).len(), 2);
        assert_eq!(hub.numsub(false, b"news"), 1);
        assert_eq!(hub.numpat(), 2);
        assert_eq!(hub.publish(true, &b("news"), &b("hi")), 0);
    }

    #[test]
    fn unsubscribing_everything_leaves_nothing_behind() {
        let hub = Hub::default();
        let (m, _inbox) = Mailbox::new(7, None);
        hub.subscribe(Kind::Channel, &m, &[b("a"), b("b")]);
        hub.subscribe(Kind::Pattern, &m, &[b("p*")]);
        hub.subscribe(Kind::Shard, &m, &[b("s")]);
        assert_eq!(hub.count(7), (2, 1, 1));
        let Reply::Many(r) = hub.unsubscribe(Kind::Channel, 7, &[]) else {
            panic!()
        };
        assert_eq!(r.len(), 2);
        hub.forget(7);
        assert_eq!(hub.count(7), (0, 0, 0));
        assert!(hub.channels(false, None).is_empty());
        assert!(hub.channels(true, None).is_empty());
        assert_eq!(hub.numpat(), 0);
        // Unsubscribing with nothing subscribed still confirms.
        let Reply::Many(r) = hub.unsubscribe(Kind::Pattern, 7, &[]) else {
            panic!()
        };
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn a_subscriber_that_does_not_read_is_cut_off_at_the_hard_limit() {
        let hub = Hub::default();
        hub.set_limits(Limits {
            hard: 10_000,
            soft: 0,
            soft_seconds: 0,
        });
        let (m, mut inbox) = Mailbox::new(1, None);
        hub.subscribe(Kind::Channel, &m, &[b("c")]);
        let msg = Bytes::from(vec![b'x'; 1000]);
        let delivered: usize = (0..100).map(|_| hub.publish(false, &b("c"), &msg)).sum();
        // Nothing was queued past the limit.
        assert!(delivered < 10, "{delivered}");
        assert!(m.queued.load(Relaxed) <= 10_000);
        drain(&mut inbox);
        assert!(inbox.cut_off());
        // Once cut off, nothing more is queued.
        assert_eq!(hub.publish(false, &b("c"), &msg), 0);
    }

    #[test]
    fn the_soft_limit_cuts_off_only_after_its_time() {
        let hub = Hub::default();
        hub.set_limits(Limits {
            hard: 0,
            soft: 2_000,
            soft_seconds: 3600,
        });
        let (m, _inbox) = Mailbox::new(1, None);
        hub.subscribe(Kind::Channel, &m, &[b("c")]);
        let msg = Bytes::from(vec![b'x'; 1000]);
        // Over the soft limit, but not for an hour: every message is queued.
        assert_eq!(
            (0..10)
                .map(|_| hub.publish(false, &b("c"), &msg))
                .sum::<usize>(),
            10
        );
        hub.set_limits(Limits {
            hard: 0,
            soft: 2_000,
            soft_seconds: 0,
        });
        assert_eq!(hub.publish(false, &b("c"), &msg), 0);
    }

    #[test]
    fn subscriptions_are_bounded_in_bytes() {
        let hub = Hub::default();
        let (m, _inbox) = Mailbox::new(1, None);
        let big = Bytes::from(vec![b'c'; MAX_SUBSCRIPTION_BYTES / 2 + 1]);
        assert!(matches!(
            hub.subscribe(Kind::Channel, &m, std::slice::from_ref(&big)),
            Reply::Many(_)
        ));
        assert!(matches!(
            hub.subscribe(Kind::Pattern, &m, &[big]),
            Reply::Error(_)
        ));
    }
}
