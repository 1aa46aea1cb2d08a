//! The requests a server took and the outcome of each, by correlation id, until the broker has
//! surely had its ack: a request delivered again is answered with its first handling's outcome
//! instead of being handled twice.
//!
//! The broker delivers a request again when the channel it came on was lost before the ack
//! reached it (the broker node the conductor was connected to died, say; a quorum queue's
//! leader that died before it replicated the ack loses it too). Handled a second time, a request
//! would be applied again whenever another request changed its node in between (the node keeps
//! only the key of the last request applied to it: `conductor::task::change_node`), and a create
//! would answer 409 for what it created itself. So each request taken is remembered while it
//! runs; a delivery of it meanwhile waits for its outcome. Once it ended it is kept while its
//! ack may still be lost: until a later delivery of it is acked, when its own ack failed (its
//! channel was gone), or else among the [`RECENT`] last ones acked (an ack written to a socket
//! that died, or taken by a node that died, is not known to be lost).
//!
//! Only within one process: a conductor that restarts starts with nothing, and what was sent to
//! it before is not run anyway (`amqp.rs`: its callers delete a queue left unserved, and a
//! request read after its caller gave up is refused).

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use lapin::types::ShortString;
use tokio::sync::watch;

/// How many requests acked without a fault stay remembered: those whose ack may still have been
/// in flight when a connection died. Their replies are small (a node's JSON at most).
const RECENT: usize = 256;
/// How long a request whose ack failed is remembered for a delivery again: the broker delivers
/// it again as soon as the consumer is back, within seconds.
const FAILED_ACK_KEPT: Duration = Duration::from_secs(600);
/// At most so many requests whose ack failed are remembered (the oldest go first).
const FAILED_ACK_MAX: usize = 4096;

/// What handling a request came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// This reply (sent when the request asked for one), then the ack.
    Replied(Arc<[u8]>),
    /// Rejected without requeue (dead-lettered), after this reply if any (the error its caller
    /// is told): it could not be handled.
    Rejected(Option<Arc<[u8]>>),
}

/// One request remembered: its outcome once known, and whether its ack failed.
struct Entry {
    outcome: watch::Receiver<Option<Outcome>>,
    /// When its ack failed: kept for a delivery again, up to [`FAILED_ACK_KEPT`].
    ack_failed: Option<Instant>,
}

#[derive(Default)]
struct Memory {
    entries: HashMap<ShortString, Entry>,
    /// The requests acked without a fault, oldest first, at most [`RECENT`].
    recent: VecDeque<ShortString>,
}

/// The memory of one server, shared by all its attachments to its queue.
#[derive(Default)]
pub(super) struct Unacked {
    memory: Mutex<Memory>,
}

/// A delivery, as the memory sees it.
pub(super) enum Taken {
    /// Not seen before (or without a correlation id to tell): to be handled, and the outcome
    /// told to [`Handling::ended`].
    First(Handling),
    /// Taken before: its first handling's outcome, once it ends; None if that ended without one
    /// (its task was stopped): then it is handled as new (`take` again).
    Again(watch::Receiver<Option<Outcome>>),
}

/// A request being handled for the first time.
pub(super) struct Handling {
    unacked: Arc<Unacked>,
    id: Option<ShortString>,
    outcome: watch::Sender<Option<Outcome>>,
}

impl Unacked {
    /// Takes a delivery with correlation id `id`.
    pub(super) fn take(self: &Arc<Self>, id: Option<&ShortString>) -> Taken {
        let (outcome, watching) = watch::channel(None);
        let Some(id) = id else {
            return Taken::First(Handling {
                unacked: self.clone(),
                id: None,
                outcome,
            });
        };
        let mut memory = self.lock();
        if let Some(entry) = memory.entries.get(id) {
            return Taken::Again(entry.outcome.clone());
        }
        memory.entries.insert(
            id.clone(),
            Entry {
                outcome: watching,
                ack_failed: None,
            },
        );
        Taken::First(Handling {
            unacked: self.clone(),
            id: Some(id.clone()),
            outcome,
        })
    }

    /// A delivery taken again was answered with the remembered outcome, and `acked` says
    /// whether its ack went out.
    pub(super) fn answered_again(&self, id: Option<&ShortString>, acked: bool) {
        let Some(id) = id else { return };
        let mut memory = self.lock();
        if acked {
            memory.forget_later(id);
        } else if let Some(entry) = memory.entries.get_mut(id) {
            entry.ack_failed = Some(Instant::now());
        }
    }

    /// How many requests are remembered (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().entries.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Memory {
    /// Keeps `id` among the [`RECENT`] acked ones, forgetting the oldest beyond them.
    fn forget_later(&mut self, id: &ShortString) {
        if let Some(entry) = self.entries.get_mut(id) {
            entry.ack_failed = None;
        }
        self.recent.push_back(id.clone());
        while self.recent.len() > RECENT {
            if let Some(old) = self.recent.pop_front()
                // An entry whose ack failed since it was acked once is kept for that.
                && self
                    .entries
                    .get(&old)
                    .is_some_and(|entry| entry.ack_failed.is_none())
            {
                self.entries.remove(&old);
            }
        }
    }

