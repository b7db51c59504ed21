//! Redis Cluster mode (`halflife serve --cluster-enabled`), Kvrocks-style: there is no
//! gossip bus; a controller sets each node's id and pushes the whole topology to every
//! node (`CLUSTERX SETNODEID`, `CLUSTERX SETNODES`), and the nodes redirect clients by it
//! exactly as Redis Cluster nodes do, so cluster clients (redis-py's `RedisCluster`,
//! `redis-cli -c`) work unchanged.
//!
//! This module is the node's cluster state, below the server's shared state:
//! - [`slot`]: which of the 16384 slots a key belongs to (CRC16-XMODEM, hash tags);
//! - [`topology`]: the controller's topology, parsed and validated;
//! - [`state`]: this node's id, topology and version, kept in the database directory;
//! - [`jobs`]: the state of Kvrocks' `CLUSTERX MIGRATE` jobs;
//! - [`publish`]: `PUBLISH` forwarded to the other nodes, for their subscribers.
//!
//! The command layer acts on it ([`crate::cmd::cluster`]): the routing check before each
//! command (MOVED, ASK, TRYAGAIN, CROSSSLOT, CLUSTERDOWN), `CLUSTER ...` (with Redis's
//! `SETSLOT ... MIGRATING|IMPORTING|STABLE|NODE`), `CLUSTERX ...`, `READONLY`,
//! `READWRITE`, `ASKING`, and the job of `CLUSTERX MIGRATE`, the source moving a slot by
//! itself.
//!
//! A slot moves as in Redis Cluster: the keys go with `MIGRATE` ([`crate::cmd::migrate`])
//! while both nodes serve, the source answering `-ASK` for the keys already gone; the
//! controller drives the steps, or asks the source to with `CLUSTERX MIGRATE`.
//! Not implemented: failure detection and failover (the controller's job in Kvrocks'
//! design too).

pub mod jobs;
pub mod publish;
pub mod slot;
pub mod state;
pub mod topology;

pub use state::Cluster;
