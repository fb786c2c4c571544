//! `docs/guide.md` run as written against `scripts/demo.sh`: every ```sh block of the guide, in order, in one bash
//! session, with only the variables the demo prints (`export NAME=value` lines before `DEMO_READY`) added to its
//! environment. `curl` is wrapped to check each answer's status: a 2xx passes, any other only when the same block
//! names that status in a comment (the guide's documented outcome, such as the 409 of cancelling a mined transfer).
//! A stream (`curl -N`) that is still open after 5 s counts as answered. The guide's sponsored gas (its §13b) is
//! checked from its answers (a transfer and a batch sponsored, the agent's ETH 0 before and after), and its delegation
//! walk (its §14) on the chain itself too: what moved from the owner's account, and that the delegation is disabled
//! there.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// The demo, stopped with SIGTERM (its own cleanup then stops anvil, agentd and the paywall) when dropped.
struct Demo {
    child: Child,
    vars: Vec<(String, String)>,
    /// The demo's output, read on by a thread that keeps the pipe open: a closed pipe would end the demo at its next
    /// line of output.
    _lines: std::sync::mpsc::Receiver<String>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..150 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_demo(dir: &Path) -> Demo {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let stderr = std::fs::File::create(dir.join("demo.stderr")).unwrap();
    let mut child = Command::new("bash")
        .arg(format!("{REPO}/scripts/demo.sh"))
        .env("AGENTD_BIN", env!("CARGO_BIN_EXE_agentd"))
        .env("DEMO_PORT", port.to_string())
        .env_remove("DEMO_EXIT_AFTER_SETUP")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("the demo script starts");
    let stdout = child.stdout.take().unwrap();
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                // The test is done with the demo; keep draining so that it never blocks on a full pipe.
                continue;
            }
        }
    });
    let mut demo = Demo {
        child,
        vars: Vec::new(),
        _lines: lines,
    };
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        let line = match demo._lines.recv_timeout(wait) {
            Ok(line) => line,
            Err(_) => {
                let stderr = std::fs::read_to_string(dir.join("demo.stderr")).unwrap_or_default();
                panic!("the demo ended or stalled before DEMO_READY:\n{seen}\n{stderr}");
            }
        };
        seen.push_str(&line);
        seen.push('\n');
        if line == "DEMO_READY" {
            assert!(!demo.vars.is_empty(), "the demo printed no variables:\n{seen}");
            return demo;
        }
        if let Some((name, value)) = line.strip_prefix("export ").and_then(|rest| rest.split_once('=')) {
            demo.vars.push((name.to_string(), value.to_string()));
        }
    }
}

/// The guide's ```sh blocks, in order.
fn sh_blocks(guide: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in guide.lines() {
        match current.as_mut() {
            None if line.trim_end() == "```sh" => current = Some(String::new()),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.push(current.take().unwrap()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    assert!(current.is_none(), "an unterminated ```sh block in docs/guide.md");
    blocks
}

/// Defines the checking `curl` and runs each block file in turn, marking where it is.
const PRELUDE: &str = r##"set -euo pipefail
curl() {
  local headers rc=0 status stream=()
  headers="$(mktemp)"
  for arg in "$@"; do [ "$arg" = "-N" ] && stream=(--max-time 5); done
  command curl -D "$headers" "${stream[@]}" "$@" || rc=$?
  status="$(awk '/^HTTP\//{s=$2} END{print s}' "$headers")"
  rm -f "$headers"
  if [ "$rc" -eq 28 ] && [ "${#stream[@]}" -gt 0 ] && [ "$status" = 200 ]; then rc=0; fi
  if [ "$rc" -ne 0 ]; then echo "GUIDE: curl exited $rc (HTTP ${status:-none}): curl $*" >&2; return "$rc"; fi
  case "$status" in
    2??) ;;
    *) if ! grep -Eq "#.*(^|[^0-9])$status([^0-9]|$)" <<<"$GUIDE_BLOCK"; then
         echo "GUIDE: HTTP $status, which this block does not document: curl $*" >&2
         return 1
       fi ;;
  esac
}
"##;

#[test]
fn every_call_of_the_guide_runs_as_written_against_the_demo() {
    let dir = tempfile::tempdir().unwrap();
    // The guide runs from the repository's directory (`scripts/…`, `test-tools/…`); its answers (agent.json …)
    // are written here instead, beside links to the two directories it uses.
    let cwd: PathBuf = dir.path().join("repo");
    std::fs::create_dir(&cwd).unwrap();
    for name in ["scripts", "test-tools"] {
        std::os::unix::fs::symlink(format!("{REPO}/{name}"), cwd.join(name)).unwrap();
    }
    let guide = std::fs::read_to_string(format!("{REPO}/docs/guide.md")).unwrap();
    let blocks = sh_blocks(&guide);
    assert!(blocks.len() >= 20, "only {} sh blocks found", blocks.len());

    let mut script = String::from(PRELUDE);
    for (i, block) in blocks.iter().enumerate() {
        let file = dir.path().join(format!("block-{i}.sh"));
        std::fs::write(&file, block).unwrap();
        let file = file.display();
        script.push_str(&format!(
            "echo '::block {i}' >&2\nGUIDE_BLOCK=\"$(cat '{file}')\"\n. '{file}'\n"
        ));
    }
    script.push_str("echo '::done' >&2\n");
    std::fs::write(dir.path().join("guide.sh"), &script).unwrap();

    let demo = start_demo(dir.path());
    let output = Command::new("bash")
        .arg(dir.path().join("guide.sh"))
        .current_dir(&cwd)
        .envs(demo.vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .output()
        .expect("bash runs the guide");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let failed_block = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("::block "))
        .next_back()
        .and_then(|n| n.parse::<usize>().ok())
        .map(|n| blocks[n].clone())
        .unwrap_or_default();
    assert!(
        output.status.success() && stderr.contains("::done"),
        "the guide failed in this block:\n{failed_block}\n--- stderr:\n{stderr}\n--- stdout:\n{stdout}"
    );

    // What the calls did, seen through their answers on disk: the agent was made, a chat turn answered, and the
    // guide's transfer went out.
    let agent: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cwd.join("agent.json")).unwrap()).unwrap();
    assert!(agent["access_token"].as_str().unwrap().starts_with("agt_"));
    let transfer: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cwd.join("transfer.json")).unwrap()).unwrap();
    assert_eq!(transfer["chain"], "base", "{transfer}");
    // The sample paywall was paid: its answer is in the output.
    assert!(stdout.contains("the paid sample report"), "{stdout}");
    sponsored_walk(&cwd);
    delegation_walk(&cwd, &demo);
    drop(demo);
}

