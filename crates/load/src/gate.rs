//! A rendezvous for parallel searches that tolerates failures: each of `n`
//! participants either arrives (with a value) or leaves; everyone waiting is
//! released once all have done one or the other, and sees what the others
//! brought. FeedSim's autoscale runs one search per instance and lines the
//! instances up before their final runs with it; an instance that fails
//! leaves instead of blocking the others forever.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
enum Slot<T> {
    Pending,
    Arrived(T),
    Left,
}

/// The rendezvous; share it with `Arc`.
#[derive(Debug)]
pub struct Gate<T> {
    slots: Mutex<Vec<Slot<T>>>,
    cv: Condvar,
}

/// Why [`Gate::arrive`] returned without everyone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateError {
    /// The stop flag was raised while waiting.
    Stopped,
}

impl<T: Clone> Gate<T> {
    pub fn new(participants: usize) -> Arc<Self> {
        Arc::new(Gate {
            slots: Mutex::new(vec![Slot::Pending; participants]),
            cv: Condvar::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Slot<T>>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Participant `id` arrives with `value` and waits until every
    /// participant has arrived or left (or `stop` is raised). Returns each
    /// participant's value, `None` for those that left.
    pub fn arrive(
        &self,
        id: usize,
        value: T,
        stop: &AtomicBool,
    ) -> Result<Vec<Option<T>>, GateError> {
        let mut g = self.lock();
        if matches!(g[id], Slot::Pending) {
            g[id] = Slot::Arrived(value);
        }
        self.cv.notify_all();
        loop {
            if g.iter().all(|s| !matches!(s, Slot::Pending)) {
                return Ok(g
                    .iter()
                    .map(|s| match s {
                        Slot::Arrived(v) => Some(v.clone()),
                        _ => None,
                    })
                    .collect());
            }
            if stop.load(Ordering::SeqCst) {
                return Err(GateError::Stopped);
            }
            g = self
                .cv
                .wait_timeout(g, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Participant `id` will not arrive; a no-op when it already has.
    pub fn leave(&self, id: usize) {
        let mut g = self.lock();
        if matches!(g[id], Slot::Pending) {
            g[id] = Slot::Left;
            self.cv.notify_all();
        }
    }

    /// How many participants have neither arrived nor left.
    pub fn pending(&self) -> usize {
        self.lock()
            .iter()
            .filter(|s| matches!(s, Slot::Pending))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn releases_when_all_arrive_and_shares_values() {
        let gate = Gate::new(3);
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let (g, s) = (gate.clone(), stop.clone());
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(30 * i as u64));
                    g.arrive(i, i * 10, &s).unwrap()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), vec![Some(0), Some(10), Some(20)]);
        }
    }

    #[test]
    fn a_participant_that_leaves_does_not_block_the_others() {
        let gate = Gate::new(2);
        let stop = AtomicBool::new(false);
        let g2 = gate.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            g2.leave(1);
        });
        let got = gate.arrive(0, "a", &stop).unwrap();
        t.join().unwrap();
        assert_eq!(got, vec![Some("a"), None]);
        // Leaving after arriving changes nothing.
        gate.leave(0);
        assert_eq!(gate.arrive(0, "b", &stop).unwrap(), vec![Some("a"), None]);
    }

    #[test]
    fn stop_ends_the_wait() {
        let gate: Arc<Gate<u8>> = Gate::new(2);
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            s2.store(true, Ordering::SeqCst);
        });
        let t = Instant::now();
        assert_eq!(gate.arrive(0, 1, &stop), Err(GateError::Stopped));
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(gate.pending(), 1);
    }
}