    /// Forgets requests whose ack failed longer ago than [`FAILED_ACK_KEPT`], and the oldest of
    /// them beyond [`FAILED_ACK_MAX`].
    fn prune_failed(&mut self, now: Instant) {
        let failed = |entries: &HashMap<ShortString, Entry>| {
            entries.values().filter(|e| e.ack_failed.is_some()).count()
        };
        self.entries.retain(|_, entry| {
            entry
                .ack_failed
                .is_none_or(|at| now.duration_since(at) < FAILED_ACK_KEPT)
        });
        while failed(&self.entries) > FAILED_ACK_MAX {
            let oldest = self
                .entries
                .iter()
                .filter_map(|(id, entry)| entry.ack_failed.map(|at| (at, id.clone())))
                .min();
            match oldest {
                Some((_, id)) => self.entries.remove(&id),
                None => break,
            };
        }
    }
}

impl Handling {
    /// The request was handled to `outcome`, and `acked` says whether its ack (or reject)
    /// went out. Deliveries of it waiting meanwhile get the outcome.
    pub(super) fn ended(self, outcome: Outcome, acked: bool) {
        self.outcome.send_replace(Some(outcome));
        let Some(id) = &self.id else { return };
        let mut memory = self.unacked.lock();
        if acked {
            memory.forget_later(id);
        } else {
            let now = Instant::now();
            if let Some(entry) = memory.entries.get_mut(id) {
                entry.ack_failed = Some(now);
            }
            memory.prune_failed(now);
        }
    }
}

impl Drop for Handling {
    /// A handling stopped before its outcome (its task aborted) is forgotten: a delivery again
    /// is then handled anew.
    fn drop(&mut self) {
        if self.outcome.borrow().is_some() {
            return;
        }
        if let Some(id) = &self.id {
            self.unacked.lock().entries.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> ShortString {
        ShortString::from(s.to_owned())
    }

    fn reply(bytes: &[u8]) -> Outcome {
        Outcome::Replied(Arc::from(bytes))
    }

    /// A delivery of a request taken before waits for the first handling's outcome and gets it,
    /// whether that handling's ack went out or not; the memory keeps what may be delivered
    /// again and no more.
    #[tokio::test]
    async fn a_request_delivered_again_gets_its_first_outcome() {
        let unacked = Arc::new(Unacked::default());
        let Taken::First(first) = unacked.take(Some(&id("a"))) else {
            panic!("a new request is handled");
        };
        let Taken::Again(mut waiting) = unacked.take(Some(&id("a"))) else {
            panic!("a request taken before is not handled again");
        };
        assert_eq!(*waiting.borrow(), None, "still running");
        first.ended(reply(b"done"), false);
        let got = waiting.wait_for(Option::is_some).await.expect("outcome");
        assert_eq!(*got, Some(reply(b"done")));
        drop(got);
        // Its ack failed: it is kept until a delivery again is acked, then among the recent.
        assert_eq!(unacked.len(), 1);
        unacked.answered_again(Some(&id("a")), true);
        assert!(matches!(unacked.take(Some(&id("a"))), Taken::Again(_)));

        // Acked at once: kept among the last RECENT only.
        for n in 0..RECENT {
            let Taken::First(handling) = unacked.take(Some(&id(&format!("r{n}")))) else {
                panic!("r{n} is new");
            };
            handling.ended(Outcome::Rejected(None), true);
        }
        assert_eq!(unacked.len(), RECENT, "'a' went out with the oldest");
        assert!(matches!(unacked.take(Some(&id("a"))), Taken::First(_)));
        let Taken::Again(rejected) = unacked.take(Some(&id("r1"))) else {
            panic!("r1 is among the recent");
        };
        assert_eq!(*rejected.borrow(), Some(Outcome::Rejected(None)));
    }

    /// A handling stopped without an outcome is forgotten, and a request without a
    /// correlation id is never remembered.
    #[test]
    fn what_cannot_be_told_again_is_not_remembered() {
        let unacked = Arc::new(Unacked::default());
        let Taken::First(first) = unacked.take(Some(&id("a"))) else {
            panic!("new");
        };
        let Taken::Again(waiting) = unacked.take(Some(&id("a"))) else {
            panic!("taken");
        };
        drop(first);
        assert!(
            waiting.has_changed().is_err(),
            "the waiting delivery learns it"
        );
        assert!(matches!(unacked.take(Some(&id("a"))), Taken::First(_)));
        assert!(matches!(unacked.take(None), Taken::First(_)));
        assert!(matches!(unacked.take(None), Taken::First(_)));
        assert_eq!(unacked.len(), 0);
    }

    /// Requests whose ack failed are forgotten after FAILED_ACK_KEPT, and beyond
    /// FAILED_ACK_MAX the oldest first.
    #[test]
    fn failed_acks_are_kept_for_a_while_and_in_bounds() {
        let mut memory = Memory::default();
        let (_, outcome) = watch::channel(None);
        let now = Instant::now();
        for n in 0..FAILED_ACK_MAX + 2 {
            let at = now - Duration::from_secs(1) + Duration::from_millis(n as u64 / 8);
            memory.entries.insert(
                id(&format!("f{n}")),
                Entry {
                    outcome: outcome.clone(),
                    ack_failed: Some(at),
                },
            );
        }
        memory.entries.insert(
            id("old"),
            Entry {
                outcome: outcome.clone(),
                ack_failed: Some(now - FAILED_ACK_KEPT - Duration::from_secs(1)),
            },
        );
        memory.prune_failed(now);
        assert_eq!(memory.entries.len(), FAILED_ACK_MAX);
        assert!(!memory.entries.contains_key(&id("old")));
        assert!(!memory.entries.contains_key(&id("f0")));
        assert!(
            memory
                .entries
                .contains_key(&id(&format!("f{}", FAILED_ACK_MAX + 1)))
        );
    }
}
