//! A reservation checks, in its own transaction, that the agent is still active and the calling token still live
//! (docs/api.md §15): a reissue or a deletion committed after a transfer was authenticated, while it is being quoted,
//! moves nothing. The quote is held at a gate in front of the node (its `eth_getBalance`) while the change is made.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, ONE_ETH, fresh_address, sending_agent, wallet, wei};
use crate::helpers::gated_rpc::GatedRpc;
use crate::helpers::{assert_error, spawn_app_with, token_proof};
use crate::money::transfers_api::post_transfer;

#[tokio::test]
async fn a_token_reissued_or_an_agent_deleted_while_a_transfer_is_quoted_moves_nothing() {
    for change in ["reissue", "delete"] {
        let anvil = Anvil::start(BASE_CHAIN_ID);
        let gate = GatedRpc::start(anvil.url()).await;
        let app = spawn_app_with(&[("RPC_URL_BASE", gate.url())]).await;
        let agent = sending_agent(&app, Some(10.0)).await;
        anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
        let to = fresh_address();

        gate.hold_method("eth_getBalance");
        let order = json!({"chain": "base", "to": to.to_string(), "amount": "0.01"});
        let sending = {
            let (app, agent) = (&app, &agent);
            async move { post_transfer(app, agent, order).await }
        };
        let changing = async {
            // Authenticated, now quoting: the change commits before the reservation.
            gate.wait_held(1, Duration::from_secs(10)).await;
            match change {
                "reissue" => {
                    let (status, body) = app.reissue_token(&agent.id, token_proof(&agent.token)).await;
                    assert_eq!(status, StatusCode::OK, "{body}");
                }
                _ => {
                    let (status, body) = app.delete_agent(&agent.id, &agent.token).await;
                    assert!(status.is_success(), "{status} {body}");
                }
            }
            gate.release();
        };
        let (answer, ()) = tokio::join!(sending, changing);

        match change {
            "reissue" => assert_error(&answer, StatusCode::UNAUTHORIZED, "invalid_token"),
            _ => assert_error(&answer, StatusCode::GONE, "agent_inactive"),
        }
        assert_eq!(
            anvil.nonce(wallet(&agent)).await,
            0,
            "{change}: nothing was signed and sent"
        );
        assert_eq!(anvil.balance(to).await, wei(0), "{change}: nothing arrived");
    }
}
