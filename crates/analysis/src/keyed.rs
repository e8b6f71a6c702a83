//! Values kept by key in the order their keys were first met: what the analyses add up
//! host by host, so that a run read a host at a time sums as the run read whole does.

use std::collections::HashMap;
use std::hash::Hash;
use stepscope_model::wire::Wire;

#[derive(Clone, Debug)]
pub struct Keyed<K, V> {
    items: Vec<(K, V)>,
    at: HashMap<K, usize>,
}

impl<K: Wire + Eq + std::hash::Hash + Clone, V: Wire> Wire for Keyed<K, V> {
    // Its items in order; their places by key made anew.
    fn put(&self, out: &mut Vec<u8>) {
        self.items.put(out);
    }
    fn take(bytes: &mut stepscope_model::wire::Bytes<'_>) -> Result<Self, stepscope_model::wire::WireError> {
        let items: Vec<(K, V)> = Wire::take(bytes)?;
        let at = items.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect();
        Ok(Keyed { items, at })
    }
}

impl<K, V> Default for Keyed<K, V> {
    fn default() -> Self {
        Keyed { items: Vec::new(), at: HashMap::new() }
    }
}

impl<K: Hash + Eq + Clone, V> Keyed<K, V> {
    /// The value of `key`, made by `new` where the key is met first (then `true`).
    pub fn entry(&mut self, key: K, new: impl FnOnce() -> V) -> (&mut V, bool) {
        let (at, first) = match self.at.get(&key) {
            Some(&at) => (at, false),
            None => {
                self.at.insert(key.clone(), self.items.len());
                self.items.push((key, new()));
                (self.items.len() - 1, true)
            }
        };
        (&mut self.items[at].1, first)
    }

    /// Adds `value` under `key`: kept where the key is met first, else `merge`d into
    /// the value there.
    pub fn add(&mut self, key: K, value: V, merge: impl FnOnce(&mut V, V)) {
        match self.at.get(&key) {
            Some(&at) => merge(&mut self.items[at].1, value),
            None => {
                self.at.insert(key.clone(), self.items.len());
                self.items.push((key, value));
            }
        }
    }

    /// Every key and value, in the order the keys were first met.
    pub fn iter(&self) -> impl Iterator<Item = &(K, V)> {
        self.items.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> {
        self.items.iter_mut().map(|(k, v)| (&*k, v))
    }

    pub fn into_items(self) -> Vec<(K, V)> {
        self.items
    }
}
