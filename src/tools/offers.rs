//! The selling tools (§23): `create_offer` (capability `transact`) puts a resource up for sale through the offer
//! service, as `POST …/offers` does; `list_income` (`read`) lists the payments the agent took. On a guarded agent an
//! offer is its owner's to make: the tool checks it as `POST …/offers` would and holds it for the owner's approval
//! (`{offer_id, kind: "offer", status: "awaiting_approval", expires_at, offer}`; nothing answers at its URL until
//! the owner approves it with `POST …/transfers/{offer_id}/approve`, `offers::held`). The result names it `offer_id`,
//! not `transfer_id`, so that MCP's elicitation and tasks, which follow held transfers, leave it alone. The tool
//! takes no upstream headers: its arguments reach the model's transcript and the MCP audit record, so an upstream's
//! API key is given through the HTTP API only.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{Args, Effect, Tool, ToolContext, ToolError, ToolResult};
use crate::domain::agent::Capability;
use crate::offers::view::{IncomeView, OfferView};
use crate::offers::{Forward, NewContent, NewOffer, NewResource, NewUpstream, OfferError};
use crate::store::income_list::IncomeFilter;

/// `create_offer`, offered with the other `transact` tools.
pub const TRANSACT: &[Tool] = &[Tool {
    name: "create_offer",
    capability: Capability::Transact,
    effect: Effect::ChangesRecords,
    description: "Sell a resource over x402: an http(s) URL the agent fronts, or a text content, for a price in an EIP-3009 token such as USDC, paid to the agent's wallet and settled by the service; returns the offer with the URL buyers pay at. On a guarded agent the offer is held for the owner's approval (status awaiting_approval, with its expires_at): its URL sells nothing until the owner approves it.",
    arguments: |f| {
        json!({
            "chain": f.chain,
            "asset": { "type": "string", "description": "the token buyers pay in, a registry symbol such as USDC" },
            "price": { "type": "string", "description": "decimal amount in whole tokens, e.g. \"0.01\"" },
            "description": { "type": "string", "description": "what buyers pay for" },
            "url": { "type": "string", "description": "the upstream http or https URL to sell (or give content)" },
            "method": { "type": "string", "enum": ["GET", "HEAD", "POST"], "description": "GET when absent" },
            "mime_type": { "type": "string", "description": "what the upstream answers, application/json when absent" },
            "content": { "type": "string", "description": "a text to sell instead of a URL" },
            "content_type": { "type": "string", "description": "the content's media type, e.g. text/plain" },
            "settle": { "type": "string", "enum": ["on_success", "before_serving"], "description": "on_success when absent (GET and HEAD only)" },
            "forward": { "type": "array", "items": { "type": "string", "enum": ["query", "body"] }, "description": "what of the buyer's request reaches the upstream; nothing when absent" },
            "gas_per_day": { "type": "string", "description": "the most the offer's settlements may cost in gas per 24 h, decimal in whole native units, e.g. \"0.001\"" },
            "max_timeout_seconds": { "type": "integer", "minimum": 60, "maximum": 3600, "description": "300 when absent" }
        })
    },
    required: &["chain", "asset", "price", "description", "gas_per_day"],
    run: create_offer,
}];

/// `list_income`, offered with the other `read` tools.
pub const READ: &[Tool] = &[Tool {
    name: "list_income",
    capability: Capability::Read,
    effect: Effect::ReadsRecords,
    description: "The payments the agent took for its offers (and through its own x402 facilitator), newest first: amount, payer, status (settling, settled, failed, released), settlement transaction and its gas fee.",
    arguments: |_| {
        json!({
            "offer": { "type": "string", "description": "only this offer's payments (its id)" },
            "status": { "type": "string", "enum": ["settling", "settled", "failed", "released"] },
            "limit": { "type": "integer", "minimum": 1, "maximum": 100 }
        })
    },
    required: &[],
    run: list_income,
}];

