//! `signing`: the latency of one signature through the signer seam (`Keys::open` then `WalletSigner::sign_hash`, as
//! every send asks it), p50/p99 one at a time, and signatures per second with `THREADS` signing at once: the local
//! backend (a key decrypted from the vault for each signature) next to a PKCS#11 token, when one is configured with
//! `PKCS11_MODULE`, `PKCS11_TOKEN_LABEL`, `PKCS11_PIN` (and the module's own configuration, `SOFTHSM2_CONF` for
//! SoftHSM2). Each signature is checked to recover the agent's address. The key generated in the token for the run
//! is left there (labelled with a fresh agent id).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd::config::{Pkcs11Config, parse_encryption_key};
use agentd::signer::{Keys, Token};
use agentd::vault::Vault;
use alloy::primitives::B256;
use secrecy::SecretString;
use uuid::Uuid;

use crate::common::{Samples, f, table};

const N: usize = 2_000;
const THREADS: usize = 8;
const ENCRYPTION_KEY: &str = "0101010101010101010101010101010101010101010101010101010101010101";

struct Figures {
    latencies: Samples,
    concurrent_rate: f64,
}

/// `N` signatures one after the other, then `N` more from `THREADS` threads at once.
fn measure(keys: &Arc<Keys>, agent_id: Uuid, key: &agentd::vault::EncryptedKey) -> Figures {
    let one = |i: usize| {
        let hash = B256::from(alloy::primitives::keccak256(i.to_be_bytes()));
        let started = Instant::now();
        let signer = keys.open(agent_id, key).expect("the key opens");
        let signature = signer.sign_hash(&hash).expect("the key signs");
        let took = started.elapsed();
        assert_eq!(
            signature.recover_address_from_prehash(&hash).ok(),
            Some(key.address),
            "a signature that does not recover the agent's address"
        );
        took
    };
    let latencies: Vec<Duration> = (0..N).map(one).collect();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let one = &one;
            scope.spawn(move || {
                for i in 0..N / THREADS {
                    one(N + t * N + i);
                }
            });
        }
    });
    Figures {
        latencies: Samples::from_durations(&latencies),
        concurrent_rate: (N / THREADS * THREADS) as f64 / started.elapsed().as_secs_f64(),
    }
}

fn row(name: &str, figures: &Figures) -> Vec<String> {
    vec![
        name.to_string(),
        // `Samples` holds milliseconds; signatures take microseconds.
        f(figures.latencies.pct(50.0) * 1e3, 0),
        f(figures.latencies.pct(99.0) * 1e3, 0),
        f(figures.concurrent_rate, 0),
    ]
}

pub async fn run() {
    let encryption_key = parse_encryption_key(ENCRYPTION_KEY).expect("a valid key");
    let vault = Arc::new(Vault::new(&encryption_key, 1));
    let token = match (
        std::env::var("PKCS11_MODULE"),
        std::env::var("PKCS11_TOKEN_LABEL"),
        std::env::var("PKCS11_PIN"),
    ) {
        (Ok(module), Ok(token_label), Ok(pin)) => Some(
            Token::open(&Pkcs11Config {
                module: module.into(),
                token_label,
                pin: SecretString::from(pin),
            })
            .map(Arc::new)
            .expect("the PKCS#11 token opens"),
        ),
        _ => None,
    };
    // Off the runtime's workers: the signer blocks, as it does on the blocking pool in the service.
    let rows = tokio::task::spawn_blocking(move || {
        let mut rows = Vec::new();
        let local = Arc::new(Keys::new(vault.clone(), None));
        let agent_id = Uuid::new_v4();
        let key = local.generate(agent_id).expect("a local key");
        rows.push(row("local (vault: decrypt + sign)", &measure(&local, agent_id, &key)));
        match token {
            Some(token) => {
                let label = token.label().to_string();
                let keys = Arc::new(Keys::new(vault, Some(token)));
                let agent_id = Uuid::new_v4();
                let key = keys.generate(agent_id).expect("a key generated in the token");
                rows.push(row(
                    &format!("PKCS#11 token {label:?}"),
                    &measure(&keys, agent_id, &key),
                ));
            }
            None => println!("(no PKCS#11 token: set PKCS11_MODULE, PKCS11_TOKEN_LABEL and PKCS11_PIN to compare)"),
        }
        rows
    })
    .await
    .expect("the signing run");
    println!("{N} signatures one at a time, then {N} from {THREADS} threads at once (each checked to recover):");
    table(&["backend", "p50 µs", "p99 µs", "signatures/s, 8 threads"], &rows);
}
