//! The scripting state of a server, below its shared state: the eval interpreter with its
//! script cache, the function libraries (loaded again when the database's change), what
//! runs now ([`Activity`]) and the figures `INFO` and `FUNCTION STATS` report. The
//! commands that run scripts are [`crate::cmd::script`].

use super::eval::Scripts;
use super::library::Libraries;
use super::{Activity, DEFAULT_MEMORY_LIMIT};
use crate::protocol::Reply;
use crate::store::Store;
use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// The scripting state of a server: both interpreters and what runs now.
pub struct Scripting {
    pub activity: Arc<Activity>,
    /// The eval interpreter and its script cache.
    pub scripts: Mutex<Scripts>,
    libraries: Mutex<Registry>,
    /// Libraries and functions loaded and the interpreter's memory, for `FUNCTION STATS`
    /// and `INFO` while a function runs (it holds the registry).
    counts: [AtomicUsize; 3],
    /// The eval interpreter's memory, its scripts' bytes and count, likewise.
    eval_stats: [AtomicUsize; 3],
    /// `halflife-lua-memory-limit`.
    memory: AtomicUsize,
}

/// The function libraries, and the store's [`crate::store::Store::functions_epoch`] they
/// were loaded at (`None`: not loaded from the database yet).
pub struct Registry {
    pub libs: Libraries,
    pub epoch: Option<u64>,
}

impl Default for Scripting {
    fn default() -> Scripting {
        let activity = Arc::new(Activity::default());
        Scripting {
            scripts: Mutex::new(Scripts::new(activity.clone(), DEFAULT_MEMORY_LIMIT)),
            libraries: Mutex::new(Registry {
                libs: Libraries::new(activity.clone(), DEFAULT_MEMORY_LIMIT),
                epoch: None,
            }),
            activity,
            counts: Default::default(),
            eval_stats: Default::default(),
            memory: AtomicUsize::new(DEFAULT_MEMORY_LIMIT),
        }
    }
}

impl Scripting {
    /// The libraries, loaded again from the database first if it changed under them (at
    /// the first use, after a replicated `FUNCTION` command or a full sync).
    pub fn libraries(&self, store: &Store) -> Result<MutexGuard<'_, Registry>, Reply> {
        let mut reg = self.libraries.lock();
        let epoch = store.functions_epoch();
        if reg.epoch != Some(epoch) {
            reg.libs.flush();
            for code in store.function_libraries()? {
                if let Err(e) = reg.libs.load(&code, true) {
                    eprintln!("halflife serve: a stored function library does not load: {e}");
                }
            }
            reg.epoch = Some(epoch);
            self.note_counts(&reg.libs);
        }
        Ok(reg)
    }

    /// Notes the libraries' counts and memory for [`Scripting::info`].
    pub fn note_counts(&self, libs: &Libraries) {
        self.counts[0].store(libs.libraries().count(), Relaxed);
        self.counts[1].store(libs.function_count(), Relaxed);
        self.counts[2].store(libs.used_memory(), Relaxed);
    }

    /// `INFO memory`'s scripting lines. A script may ask for them while it holds its
    /// interpreter: then they are as of the last time the interpreter was free.
    pub fn info(&self, out: &mut Vec<(&'static str, String)>) {
        if let Some(s) = self.scripts.try_lock() {
            self.note_scripts(&s);
        }
        if let Some(r) = self.libraries.try_lock() {
            self.note_counts(&r.libs);
        }
        let [lua, sources, cached] = &self.eval_stats;
        let lua = lua.load(Relaxed).to_string();
        out.push(("used_memory_lua", lua.clone()));
        out.push(("used_memory_vm_eval", lua));
        out.push((
            "used_memory_scripts_eval",
            sources.load(Relaxed).to_string(),
        ));
        out.push(("number_of_cached_scripts", cached.load(Relaxed).to_string()));
        out.push((
            "used_memory_vm_functions",
            self.counts[2].load(Relaxed).to_string(),
        ));
        out.push((
            "number_of_functions",
            self.counts[1].load(Relaxed).to_string(),
        ));
        out.push((
            "number_of_libraries",
            self.counts[0].load(Relaxed).to_string(),
        ));
    }

    fn note_scripts(&self, s: &Scripts) {
        self.eval_stats[0].store(s.used_memory(), Relaxed);
        self.eval_stats[1].store(s.source_bytes(), Relaxed);
        self.eval_stats[2].store(s.len(), Relaxed);
    }

    /// Sets `halflife-lua-memory-limit` on both interpreters (each has its own cap).
    pub fn set_memory_limit(&self, bytes: usize) {
        self.memory.store(bytes, Relaxed);
        self.scripts.lock().set_memory_limit(bytes);
        self.libraries.lock().libs.set_memory_limit(bytes);
    }

    /// The libraries and functions loaded, as of the last time the registry was free (for
    /// `FUNCTION STATS`, which never waits for a running function).
    pub fn library_counts(&self) -> (usize, usize) {
        (self.counts[0].load(Relaxed), self.counts[1].load(Relaxed))
    }

    pub fn memory_limit(&self) -> usize {
        self.memory.load(Relaxed)
    }
}