impl From<OfferError> for ToolError {
    fn from(err: OfferError) -> Self {
        let message = err.to_string();
        match err {
            OfferError::Field { .. } => ToolError::invalid(message),
            OfferError::CapabilityDenied => ToolError::new("capability_denied", message),
            OfferError::UrlNotAllowed(_) => ToolError::new("url_not_allowed", message),
            OfferError::HostNotAllowed(_) => ToolError {
                details: Some(json!({ "rule": "host_not_allowed" })),
                ..ToolError::new("policy_denied", message)
            },
            OfferError::AssetNotPayable(_) => ToolError::new("asset_not_payable", message),
            OfferError::NotFound => ToolError::new("offer_not_found", message),
            OfferError::NotHeld => ToolError::new("transfer_not_found", message),
            OfferError::NotAwaiting(status) => crate::transfers::TransferError::NotAwaiting(status).into(),
            OfferError::Chain(e) => e.into(),
            OfferError::Store(_) => ToolError::new("internal_error", "the offer could not be stored"),
        }
    }
}

fn create_offer<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let text = |key| args.text(key).map(|v| v.map(str::to_owned));
        let required = |key: &'static str| text(key)?.ok_or_else(|| ToolError::invalid(format!("{key} is required")));
        let resource = match (text("url")?, text("content")?) {
            (Some(url), None) => NewResource::Upstream(NewUpstream {
                url,
                method: text("method")?,
                headers: None,
                mime_type: text("mime_type")?,
            }),
            (None, Some(content)) => NewResource::Content(NewContent {
                content,
                content_type: required("content_type")?,
            }),
            _ => return Err(ToolError::invalid("give either url or content")),
        };
        let forward = match args.list("forward")? {
            Some(list) => Some(Forward::Many(
                list.iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| ToolError::invalid("forward must be a list of query and body"))?,
            )),
            None => None,
        };
        let max_timeout_seconds = args.integer("max_timeout_seconds")?;
        let new = NewOffer {
            chain: required("chain")?,
            asset: required("asset")?,
            price: required("price")?,
            description: required("description")?,
            resource,
            settle: text("settle")?,
            forward,
            gas_per_day: required("gas_per_day")?,
            max_timeout_seconds,
        };
        let offers = &cx.services.offers;
        if cx.guarded {
            // The owner's to make: held for its approval, selling only once approved.
            let offer = offers.hold(cx.agent, new, cx.conversation_id).await?;
            let pay_to = cx.agent.wallet_addresses.get(&offer.chain).copied();
            return Ok(json!({
                "offer_id": offer.id,
                "kind": "offer",
                "status": "awaiting_approval",
                "expires_at": offer.approval.as_ref().map(|a| a.expires_at),
                "offer": OfferView::new(&offer, offers.url(offer.id), pay_to),
            }));
        }
        let offer = offers.create(cx.agent, new, cx.actor).await?;
        let pay_to = cx.agent.wallet_addresses.get(&offer.chain).copied();
        Ok(json!({ "offer": OfferView::new(&offer, offers.url(offer.id), pay_to) }))
    })
}

fn list_income<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let offer_id = match args.text("offer")? {
            Some(text) => {
                Some(uuid::Uuid::parse_str(text.trim()).map_err(|_| ToolError::invalid("offer must be an offer id"))?)
            }
            None => None,
        };
        let status = args.text("status")?.map(str::to_owned);
        if status
            .as_deref()
            .is_some_and(|s| !["settling", "settled", "failed", "released"].contains(&s))
        {
            return Err(ToolError::invalid(
                "status must be settling, settled, failed or released",
            ));
        }
        let filter = IncomeFilter { offer_id, status };
        let records = cx
            .services
            .store
            .income_page(cx.agent.id, &filter, None, args.limit()?)
            .await
            .map_err(|_| ToolError::new("internal_error", "the income could not be read"))?
            .unwrap_or_default();
        let income: Vec<Value> = records
            .iter()
            .map(|r| serde_json::to_value(IncomeView::from(r)).unwrap_or(Value::Null))
            .collect();
        Ok(json!({ "income": income }))
    })
}
