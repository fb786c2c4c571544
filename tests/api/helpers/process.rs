//! The compiled `agentd` binary as a child process: started with an exact environment, its output collected line by
//! line, its `listening on` address parsed, stopped with SIGTERM.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The compiled `agentd` binary running as a child process, its output collected line by line.
pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
    logs: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

/// How a process run ended: its exit status (None when it had to be killed) and everything it printed.
pub struct ProcessOutcome {
    pub status: Option<ExitStatus>,
    pub logs: String,
}

fn agentd_command(env: &[(&str, &str)], cwd: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentd"));
    command.env_clear().current_dir(cwd);
    if let Ok(path) = std::env::var("PATH") {
        command.env("PATH", path);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Spawns one thread per output pipe; each appends lines to `logs` and reports a `listening on` address.
fn collect_output(
    child: &mut Child,
    logs: &Arc<Mutex<String>>,
    addr_tx: mpsc::Sender<SocketAddr>,
) -> Vec<JoinHandle<()>> {
    let pipes: Vec<Box<dyn Read + Send>> = vec![
        Box::new(child.stdout.take().expect("piped stdout")),
        Box::new(child.stderr.take().expect("piped stderr")),
    ];
    pipes
        .into_iter()
        .map(|pipe| {
            let logs = Arc::clone(logs);
            let addr_tx = addr_tx.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(pipe);
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    match reader.read_until(b'\n', &mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    let line = String::from_utf8_lossy(&buf).into_owned();
                    logs.lock().unwrap().push_str(&line);
                    if let Some(addr) = listening_addr(&line) {
                        let _ = addr_tx.send(addr);
                    }
                }
            })
        })
        .collect()
}

/// Finds the address in a `listening on <addr>` log line, ANSI colours and field syntax notwithstanding.
fn listening_addr(line: &str) -> Option<SocketAddr> {
    let plain = strip_ansi(line);
    let rest = &plain[plain.find("listening on")? + "listening on".len()..];
    rest.split(|c: char| !(c.is_ascii_hexdigit() || matches!(c, '.' | ':' | '[' | ']')))
        .find_map(|token| token.trim_matches(':').parse().ok())
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The binary started with exactly `env` (plus PATH) in `cwd`, its output collected, and its `listening on` address
/// waited for (a panic with its output when it never comes).
fn spawn_listening(env: &[(&str, &str)], cwd: &Path) -> ServerProcess {
    let mut child = agentd_command(env, cwd).spawn().expect("spawn the agentd binary");
    let logs = Arc::new(Mutex::new(String::new()));
    let (addr_tx, addr_rx) = mpsc::channel();
    let readers = collect_output(&mut child, &logs, addr_tx);
    match addr_rx.recv_timeout(Duration::from_secs(60)) {
        Ok(addr) => ServerProcess {
            child,
            addr,
            logs,
            readers,
        },
        Err(_) => {
            let _ = child.kill();
            let status = child.wait().ok();
            for reader in readers {
                let _ = reader.join();
            }
            panic!(
                "agentd never logged `listening on` (exit: {status:?}); output:\n{}",
                logs.lock().unwrap()
            );
        }
    }
}

impl ServerProcess {
    /// Starts the binary with exactly `env` (plus PATH) in `cwd` and waits for its `listening on` line.
    pub fn start(env: &[(&str, &str)], cwd: &Path) -> ServerProcess {
        spawn_listening(env, cwd)
    }

    /// The process id (to read its memory figures from `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().clone()
    }

    /// Sends SIGTERM and waits up to `timeout` for the process to exit (killing it after that).
    pub fn terminate(self, timeout: Duration) -> ProcessOutcome {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("run kill");
        assert!(sent.success(), "kill -TERM {pid} failed");
        self.wait(timeout)
    }

    /// Waits up to `timeout` for the process to exit (killing it after that), then for its output.
    fn wait(mut self, timeout: Duration) -> ProcessOutcome {
        let status = wait_with_timeout(&mut self.child, timeout);
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        ProcessOutcome {
            status,
            logs: self.logs(),
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits for the child's exit; `None` (after killing it) when it outlives `timeout`.
fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("poll the child") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process that serves and is expected to stop on its own mid-run (the fault switch's exit): started on a port it
/// picks itself (`BIND_ADDR=127.0.0.1:0`, read off its `listening on` line, so no other test's socket can take the
/// port between a choice and the bind), with a thread waiting for its exit.
pub struct ExitingProcess {
    pub addr: SocketAddr,
    waiter: JoinHandle<ProcessOutcome>,
}

impl ExitingProcess {
    /// Starts the binary with `env` (whose `BIND_ADDR` is replaced by port 0) and waits for its address; the process
    /// is killed after `timeout`.
    pub fn start(env: &[(&str, &str)], cwd: &Path, timeout: Duration) -> ExitingProcess {
        let env: Vec<(&str, &str)> = env
            .iter()
            .filter(|(k, _)| *k != "BIND_ADDR")
            .copied()
            .chain([("BIND_ADDR", "127.0.0.1:0")])
            .collect();
        let server = spawn_listening(&env, cwd);
        let addr = server.addr;
        let waiter = std::thread::spawn(move || server.wait(timeout));
        ExitingProcess { addr, waiter }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Waits (off the runtime's threads) for the exit.
    pub async fn exit(self) -> ProcessOutcome {
        tokio::task::spawn_blocking(move || self.waiter.join().expect("the waiting thread"))
            .await
            .expect("the waiting task")
    }
}

/// Runs the binary expecting it to stop on its own (a refused configuration); kills it after `timeout`.
pub fn run_to_exit(env: &[(&str, &str)], cwd: &Path, timeout: Duration) -> ProcessOutcome {
    run_subcommand(&[], env, cwd, timeout)
}

/// Runs `agentd <args>` (a one-shot subcommand such as `audit verify`) to its exit; kills it after `timeout`.
pub fn run_subcommand(args: &[&str], env: &[(&str, &str)], cwd: &Path, timeout: Duration) -> ProcessOutcome {
    let mut child = agentd_command(env, cwd)
        .args(args)
        .spawn()
        .expect("spawn the agentd binary");
    let logs = Arc::new(Mutex::new(String::new()));
    let (addr_tx, _addr_rx) = mpsc::channel();
    let readers = collect_output(&mut child, &logs, addr_tx);
    let status = wait_with_timeout(&mut child, timeout);
    for reader in readers {
        let _ = reader.join();
    }
    let logs = logs.lock().unwrap().clone();
    ProcessOutcome { status, logs }
}

#[test]
fn listening_lines_are_parsed_in_every_log_format() {
    let expected: SocketAddr = "127.0.0.1:4242".parse().unwrap();
    for line in [
        "2026-11-22T00:00:00Z  INFO agentd::app: listening on 127.0.0.1:4242",
        "\u{1b}[32m INFO\u{1b}[0m \u{1b}[2magentd\u{1b}[0m: listening on \u{1b}[3maddr\u{1b}[0m=127.0.0.1:4242",
        r#"{"level":"INFO","fields":{"message":"listening on 127.0.0.1:4242"}}"#,
        "listening on addr=127.0.0.1:4242\n",
    ] {
        assert_eq!(listening_addr(line), Some(expected), "{line}");
    }
    assert_eq!(listening_addr("starting up"), None);
}
