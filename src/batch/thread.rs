//! A thread of its own, with a single-threaded runtime of its own, for a batcher's rounds.

use tokio::sync::oneshot;

/// A thread with a runtime of its own, on which batchers' rounds run (`Settings::runs_on`): a round that is a chain
/// of hand-overs to another thread and back (a SQLite connection's statements) waits for nothing else on it, where
/// on the app's runtime each answer waits its turn behind the requests its workers are busy with. It stops when the
/// last batcher holding it goes (a round still running is dropped).
pub struct Thread {
    runtime: tokio::runtime::Handle,
    /// Dropped with the last holder: the thread's runtime stops.
    _stop: oneshot::Sender<()>,
}

impl Thread {
    /// Starts the thread, named `name`.
    pub fn start(name: &str) -> std::io::Result<Thread> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new().name(name.into()).spawn(move || {
            runtime.block_on(async {
                let _ = stopped.await;
            })
        })?;
        Ok(Thread {
            runtime: handle,
            _stop: stop,
        })
    }

    pub(super) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }
}
