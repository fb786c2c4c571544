//! The chain registry (docs/api.md §5): the seven EVM chains and whether each has a node configured.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::helpers::{spawn_app, spawn_app_with};

const REGISTRY: &[(&str, u64)] = &[
    ("ethereum", 1),
    ("base", 8453),
    ("optimism", 10),
    ("arbitrum", 42161),
    ("polygon", 137),
    ("sepolia", 11155111),
    ("base-sepolia", 84532),
];

fn find<'a>(chains: &'a Value, name: &str) -> &'a Value {
    chains
        .as_array()
        .unwrap_or_else(|| panic!("the registry is an array: {chains}"))
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("{name} is missing from {chains}"))
}

#[tokio::test]
async fn the_chain_registry_lists_the_seven_evm_chains() {
    let app = spawn_app().await;

    let (status, chains) = app.request(Method::GET, "/api/chains", None, None).await;

    assert_eq!(status, StatusCode::OK, "{chains}");
    for (name, chain_id) in REGISTRY {
        let chain = find(&chains, name);
        assert_eq!(chain["chain_id"].as_u64(), Some(*chain_id), "{chain}");
        assert!(
            chain["native_symbol"].as_str().is_some_and(|s| !s.is_empty()),
            "{chain}"
        );
        assert_eq!(chain["decimals"].as_u64(), Some(18), "{chain}");
        assert!(
            chain["explorer_url"]
                .as_str()
                .is_some_and(|s| s.starts_with("https://")),
            "{chain}"
        );
        assert!(chain["configured"].is_boolean(), "{chain}");
    }
    assert_eq!(find(&chains, "ethereum")["native_symbol"], "ETH");
    assert_eq!(find(&chains, "base")["native_symbol"], "ETH");
}

#[tokio::test]
async fn a_chain_is_configured_only_with_an_rpc_url() {
    let app = spawn_app_with(&[
        ("RPC_URL_BASE", "http://127.0.0.1:1"),
        ("RPC_URL_BASE_SEPOLIA", "http://127.0.0.1:1"),
    ])
    .await;

    let (status, chains) = app.request(Method::GET, "/api/chains", None, None).await;

    assert_eq!(status, StatusCode::OK, "{chains}");
    assert_eq!(find(&chains, "base")["configured"], true);
    assert_eq!(find(&chains, "base-sepolia")["configured"], true);
    assert_eq!(
        find(&chains, "sepolia")["configured"],
        false,
        "no RPC_URL_SEPOLIA: {chains}"
    );
    assert_eq!(
        find(&chains, "polygon")["configured"],
        false,
        "no RPC_URL_POLYGON: {chains}"
    );
}

#[tokio::test]
async fn a_chain_whose_node_is_on_a_loopback_address_is_marked_local() {
    let app = spawn_app_with(&[
        ("RPC_URL_BASE", "http://127.0.0.1:1"),
        ("RPC_URL_ETHEREUM", "https://rpc.example.com"),
    ])
    .await;

    let (status, chains) = app.request(Method::GET, "/api/chains", None, None).await;

    assert_eq!(status, StatusCode::OK, "{chains}");
    assert_eq!(find(&chains, "base")["local_node"], true, "{chains}");
    assert_eq!(find(&chains, "ethereum")["local_node"], false, "{chains}");
    assert_eq!(
        find(&chains, "polygon")["local_node"],
        false,
        "no node at all: {chains}"
    );
    // The registry's explorer stays as the contract gives it; `local_node` tells a client not to link to it.
    assert_eq!(
        find(&chains, "base")["explorer_url"],
        "https://basescan.org",
        "{chains}"
    );
}

#[tokio::test]
async fn each_chain_names_the_delegation_manager_and_enforcers_a_client_signs_for() {
    use agentd::domain::delegation::{Kind, deployments};
    use serde_json::json;
    let manager = "0x00000000000000000000000000000000000000aa";
    let enforcer = "0x00000000000000000000000000000000000000bb";
    let checksum = |a: &str| a.parse::<alloy::primitives::Address>().unwrap().to_checksum(None);
    let app = spawn_app_with(&[
        ("DELEGATION_MANAGER_BASE", manager),
        (
            "DELEGATION_ENFORCERS_BASE",
            &format!("erc20_period_transfer={enforcer}"),
        ),
        ("DELEGATION_MANAGER_POLYGON", "none"),
    ])
    .await;

    let (status, chains) = app.request(Method::GET, "/api/chains", None, None).await;

    assert_eq!(status, StatusCode::OK, "{chains}");
    let base = &find(&chains, "base")["delegations"];
    assert_eq!(base["manager"], checksum(manager), "{base}");
    assert_eq!(
        base["enforcers"],
        json!({ "erc20_period_transfer": checksum(enforcer) }),
        "only the configured enforcer: {base}"
    );
    // A chain left at the defaults names the framework's published deployment, every enforcer by its name.
    let ethereum = &find(&chains, "ethereum")["delegations"];
    assert_eq!(
        ethereum["manager"],
        deployments::DELEGATION_MANAGER.to_checksum(None),
        "{ethereum}"
    );
    for kind in Kind::ALL {
        assert_eq!(
            ethereum["enforcers"][kind.name()],
            deployments::enforcer(kind).to_checksum(None),
            "{ethereum}"
        );
    }
    assert!(
        find(&chains, "polygon")["delegations"].is_null(),
        "no manager on polygon: {chains}"
    );
}
