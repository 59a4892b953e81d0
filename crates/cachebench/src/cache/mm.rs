//! Eviction containers (CacheLib's "MM" containers), one per pool and
//! allocation class: intrusive doubly linked lists over the items' metadata.
//!
//! - **LRU** (`MMLru`): one list, most recent at the head. New items go to
//!   the head, or, with `lruIpSpec` k > 0, to the *insertion point*, where
//!   the last 1/2^k of the list begins, so an item must be hit once before
//!   it competes with the established ones. An access moves an item to the
//!   head unless it moved there less than the refresh time ago
//!   (`lruRefreshSec`, or `lruRefreshRatio` times the tail's age when
//!   larger), which keeps hot items from churning the list.
//! - **2Q** (`MM2Q`): hot, warm and cold lists. New items enter hot; hot's
//!   overflow past `lru2qHotPct` % of the items and warm's past
//!   100 - hot - `lru2qColdPct` % fall to the head of cold; a hit in cold
//!   promotes to warm. Eviction takes cold's tail, then warm's, then hot's.

/// No item.
pub const NIL: u32 = u32::MAX;

/// The per-item fields the lists use.
pub trait Links {
    fn prev(&self, id: u32) -> u32;
    fn next(&self, id: u32) -> u32;
    fn set_prev(&mut self, id: u32, v: u32);
    fn set_next(&mut self, id: u32, v: u32);
    /// Which list (0 hot / the LRU, 1 warm, 2 cold) the item is on, and
    /// whether it is in the LRU's tail region.
    fn queue(&self, id: u32) -> u8;
    fn set_queue(&mut self, id: u32, q: u8);
    fn in_tail(&self, id: u32) -> bool;
    fn set_in_tail(&mut self, id: u32, v: bool);
    fn last_access(&self, id: u32) -> u32;
    fn set_last_access(&mut self, id: u32, t: u32);
}

/// A doubly linked list; head is the most recently used.
#[derive(Debug, Clone, Copy)]
pub struct List {
    pub head: u32,
    pub tail: u32,
    pub len: usize,
}

impl Default for List {
    fn default() -> Self {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

impl List {
    fn push_head(&mut self, m: &mut impl Links, id: u32) {
        m.set_prev(id, NIL);
        m.set_next(id, self.head);
        if self.head != NIL {
            m.set_prev(self.head, id);
        } else {
            self.tail = id;
        }
        self.head = id;
        self.len += 1;
    }

    fn insert_before(&mut self, m: &mut impl Links, id: u32, before: u32) {
        let p = m.prev(before);
        m.set_prev(id, p);
        m.set_next(id, before);
        m.set_prev(before, id);
        if p == NIL {
            self.head = id;
        } else {
            m.set_next(p, id);
        }
        self.len += 1;
    }

    fn remove(&mut self, m: &mut impl Links, id: u32) {
        let (p, n) = (m.prev(id), m.next(id));
        if p == NIL {
            self.head = n;
        } else {
            m.set_next(p, n);
        }
        if n == NIL {
            self.tail = p;
        } else {
            m.set_prev(n, p);
        }
        m.set_prev(id, NIL);
        m.set_next(id, NIL);
        self.len -= 1;
    }
}

/// Which eviction policy, with its settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    Lru {
        /// `lruIpSpec`: 0 inserts at the head.
        ip_spec: u32,
    },
    TwoQ {
        hot_pct: u32,
        cold_pct: u32,
    },
}

/// When an access moves an item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Refresh {
    pub secs: u32,
    pub ratio: f64,
    pub on_read: bool,
    pub on_write: bool,
}

impl Default for Refresh {
    fn default() -> Self {
        Refresh {
            secs: 60,
            ratio: 0.0,
            on_read: true,
            on_write: false,
        }
    }
}

/// One eviction container.
#[derive(Debug, Clone)]
pub struct Container {
    policy: Policy,
    refresh: Refresh,
    lists: [List; 3],
    /// LRU insertion point and the size of the tail region it starts.
    ip: u32,
    tail_size: usize,
}

