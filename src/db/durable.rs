//! Durable commits on the embedded SQLite file, by group commit.
//!
//! With `synchronous = FULL`, SQLite syncs the WAL at every commit while it holds the write lock,
//! so concurrent writers queue behind one fsync each. Ferrum commits with `synchronous = NORMAL`
//! (the WAL is written, not synced) and makes each write durable before its caller hears of it:
//! a committed write takes a ticket and waits for a sync of the WAL file that *began after* its
//! commit. One syncer thread runs those syncs back to back, each one covering every commit made
//! before it began, so many commits share one fsync and no writer holds the lock across one.
//!
//! Why this is as durable as FULL: Linux's fsync flushes a file's pages whoever wrote them, so
//! the syncer's own descriptor on `<file>-wal` covers the connections' writes; a checkpoint
//! (NORMAL keeps this) syncs the WAL before it copies frames into the database file and the
//! database file before the WAL is reused, so a frame is never overwritten before its copy is
//! on disk; a WAL file new to the syncer has its directory synced too, so the file itself is
//! found after a crash.

use std::{
    collections::VecDeque,
    fs::File,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::{Arc, Condvar, Mutex, PoisonError},
};

use tokio::sync::watch;

/// How many failed syncs are remembered, so that each of their waiters learns of its own.
const FAILURES_KEPT: usize = 64;

/// The syncer of one database file. Dropping it stops its thread.
pub struct WalSyncer {
    shared: Arc<Shared>,
}

struct Shared {
    db_file: PathBuf,
    wal: PathBuf,
    state: Mutex<State>,
    wake: Condvar,
    /// The last ticket the syncer has dealt with (synced, or failed to).
    done: watch::Sender<u64>,
}

#[derive(Default)]
struct State {
    /// The last ticket handed out.
    issued: u64,
    /// Tickets whose sync failed: (first, last, why).
    failures: VecDeque<(u64, u64, Arc<str>)>,
    stop: bool,
}

impl WalSyncer {
    /// Starts the syncer of the SQLite database file `db_file`.
    pub fn start(db_file: &Path) -> std::io::Result<WalSyncer> {
        let mut wal = db_file.as_os_str().to_owned();
        wal.push("-wal");
        let shared = Arc::new(Shared {
            db_file: db_file.to_owned(),
            wal: PathBuf::from(wal),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            done: watch::Sender::new(0),
        });
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("ferrum-wal-sync".to_owned())
            .spawn(move || thread_shared.run())?;
        Ok(WalSyncer { shared })
    }

    /// Syncs the database file itself and its directory: once, after it was created or
    /// migrated, when its first page (which says it is in WAL mode) may not be on disk yet.
    pub fn sync_database_file(&self) -> std::io::Result<()> {
        File::open(&self.shared.db_file)?.sync_all()?;
        sync_directory_of(&self.shared.db_file)
    }

    /// Waits until every write committed before this call is on disk. Err says why it may not
    /// be (the sync failed): the caller must not report its write as done.
    pub async fn sync(&self) -> Result<(), Arc<str>> {
        let ticket = {
            let mut state = self.shared.lock();
            state.issued += 1;
            state.issued
        };
        self.shared.wake.notify_one();
        crate::metrics::get().durable_write();
        let mut done = self.shared.done.subscribe();
        // The sender lives as long as `self`, which the caller borrows.
        let _ = done.wait_for(|&d| d >= ticket).await;
        let state = self.shared.lock();
        match state
            .failures
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&ticket))
        {
            Some((_, _, why)) => Err(why.clone()),
            None => Ok(()),
        }
    }
}

impl Drop for WalSyncer {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn run(&self) {
        let mut wal: Option<(File, u64)> = None;
        let mut done = 0;
        loop {
            let target = {
                let mut state = self.lock();
                while state.issued == done && !state.stop {
                    state = self
                        .wake
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if state.stop && state.issued == done {
                    return;
                }
                state.issued
            };
            crate::metrics::get().wal_sync();
            if let Err(e) = self.sync_wal(&mut wal) {
                // A failed fsync may have dropped the pages it could not write: this descriptor
                // is not trusted again.
                wal = None;
                let why: Arc<str> =
                    format!("disk I/O error: syncing {}: {e}", self.wal.display()).into();
                tracing::error!(error = %why, "The database's changes could not be made durable");
                let mut state = self.lock();
                state.failures.push_back((done + 1, target, why));
                if state.failures.len() > FAILURES_KEPT {
                    state.failures.pop_front();
                }
            }
            done = target;
            self.done.send_replace(done);
        }
    }

    /// Syncs the WAL file as it is now: the one open if it is still the file at the WAL's
    /// path, else the file there now (with its directory, the first time). No WAL file means
    /// nothing to sync: its frames were checkpointed, and the checkpoint synced them.
    fn sync_wal(&self, open: &mut Option<(File, u64)>) -> std::io::Result<()> {
        let inode = match std::fs::metadata(&self.wal) {
            Ok(meta) => meta.ino(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        if let Some((file, ino)) = open
            && *ino == inode
        {
            return file.sync_data();
        }
        let file = File::open(&self.wal)?;
        file.sync_data()?;
        sync_directory_of(&self.wal)?;
        *open = Some((file, inode));
        Ok(())
    }
}

/// Syncs the directory holding `path`, so that a file created there is found after a crash.
pub fn sync_directory_of(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ferrum-durable-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[tokio::test]
    async fn every_caller_is_answered_and_a_missing_wal_is_nothing_to_sync() {
        let dir = temp_dir();
        let db = dir.join("x.sqlite");
        let syncer = WalSyncer::start(&db).expect("syncer");
        // No WAL file yet.
        syncer.sync().await.expect("nothing to sync");
        std::fs::write(dir.join("x.sqlite-wal"), b"frames").expect("wal");
        let syncer = Arc::new(syncer);
        let waits: Vec<_> = (0..50)
            .map(|_| {
                let s = syncer.clone();
                tokio::spawn(async move { s.sync().await })
            })
            .collect();
        for w in waits {
            w.await.expect("joined").expect("synced");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_failed_sync_is_told_to_its_waiters_and_the_next_one_works() {
        let dir = temp_dir();
        // The WAL's path runs through a regular file: looking it up fails (not a directory),
        // which is no missing WAL but a failure, even for root.
        let blocker = dir.join("blocker");
        std::fs::write(&blocker, b"").expect("file");
        let syncer = WalSyncer::start(&blocker.join("x.sqlite")).expect("syncer");
        let why = syncer.sync().await.expect_err("the sync fails");
        assert!(why.contains("disk I/O error"), "{why}");
        // The cause goes away: the next caller's sync works.
        std::fs::remove_file(&blocker).expect("rm");
        std::fs::create_dir(&blocker).expect("dir");
        std::fs::write(blocker.join("x.sqlite-wal"), b"frames").expect("wal");
        syncer
            .sync()
            .await
            .expect("synced once the cause went away");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