/// The guide's §13b, from its answers on disk: the demo agent held no ETH before and after a USDC transfer whose gas
/// the operator's sponsorship paid (its user operation, bundle and cost recorded), and an approve-and-swap batch went
/// out as one sponsored operation.
fn sponsored_walk(cwd: &Path) {
    let read = |file: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(cwd.join(file)).unwrap()).unwrap()
    };
    let eth = std::fs::read_to_string(cwd.join("demo-eth.txt")).unwrap();
    assert_eq!(
        eth.lines().collect::<Vec<_>>(),
        ["0", "0"],
        "the demo agent's ETH: {eth}"
    );
    let sponsored = read("sponsored.json");
    assert_eq!(sponsored["status"], "confirmed", "{sponsored}");
    assert_eq!(sponsored["gas"], "sponsored", "{sponsored}");
    for field in ["user_op_hash", "bundle_hash", "gas_cost"] {
        assert!(sponsored["sponsorship"][field].is_string(), "{field} in {sponsored}");
    }
    let batch = read("batch.json");
    assert_eq!(batch["gas"], "sponsored", "{batch}");
    assert_eq!(batch["calls"].as_array().map(Vec::len), Some(2), "{batch}");
    assert_eq!(read("delegated.json")["gas"], "sponsored");
}

/// The guide's §14, from its answers on disk and from the chain: 4 USDC left the owner's account through agentd; 7
/// more were refused by agentd (with what is available) and by the chain (the agent's exported key); the delegation
/// ended disabled on chain and `revoked` in agentd, with nothing moved after the first transfer.
fn delegation_walk(cwd: &Path, demo: &Demo) {
    let var = |name: &str| -> String {
        demo.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("the demo exports {name}"))
    };
    let read = |file: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(cwd.join(file)).unwrap()).unwrap()
    };
    const FOUR_USDC: u128 = 4_000_000;

    let delegated = read("delegated.json");
    assert_eq!(delegated["delegation"]["id"], var("DELEGATION").as_str(), "{delegated}");
    assert_eq!(
        delegated["from"].as_str().unwrap().to_lowercase(),
        var("OWNER_ADDRESS").to_lowercase(),
        "{delegated}"
    );
    let refused = read("refused.json");
    assert_eq!(refused["error"]["code"], "policy_denied", "{refused}");
    assert_eq!(refused["error"]["details"]["rule"], "delegation_limit", "{refused}");
    assert_eq!(refused["error"]["details"]["available"], "6", "{refused}");
    let delegation = read("delegation.json");
    assert_eq!(delegation["status"], "revoked", "{delegation}");
    let audit = std::fs::read_to_string(cwd.join("delegation-audit.txt")).unwrap();
    for action in [
        "delegation_added",
        "key_exported",
        "delegation_revoked",
        &format!("transfer_accepted {}", var("DELEGATION")),
    ] {
        assert!(audit.lines().any(|l| l.starts_with(action)), "{action} in:\n{audit}");
    }

    // The balances the guide printed: before, after 4 USDC, after the chain's refusal, after the revocation.
    let printed: Vec<(u128, u128)> = std::fs::read_to_string(cwd.join("usdc-balances.txt"))
        .unwrap()
        .lines()
        .map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            ["owner", owner, "shop", shop] => (owner.parse().unwrap(), shop.parse().unwrap()),
            _ => panic!("an unexpected balance line: {line}"),
        })
        .collect();
    let (owner_before, shop_before) = printed[0];
    let after = (owner_before - FOUR_USDC, shop_before + FOUR_USDC);
    assert_eq!(printed, vec![printed[0], after, after, after]);

    // The chain, asked directly.
    let cast = |args: &[&str]| -> String {
        let output = Command::new(format!("{REPO}/test-tools/node_modules/.bin/cast"))
            .args(args)
            .args(["--rpc-url", &var("DEMO_RPC")])
            .output()
            .expect("cast runs");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    let usdc = |holder: &str| -> u128 {
        let out = cast(&["call", &var("USDC"), "balanceOf(address)(uint256)", holder]);
        out.split_whitespace().next().unwrap().parse().unwrap()
    };
    assert_eq!(usdc(&var("OWNER_ADDRESS")), after.0);
    assert_eq!(usdc("0x000000000000000000000000000000000000bEEF"), FOUR_USDC);
    let hash = delegation["hash"].as_str().unwrap();
    let disabled = cast(&[
        "call",
        &var("DELEGATION_MANAGER"),
        "disabledDelegations(bytes32)(bool)",
        hash,
    ]);
    assert_eq!(disabled, "true");
}
