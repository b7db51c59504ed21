//! Lifetime-aware garbage collection, the self-contained core (paper 000, DumpKV).
//!
//! # The idea
//!
//! Values that die together should live in the same value file, so that GC of that file
//! finds almost nothing to copy. Every value file therefore has a [`LifetimeClass`] and a
//! TTL measured in sequence numbers (the engine's clock): flush writes *default* files
//! with TTL `l_d`; GC, when it finds a value still valid, asks a model whether its
//! remaining lifetime is short or long and rewrites it into a *short* (`l_s`) or *long*
//! (`l_l`) file. A file is collected when its TTL has elapsed.
//!
//! # Pieces, and the equations in words
//!
//! * [`features`]: after the value pointer, each key carries a [`FeatureRecord`]: the
//!   intervals between its past writes (Deltas, newest first, at most 32) and ten
//!   exponentially decayed write counters. **Eq. 1**: on a new write after an interval
//!   `d`, counter `i` becomes one plus its old value halved once per `2^(19+i)` sequence
//!   numbers of `d`. Deltas reach the model as bucket indices (below 1M is 0, then one
//!   bucket per doubling) and missing Deltas as NaN.
//! * [`sampling`]: **Eq. 2**: a sample from L0-L1 compaction is kept with probability
//!   equal to the counter of the short window divided by the counter of the long window,
//!   which is near 1 for rarely written keys and small for hot ones. A GC sample is kept
//!   with the job's valid ratio.
//! * [`histogram`] and [`thresholds`]: true lifetimes from compaction fill the short
//!   histogram, elapsed lifetimes of valid values found by GC fill the long one. After each
//!   GC job, with `g` its garbage ratio and `s` the logistic function (**Eq. 5**):
//!   **Eq. 3**: `l_s` is the short histogram's percentile
//!   `60 s(10 (0.75 - g)) + 40 s(10 (0.25 - g))`; **Eq. 4**: `l_l` is the long histogram's
//!   percentile `80 s(10 (0.75 - g)) + 20 s(10 (0.25 - g))` (constants are the defaults of
//!   [`ThresholdParams`]); **Eq. 6**: `l_d` interpolates from `l_s` to `l_l` with weight
//!   `s(0.25 - g)`. Little garbage (low `g`) means GC came too early: thresholds go up.
//! * [`labels`]: **Eq. 7**: a compaction sample whose lifetime `L` is at least `l_d` is
//!   long when `L - l_d > l_s`; shorter lifetimes are left out. **Eq. 8** and the
//!   written-once rule: a GC sample of a key written once is long; otherwise it is long
//!   when its short-window counter, decayed to now, is below one write. Each source fills
//!   at most half of the [`Dataset`] (128k rows by default).
//! * [`model`]: a gradient-boosting classifier with log-loss ([`GbmModel`], on
//!   `forust-ml`), trained by the background [`Trainer`] whenever the dataset is full,
//!   installed in the [`ModelHandle`] with an atomic swap and saved to a checksummed file.
//!   Until a model exists every valid value is classed long ([`AlwaysLong`]).
//!
//! # How the integration drives it
//!
//! * Flush: store `FeatureRecord::new()` (or `with_value_size`) after the pointer; put the
//!   value in a `Default` file with TTL `thresholds.ttl_for(LifetimeClass::Default)`.
//! * L0-L1 compaction, for a key whose previous write `P` (at `p`) is found in L1+ while
//!   the new write is at `c`: `lifetime = c - p`; if `Sampler::accept(
//!   compaction_sample_probability(&rec_p, t.s_idx(), t.l_idx()))`, submit a
//!   `Compaction` sample with `rec_p`; store `rec_p.update(c, p)` with the new write.
//! * GC of a valid value written at `w`, now `n`: `class = model.predict(&rec, n - w)`;
//!   with probability `gc_sample_probability(gc_ratio)` submit a `Gc` sample with
//!   lifetime `n - w`. After the job: `thresholds.recompute(gc_ratio)`.
//!
//! The trainer records into the histograms as it dequeues samples, as in the paper.

pub mod features;
pub mod histogram;
pub mod labels;
pub mod model;
pub mod sampling;
pub mod thresholds;

pub use features::{FeatureRecord, MAX_DELTAS, MODEL_INPUT_LEN, NUM_EDWC};
pub use histogram::LifetimeHistogram;
pub use labels::{Dataset, SampleSource, TrainingSample, DEFAULT_DATASET_CAPACITY};
pub use model::{
    AlwaysLong, GbmModel, GbmParams, LifetimePredictor, ModelHandle, Trainer, TrainerConfig,
};
pub use sampling::{compaction_sample_probability, gc_sample_probability, Sampler};
pub use thresholds::{LifetimeClass, LifetimeThresholds, ThresholdParams, Thresholds};
