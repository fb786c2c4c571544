//! The release `agentd` binary as a child process: exact environment, a temporary SQLite file, output drained on
//! threads, its `listening on <addr>` line parsed; killed on drop.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use tempfile::TempDir;

use crate::common::ENCRYPTION_KEY;

const START_TIMEOUT: Duration = Duration::from_secs(20);

pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
    _dir: TempDir,
}

impl ServerProcess {
    /// Starts `agentd serve` on a free port with `env` on top of the benchmark defaults.
    pub fn start(env: &[(&str, &str)]) -> ServerProcess {
        let dir = tempfile::tempdir().expect("temporary directory");
        let database_url = format!("sqlite://{}/agentd.db", dir.path().display());
        // `BENCH_SERVER_WRAPPER` (e.g. `valgrind --tool=massif`) runs the server under a profiler; the memory
        // figures are then the wrapper's.
        let wrapper = std::env::var("BENCH_SERVER_WRAPPER").unwrap_or_default();
        let mut words = wrapper.split_whitespace();
        let mut command = match words.next() {
            Some(program) => {
                let mut command = Command::new(program);
                command.args(words).arg(env!("CARGO_BIN_EXE_agentd"));
                command
            }
            None => Command::new(env!("CARGO_BIN_EXE_agentd")),
        };
        // A clean environment, run from the temporary directory so that no `.env` file is read.
        command.env_clear().current_dir(dir.path());
        if let Ok(path) = std::env::var("PATH") {
            command.env("PATH", path);
        }
        command
            .env("BIND_ADDR", "127.0.0.1:0")
            .env("APP_ENV", "development")
            .env("ENCRYPTION_KEY", ENCRYPTION_KEY)
            .env("DATABASE_URL", &database_url);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the agentd binary");
        let logs = Arc::new(Mutex::new(Vec::<String>::new()));
        let (addr_tx, addr_rx) = mpsc::channel();
        let pipes: [Box<dyn Read + Send>; 2] = [
            Box::new(child.stdout.take().expect("piped stdout")),
            Box::new(child.stderr.take().expect("piped stderr")),
        ];
        for pipe in pipes {
            let (logs, addr_tx) = (logs.clone(), addr_tx.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    if let Some(addr) = line
                        .split("listening on ")
                        .nth(1)
                        .and_then(|rest| rest.split_whitespace().next())
                        .and_then(|a| a.parse::<SocketAddr>().ok())
                    {
                        let _ = addr_tx.send(addr);
                    }
                    let mut logs = logs.lock().expect("log lock");
                    if logs.len() < 200 {
                        logs.push(line);
                    }
                }
            });
        }
        let addr = match addr_rx.recv_timeout(START_TIMEOUT) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let logs = logs.lock().expect("log lock").join("\n");
                panic!("agentd did not report `listening on` within {START_TIMEOUT:?}; output:\n{logs}");
            }
        };
        ServerProcess { child, addr, _dir: dir }
    }

    /// Resident memory of the server process (`VmRSS` in /proc/<pid>/status), in KB.
    pub fn vm_rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
