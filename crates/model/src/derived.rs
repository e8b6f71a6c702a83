//! [`Derived`]: a value of the model computed once, by a thread outside the rayon
//! pool, and [`Memo`]: results of the layers above the model, kept with the profile.

use std::any::Any;
use std::sync::{Mutex, OnceLock};

/// A value derived from a profile, computed once by whichever thread outside the
/// rayon pool asks first; other threads outside the pool wait for it.
///
/// The computation may use the pool. So a pool thread never waits for it: a pool
/// thread that finds the value missing (a bug: the analysis that runs it should have
/// asked for the value before going parallel) computes its own copy, without
/// waiting on anything, and keeps the first copy stored; debug builds (the tests)
/// panic there instead, so that the order is fixed where it is wrong.
pub struct Derived<T> {
    value: OnceLock<T>,
    /// Held by the thread outside the pool that computes the value.
    computing: Mutex<()>,
}

impl<T> Default for Derived<T> {
    fn default() -> Self {
        Derived { value: OnceLock::new(), computing: Mutex::new(()) }
    }
}

impl<T> Derived<T> {
    /// The value, if it was computed.
    pub fn get(&self) -> Option<&T> {
        self.value.get()
    }

    /// The value, computed by `compute` if it is not there yet.
    #[track_caller]
    pub fn get_or_compute(&self, compute: impl FnOnce() -> T) -> &T {
        if let Some(v) = self.value.get() {
            return v;
        }
        if rayon::current_thread_index().is_some() {
            debug_assert!(
                false,
                "derived data computed inside the rayon pool: ask for it before going parallel (crates/model/src/profile.rs)"
            );
            // Never wait on a pool thread: compute a copy, keep whichever is stored first.
            let _ = self.value.set(compute());
        } else {
            let _computing = lock(&self.computing);
            if self.value.get().is_none() {
                let _ = self.value.set(compute());
            }
        }
        self.value.get().expect("a value was just stored")
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Results of the layers above the model, kept with the profile for its life (until
/// its stages are dropped): each entry a key and the value computed for it, by type.
/// The model stores them without knowing their types; the analysis that made an entry
/// is the one that reads it (the op profile of each grouping).
#[derive(Default)]
pub struct Memo {
    entries: Mutex<Vec<Box<dyn Any + Send + Sync>>>,
}

impl Memo {
    /// The value kept for `key`, made by `make` (outside the lock) on first use.
    pub fn get_or_insert<K, V>(&self, key: K, make: impl FnOnce() -> V) -> V
    where
        K: PartialEq + Send + Sync + 'static,
        V: Clone + Send + Sync + 'static,
    {
        if let Some(v) = self.find::<K, V>(&key) {
            return v;
        }
        let value = make();
        self.keep(key, value.clone());
        value
    }

    /// Makes sure a value is kept for `key`, without copying it out.
    pub fn ensure<K, V>(&self, key: K, make: impl FnOnce() -> V)
    where
        K: PartialEq + Send + Sync + 'static,
        V: Send + Sync + 'static,
    {
        let kept = lock(&self.entries).iter().any(|e| e.downcast_ref::<(K, V)>().is_some_and(|(k, _)| *k == key));
        if !kept {
            let value = make();
            self.keep(key, value);
        }
    }

    /// The value kept for `key`, if one is, without making one.
    pub fn get<K: PartialEq + 'static, V: Clone + 'static>(&self, key: &K) -> Option<V> {
        self.find(key)
    }

    /// The value kept for `key`, taken out (the memo no longer holds it).
    pub fn take<K: PartialEq + 'static, V: 'static>(&self, key: &K) -> Option<V> {
        let mut entries = lock(&self.entries);
        let at = entries.iter().position(|e| e.downcast_ref::<(K, V)>().is_some_and(|(k, _)| k == key))?;
        let entry: Box<dyn Any> = entries.swap_remove(at);
        entry.downcast::<(K, V)>().ok().map(|kv| kv.1)
    }

    fn find<K: PartialEq + 'static, V: Clone + 'static>(&self, key: &K) -> Option<V> {
        lock(&self.entries)
            .iter()
            .find_map(|e| e.downcast_ref::<(K, V)>().filter(|(k, _)| k == key).map(|(_, v)| v.clone()))
    }

    fn keep<K: Send + Sync + 'static, V: Send + Sync + 'static>(&self, key: K, value: V) {
        lock(&self.entries).push(Box::new((key, value)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value made ahead and taken once: `take` hands it out and the memo no longer
    /// holds it; `get` makes nothing; a key of another type or value is another entry.
    #[test]
    fn a_value_taken_from_the_memo_is_no_longer_kept() {
        let memo = Memo::default();
        assert_eq!(memo.get::<u8, String>(&1), None);
        memo.ensure(1u8, || "one".to_string());
        memo.ensure(2u8, || "two".to_string());
        memo.ensure(1u16, || "other".to_string());
        assert_eq!(memo.get::<u8, String>(&1).as_deref(), Some("one"));
        assert_eq!(memo.take::<u8, String>(&1).as_deref(), Some("one"));
        assert_eq!(memo.take::<u8, String>(&1), None);
        assert_eq!(memo.get::<u8, String>(&2).as_deref(), Some("two"));
        assert_eq!(memo.take::<u16, String>(&1).as_deref(), Some("other"));
        assert_eq!(memo.take::<u8, u32>(&2), None);
    }
}