impl Container {
    pub fn new(policy: Policy, refresh: Refresh) -> Container {
        Container {
            policy,
            refresh,
            lists: [List::default(); 3],
            ip: NIL,
            tail_size: 0,
        }
    }

    /// Items in the container.
    pub fn len(&self) -> usize {
        self.lists.iter().map(|l| l.len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a new item, last accessed `now`.
    pub fn add(&mut self, m: &mut impl Links, id: u32, now: u32) {
        m.set_last_access(id, now);
        m.set_in_tail(id, false);
        match self.policy {
            Policy::Lru { ip_spec } => {
                m.set_queue(id, 0);
                if ip_spec == 0 || self.ip == NIL {
                    self.lists[0].push_head(m, id);
                } else {
                    self.lists[0].insert_before(m, id, self.ip);
                    self.ip = id;
                    m.set_in_tail(id, true);
                    self.tail_size += 1;
                }
                self.balance_ip(m);
            }
            Policy::TwoQ { .. } => {
                m.set_queue(id, 0);
                self.lists[0].push_head(m, id);
                self.balance_2q(m);
            }
        }
    }

    /// Removes an item (evicted, deleted, replaced).
    pub fn remove(&mut self, m: &mut impl Links, id: u32) {
        let q = m.queue(id) as usize;
        if m.in_tail(id) {
            self.tail_size -= 1;
            m.set_in_tail(id, false);
            if self.ip == id {
                self.ip = m.next(id);
            }
        }
        self.lists[q].remove(m, id);
        if let Policy::Lru { .. } = self.policy {
            self.balance_ip(m);
        }
    }

    /// Records a read (or write) of an item at `now`: promotes it unless
    /// it was promoted within the refresh time.
    pub fn record_access(&mut self, m: &mut impl Links, id: u32, now: u32, write: bool) {
        if !self.would_promote(|x| m.last_access(x), id, now, write) {
            return;
        }
        match self.policy {
            Policy::Lru { .. } => {
                self.remove(m, id);
                m.set_queue(id, 0);
                self.lists[0].push_head(m, id);
                m.set_last_access(id, now);
                self.balance_ip(m);
            }
            Policy::TwoQ { .. } => {
                let q = m.queue(id) as usize;
                self.lists[q].remove(m, id);
                // Cold and warm hits go to warm; hot stays hot.
                let to = if q == 0 { 0 } else { 1 };
                m.set_queue(id, to as u8);
                self.lists[to].push_head(m, id);
                m.set_last_access(id, now);
                self.balance_2q(m);
            }
        }
    }

    /// Puts `new` where `old` is (an item moved to another slot): `new`'s
    /// links must already be a copy of `old`'s.
    pub fn replace(&mut self, m: &mut impl Links, old: u32, new: u32) {
        let q = m.queue(new) as usize;
        let (p, n) = (m.prev(new), m.next(new));
        if p == NIL {
            self.lists[q].head = new;
        } else {
            m.set_next(p, new);
        }
        if n == NIL {
            self.lists[q].tail = new;
        } else {
            m.set_prev(n, new);
        }
        if self.ip == old {
            self.ip = new;
        }
    }

    /// Seconds since the next eviction victim was last accessed (the tail
    /// age CacheLib's tail-age rebalancing compares).
    pub fn tail_age(&self, last_access: impl Fn(u32) -> u32, now: u32) -> Option<u32> {
        self.victim().map(|t| now.saturating_sub(last_access(t)))
    }

    /// Whether [`Container::record_access`] would move `id` (it was not
    /// promoted within the refresh time); needs only the items' last
    /// access times, so a reader can ask without a write lock.
    pub fn would_promote(
        &self,
        last_access: impl Fn(u32) -> u32,
        id: u32,
        now: u32,
        write: bool,
    ) -> bool {
        let wanted = if write {
            self.refresh.on_write
        } else {
            self.refresh.on_read
        };
        if !wanted {
            return false;
        }
        let mut refresh = self.refresh.secs;
        if self.refresh.ratio > 0.0 {
            let tail = self.victim_list_tail();
            if tail != NIL {
                let age = now.saturating_sub(last_access(tail));
                refresh = refresh.max((f64::from(age) * self.refresh.ratio) as u32);
            }
        }
        now.saturating_sub(last_access(id)) >= refresh
    }

    /// The item eviction takes next, if any.
    pub fn victim(&self) -> Option<u32> {
        let t = self.victim_list_tail();
        (t != NIL).then_some(t)
    }

    /// The first item from the eviction end that `ok` accepts, looking at
    /// no more than `tries` items (CacheLib skips items in use the same
    /// way); `prev` follows the links toward the head.
    pub fn victim_where(
        &self,
        prev: impl Fn(u32) -> u32,
        mut ok: impl FnMut(u32) -> bool,
        tries: usize,
    ) -> Option<u32> {
        let mut left = tries;
        for q in [2, 1, 0] {
            let mut at = self.lists[q].tail;
            while at != NIL {
                if left == 0 {
                    return None;
                }
                if ok(at) {
                    return Some(at);
                }
                left -= 1;
                at = prev(at);
            }
        }
        None
    }

    fn victim_list_tail(&self) -> u32 {
        for q in [2, 1, 0] {
            if self.lists[q].tail != NIL {
                return self.lists[q].tail;
            }
        }
        NIL
    }

    /// Keeps the insertion point where the last 1/2^k of the LRU starts.
    fn balance_ip(&mut self, m: &mut impl Links) {
        let Policy::Lru { ip_spec } = self.policy else {
            return;
        };
        if ip_spec == 0 {
            return;
        }
        let list = self.lists[0];
        if list.len == 0 {
            self.ip = NIL;
            self.tail_size = 0;
            return;
        }
        let target = (list.len >> ip_spec.min(63)).max(1);
        if self.ip == NIL {
            self.ip = list.tail;
            m.set_in_tail(self.ip, true);
            self.tail_size = 1;
        }
        while self.tail_size < target {
            let p = m.prev(self.ip);
            if p == NIL {
                break;
            }
            self.ip = p;
            m.set_in_tail(p, true);
            self.tail_size += 1;
        }
        while self.tail_size > target {
            m.set_in_tail(self.ip, false);
            self.ip = m.next(self.ip);
            self.tail_size -= 1;
        }
    }

    fn balance_2q(&mut self, m: &mut impl Links) {
        let Policy::TwoQ { hot_pct, cold_pct } = self.policy else {
            return;
        };
        let total = self.len();
        let hot_max = total * hot_pct as usize / 100;
        let warm_max = total * (100usize.saturating_sub((hot_pct + cold_pct) as usize)) / 100;
        while self.lists[0].len > hot_max.max(1) {
            let t = self.lists[0].tail;
            self.lists[0].remove(m, t);
            m.set_queue(t, 2);
            self.lists[2].push_head(m, t);
        }
        while self.lists[1].len > warm_max {
            let t = self.lists[1].tail;
            self.lists[1].remove(m, t);
            m.set_queue(t, 2);
            self.lists[2].push_head(m, t);
        }
    }

    /// Items in (hot, warm, cold), for stats and tests.
    pub fn queue_lens(&self) -> [usize; 3] {
        [self.lists[0].len, self.lists[1].len, self.lists[2].len]
    }

    /// Items from head to tail of list `q`, for tests.
    pub fn order(&self, m: &impl Links, q: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = self.lists[q].head;
        while at != NIL {
            out.push(at);
            at = m.next(at);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Links in plain vectors.
    #[derive(Default)]
    struct V {
        prev: Vec<u32>,
        next: Vec<u32>,
        queue: Vec<u8>,
        tail: Vec<bool>,
        access: Vec<u32>,
    }

    impl V {
        fn new(n: usize) -> V {
            V {
                prev: vec![NIL; n],
                next: vec![NIL; n],
                queue: vec![0; n],
                tail: vec![false; n],
                access: vec![0; n],
            }
        }
    }

    impl Links for V {
        fn prev(&self, id: u32) -> u32 {
            self.prev[id as usize]
        }
        fn next(&self, id: u32) -> u32 {
            self.next[id as usize]
        }
        fn set_prev(&mut self, id: u32, v: u32) {
            self.prev[id as usize] = v;
        }
        fn set_next(&mut self, id: u32, v: u32) {
            self.next[id as usize] = v;
        }
        fn queue(&self, id: u32) -> u8 {
            self.queue[id as usize]
        }
        fn set_queue(&mut self, id: u32, q: u8) {
            self.queue[id as usize] = q;
        }
        fn in_tail(&self, id: u32) -> bool {
            self.tail[id as usize]
        }
        fn set_in_tail(&mut self, id: u32, v: bool) {
            self.tail[id as usize] = v;
        }
        fn last_access(&self, id: u32) -> u32 {
            self.access[id as usize]
        }
        fn set_last_access(&mut self, id: u32, t: u32) {
            self.access[id as usize] = t;
        }
    }

    fn refresh(secs: u32) -> Refresh {
        Refresh {
            secs,
            ..Refresh::default()
        }
    }

    #[test]
    fn lru_evicts_least_recent_and_promotes_after_refresh() {
        let mut m = V::new(8);
        let mut c = Container::new(Policy::Lru { ip_spec: 0 }, refresh(10));
        for i in 0..4 {
            c.add(&mut m, i, 0);
        }
        assert_eq!(c.order(&m, 0), vec![3, 2, 1, 0]);
        assert_eq!(c.victim(), Some(0));
        // Within the refresh time an access does not move the item.
        c.record_access(&mut m, 0, 5, false);
        assert_eq!(c.victim(), Some(0));
        c.record_access(&mut m, 0, 10, false);
        assert_eq!(c.order(&m, 0), vec![0, 3, 2, 1]);
        assert_eq!(c.victim(), Some(1));
        // Writes do not promote by default.
        c.record_access(&mut m, 1, 100, true);
        assert_eq!(c.victim(), Some(1));
        c.remove(&mut m, 1);
        assert_eq!(c.victim(), Some(2));
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn insertion_point_puts_new_items_into_the_tail_region() {
        let mut m = V::new(64);
        // ip_spec 1: new items enter where the last half begins.
        let mut c = Container::new(Policy::Lru { ip_spec: 1 }, refresh(0));
        for i in 0..8 {
            c.add(&mut m, i, 0);
        }
        let order = c.order(&m, 0);
        assert_eq!(order.len(), 8);
        // Promote 0..4 to the head; a new item must land behind them.
        for i in 0..4 {
            c.record_access(&mut m, i, 1, false);
        }
        c.add(&mut m, 20, 2);
        let order = c.order(&m, 0);
        let pos = order.iter().position(|&x| x == 20).unwrap();
        assert!(pos >= 4, "new item at {pos} of {order:?}");
        // The tail region is half the list (rounded down).
        let in_tail = (0..64u32).filter(|&i| m.in_tail(i)).count();
        assert_eq!(in_tail, order.len() / 2);
        // Removing items keeps the invariants.
        for &i in &order {
            c.remove(&mut m, i);
            let n = c.len();
            let in_tail = (0..64u32).filter(|&i| m.in_tail(i)).count();
            assert_eq!(
                in_tail,
                if n == 0 { 0 } else { (n / 2).max(1) },
                "after removing {i}"
            );
        }
        assert_eq!(c.victim(), None);
    }

    #[test]
    fn two_q_keeps_hot_small_and_evicts_cold_first() {
        let mut m = V::new(128);
        let mut c = Container::new(
            Policy::TwoQ {
                hot_pct: 10,
                cold_pct: 40,
            },
            refresh(0),
        );
        for i in 0..100 {
            c.add(&mut m, i, i);
        }
        let [hot, warm, cold] = c.queue_lens();
        assert_eq!(hot, 10);
        assert_eq!(warm, 0);
        assert_eq!(cold, 90);
        // The oldest item is cold's tail.
        assert_eq!(c.victim(), Some(0));
        // A cold hit promotes to warm and is no longer the victim.
        c.record_access(&mut m, 0, 200, false);
        assert_eq!(m.queue(0), 1);
        assert_eq!(c.victim(), Some(1));
        // Warm beyond 50% falls back to cold.
        for i in 1..80 {
            c.record_access(&mut m, i, 300, false);
        }
        let [_, warm, _] = c.queue_lens();
        assert!(warm <= 50, "warm {warm}");
    }
}
