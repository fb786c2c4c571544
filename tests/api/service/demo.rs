//! `scripts/demo.sh` run as a newcomer would, without the wait: a local anvil, agentd against it, an agent with
//! an owner, funded, and one real transfer that must come back `confirmed`; and the owner's on-chain grant to the
//! agent (§21), registered.

use std::process::Command;

#[test]
fn the_demo_script_confirms_a_real_transfer() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let output = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo.sh"))
        .env("AGENTD_BIN", env!("CARGO_BIN_EXE_agentd"))
        .env("DEMO_PORT", port.to_string())
        .env("DEMO_EXIT_AFTER_SETUP", "1")
        .output()
        .expect("the demo script runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("status=confirmed"), "{stdout}");
    // The owner's grant (§21) was registered: agentd answered its id.
    let delegation = stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("delegation="))
        .unwrap_or_default();
    assert!(uuid::Uuid::parse_str(delegation).is_ok(), "{stdout}");
    assert!(
        stdout.contains(&format!("Console:       http://127.0.0.1:{port}/")),
        "{stdout}"
    );
    assert!(stdout.contains("Access token:  agt_"), "{stdout}");
}
