//! The SQL shared by both backends. Both dialects accept `$n` placeholders and `RETURNING`, and sqlx encodes
//! the same Rust types for both, so one body serves each; what differs (write locks, schema types) lives in
//! `sqlite.rs`/`postgres.rs` and the per-dialect migrations.

/// Implements `Store` for a backend struct with a `pool` field and a `begin_write()` method.
macro_rules! impl_store {
    ($store:ty, $db:ty) => {
        use std::collections::BTreeMap as __BTreeMap;

        use alloy::primitives::Address as __Address;
        use chrono::{DateTime as __DateTime, Utc as __Utc};
        use sqlx::Row as _;
        use uuid::Uuid as __Uuid;

        use crate::domain::agent::Agent as __Agent;
        use crate::store::rows;
        use crate::store::{
            AgentUpdate, AuditEvent, Challenge, Conversation, EventRecord, Message, NewAgent, ReissueProof, Reservation,
            Role, SendGuard, Settlement, SignFn, Store, StoreError, StoreResult, TransferRequest,
        };
        use crate::vault::EncryptedKey;

        const AGENT_COLUMNS: &str =
            "id, name, description, chains, capabilities, spending_cap_wei, is_active, created_at, updated_at";

        fn agent_from_row(row: &<$db as sqlx::Database>::Row) -> StoreResult<__Agent> {
            Ok(__Agent {
                id: row.try_get("id")?,
                name: row.try_get("name")?,
                description: row.try_get("description")?,
                chains: rows::chains_from_text(&row.try_get::<String, _>("chains")?)?,
                capabilities: rows::capabilities_from_text(&row.try_get::<String, _>("capabilities")?)?,
                spending_cap_wei: rows::wei_from_text(&row.try_get::<String, _>("spending_cap_wei")?, "spending_cap_wei")?,
                owner_addresses: __BTreeMap::new(),
                wallet_addresses: __BTreeMap::new(),
                spent_wei: __BTreeMap::new(),
                is_active: row.try_get("is_active")?,
                created_at: row.try_get("created_at")?,
                updated_at: row.try_get("updated_at")?,
            })
        }

        async fn replace_owners(
            conn: &mut <$db as sqlx::Database>::Connection,
            agent_id: __Uuid,
            owners: &__BTreeMap<String, __Address>,
        ) -> StoreResult<()> {
            sqlx::query("DELETE FROM owner_addresses WHERE agent_id = $1").bind(agent_id).execute(&mut *conn).await?;
            for (chain, address) in owners {
                sqlx::query("INSERT INTO owner_addresses (agent_id, chain, address) VALUES ($1, $2, $3)")
                    .bind(agent_id)
                    .bind(chain)
                    .bind(address.to_checksum(None))
                    .execute(&mut *conn)
                    .await?;
            }
            Ok(())
        }

        async fn add_wallet_addresses(
            conn: &mut <$db as sqlx::Database>::Connection,
            agent_id: __Uuid,
            chains: &[String],
            address: __Address,
        ) -> StoreResult<()> {
            for chain in chains {
                sqlx::query(
                    "INSERT INTO wallet_addresses (agent_id, chain, address) VALUES ($1, $2, $3) \
                     ON CONFLICT (agent_id, chain) DO NOTHING",
                )
                .bind(agent_id)
                .bind(chain)
                .bind(address.to_checksum(None))
                .execute(&mut *conn)
                .await?;
            }
            Ok(())
        }

        async fn load_agent(conn: &mut <$db as sqlx::Database>::Connection, id: __Uuid) -> StoreResult<__Agent> {
            Ok(load_agent_and_token(conn, id, None).await?.0)
        }

        /// The agent with its addresses, and (when a token hash is given) the agent owning that live token:
        /// two queries, so the authenticated hot path stays short.
        async fn load_agent_and_token(
            conn: &mut <$db as sqlx::Database>::Connection,
            id: __Uuid,
            token_hash: Option<&str>,
        ) -> StoreResult<(__Agent, Option<__Uuid>)> {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {AGENT_COLUMNS}, (SELECT t.agent_id FROM access_tokens t \
                 WHERE t.token_hash = $2 AND t.revoked_at IS NULL) AS token_owner FROM agents WHERE id = $1"
            )))
            .bind(id)
            .bind(token_hash.unwrap_or_default())
            .fetch_optional(&mut *conn)
            .await?
            .ok_or(StoreError::AgentNotFound)?;
            let mut agent = agent_from_row(&row)?;
            let token_owner: Option<__Uuid> = row.try_get("token_owner")?;
            let per_chain: Vec<(String, String, String)> = sqlx::query_as(
                "SELECT 'wallet', chain, address FROM wallet_addresses WHERE agent_id = $1 \
                 UNION ALL SELECT 'owner', chain, address FROM owner_addresses WHERE agent_id = $1 \
                 UNION ALL SELECT 'spent', chain, spent_wei FROM spending WHERE agent_id = $1",
            )
            .bind(id)
            .fetch_all(&mut *conn)
            .await?;
            let (wallets, rest): (Vec<_>, Vec<_>) = per_chain.into_iter().partition(|(kind, _, _)| kind == "wallet");
            let (owners, spent): (Vec<_>, Vec<_>) = rest.into_iter().partition(|(kind, _, _)| kind == "owner");
            let pairs = |v: Vec<(String, String, String)>| v.into_iter().map(|(_, c, a)| (c, a)).collect::<Vec<_>>();
            agent.spent_wei = pairs(spent)
                .into_iter()
                .map(|(chain, wei)| Ok((chain, rows::wei_from_text(&wei, "spending.spent_wei")?)))
                .collect::<StoreResult<_>>()?;
            // Addresses of chains the agent has since dropped stay stored but are not the agent's any more.
            agent.wallet_addresses = rows::address_map(pairs(wallets))?;
            agent.wallet_addresses.retain(|chain, _| agent.chains.contains(chain));
            agent.owner_addresses = rows::address_map(pairs(owners))?;
            Ok((agent, token_owner))
        }

        const CONVERSATION_SELECT: &str = "SELECT c.id, c.agent_id, c.title, c.created_at, c.updated_at, \
             (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) AS message_count FROM conversations c";

        fn conversation_from_row(row: &<$db as sqlx::Database>::Row) -> StoreResult<Conversation> {
            Ok(Conversation {
                id: row.try_get("id")?,
                agent_id: row.try_get("agent_id")?,
                title: row.try_get("title")?,
                created_at: row.try_get("created_at")?,
                updated_at: row.try_get("updated_at")?,
                message_count: row.try_get("message_count")?,
            })
        }

        fn message_from_row(row: &<$db as sqlx::Database>::Row) -> StoreResult<Message> {
            let role = match row.try_get::<String, _>("role")?.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                other => return Err(StoreError::Corrupt(format!("messages.role {other}"))),
            };
            let chain_calls: String = row.try_get("chain_calls")?;
            Ok(Message {
                id: row.try_get("id")?,
                conversation_id: row.try_get("conversation_id")?,
                role,
                content: row.try_get("content")?,
                chain_calls: serde_json::from_str(&chain_calls).map_err(|_| StoreError::Corrupt("messages.chain_calls".into()))?,
                tokens_used: row.try_get("tokens_used")?,
                created_at: row.try_get("created_at")?,
            })
        }

        const TX_COLUMNS: &str = "id, agent_id, chain, conversation_id, nonce, from_address, to_address, value_wei, \
             gas_limit, max_fee_per_gas, reserved_wei, actual_cost_wei, raw_tx, tx_hash, status, block_number, gas_used, \
             created_at, updated_at";

        fn tx_from_row(row: &<$db as sqlx::Database>::Row) -> StoreResult<crate::domain::transaction::StoredTx> {
            let status: String = row.try_get("status")?;
            Ok(crate::domain::transaction::StoredTx {
                id: row.try_get("id")?,
                agent_id: row.try_get("agent_id")?,
                chain: row.try_get("chain")?,
                conversation_id: row.try_get("conversation_id")?,
                nonce: rows::u64_from(row.try_get("nonce")?, "nonce")?,
                from: rows::address_from_text(&row.try_get::<String, _>("from_address")?)?,
                to: rows::address_from_text(&row.try_get::<String, _>("to_address")?)?,
                value_wei: rows::wei_from_text(&row.try_get::<String, _>("value_wei")?, "value_wei")?,
                gas_limit: rows::u64_from(row.try_get("gas_limit")?, "gas_limit")?,
                max_fee_per_gas: row
                    .try_get::<String, _>("max_fee_per_gas")?
                    .parse()
                    .map_err(|_| StoreError::Corrupt("max_fee_per_gas".into()))?,
                reserved_wei: rows::wei_from_text(&row.try_get::<String, _>("reserved_wei")?, "reserved_wei")?,
                actual_cost_wei: rows::opt_wei_from_text(row.try_get("actual_cost_wei")?, "actual_cost_wei")?,
                raw_tx: row.try_get("raw_tx")?,
                tx_hash: row.try_get("tx_hash")?,
                status: crate::domain::transaction::TxState::parse(&status)
                    .ok_or_else(|| StoreError::Corrupt(format!("transactions.status {status}")))?,
                block_number: row.try_get::<Option<i64>, _>("block_number")?.map(|n| n as u64),
                gas_used: row.try_get::<Option<i64>, _>("gas_used")?.map(|n| n as u64),
                created_at: row.try_get("created_at")?,
                updated_at: row.try_get("updated_at")?,
            })
        }

        fn event_from_row(row: &<$db as sqlx::Database>::Row) -> StoreResult<EventRecord> {
            let payload: String = row.try_get("payload")?;
            Ok(EventRecord {
                id: row.try_get("id")?,
                conversation_id: row.try_get("conversation_id")?,
                agent_id: row.try_get("agent_id")?,
                kind: row.try_get("kind")?,
                payload: serde_json::from_str(&payload).map_err(|_| StoreError::Corrupt("events.payload".into()))?,
            })
        }

        async fn insert_message_in(conn: &mut <$db as sqlx::Database>::Connection, m: &Message) -> StoreResult<()> {
            sqlx::query(
                "INSERT INTO messages (id, conversation_id, role, content, chain_calls, tokens_used, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(m.id)
            .bind(m.conversation_id)
            .bind(m.role.as_str())
            .bind(&m.content)
            .bind(m.chain_calls.to_string())
            .bind(m.tokens_used)
            .bind(m.created_at)
            .execute(&mut *conn)
            .await?;
            sqlx::query("UPDATE conversations SET updated_at = $1 WHERE id = $2")
                .bind(m.created_at)
                .bind(m.conversation_id)
                .execute(&mut *conn)
                .await?;
            Ok(())
        }

        async fn spent_on_chain(
            conn: &mut <$db as sqlx::Database>::Connection,
            agent_id: __Uuid,
            chain: &str,
        ) -> StoreResult<alloy::primitives::U256> {
            let row: Option<(String,)> = sqlx::query_as("SELECT spent_wei FROM spending WHERE agent_id = $1 AND chain = $2")
                .bind(agent_id)
                .bind(chain)
                .fetch_optional(&mut *conn)
                .await?;
            row.map_or(Ok(alloy::primitives::U256::ZERO), |(w,)| rows::wei_from_text(&w, "spending.spent_wei"))
        }

        /// Moves what counts against the cap on (agent, chain): `+ add - sub`. Callers hold the agent's write lock.
        async fn adjust_spent(
            conn: &mut <$db as sqlx::Database>::Connection,
            agent_id: __Uuid,
            chain: &str,
            add: alloy::primitives::U256,
            sub: alloy::primitives::U256,
        ) -> StoreResult<()> {
            let current = spent_on_chain(&mut *conn, agent_id, chain).await?;
            let next = current.saturating_add(add).saturating_sub(sub);
            sqlx::query(
                "INSERT INTO spending (agent_id, chain, spent_wei) VALUES ($1, $2, $3) \
                 ON CONFLICT (agent_id, chain) DO UPDATE SET spent_wei = $3",
            )
            .bind(agent_id)
            .bind(chain)
            .bind(next.to_string())
            .execute(&mut *conn)
            .await?;
            Ok(())
        }

        #[async_trait::async_trait]
        impl Store for $store {
            async fn ping(&self) -> StoreResult<()> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            async fn create_agent(&self, new: &NewAgent) -> StoreResult<()> {
                let a = &new.agent;
                let mut tx = self.begin_write().await?;
                sqlx::query(
                    "INSERT INTO agents (id, name, description, chains, capabilities, spending_cap_wei, is_active, \
                     created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(a.id)
                .bind(&a.name)
                .bind(&a.description)
                .bind(rows::chains_to_text(&a.chains))
                .bind(rows::capabilities_to_text(&a.capabilities))
                .bind(a.spending_cap_wei.to_string())
                .bind(a.is_active)
                .bind(a.created_at)
                .bind(a.updated_at)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO wallet_keys (agent_id, scheme, address, ciphertext, nonce, key_version, created_at) \
                     VALUES ($1, 'secp256k1', $2, $3, $4, $5, $6)",
                )
                .bind(a.id)
                .bind(new.key.address.to_checksum(None))
                .bind(&new.key.ciphertext)
                .bind(&new.key.nonce)
                .bind(new.key.key_version)
                .bind(a.created_at)
                .execute(&mut *tx)
                .await?;
                add_wallet_addresses(&mut tx, a.id, &a.chains, new.key.address).await?;
                replace_owners(&mut tx, a.id, &a.owner_addresses).await?;
                sqlx::query("INSERT INTO access_tokens (token_hash, agent_id, created_at) VALUES ($1, $2, $3)")
                    .bind(&new.token_hash)
                    .bind(a.id)
                    .bind(a.created_at)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn list_agents(&self, limit: i64, offset: i64) -> StoreResult<Vec<__Agent>> {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {AGENT_COLUMNS} FROM agents ORDER BY created_at DESC, id DESC LIMIT $1 OFFSET $2"
                )))
                .bind(limit)
                .bind(offset)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(agent_from_row).collect()
            }

            async fn get_agent_for_token(&self, id: __Uuid, token_hash: &str) -> StoreResult<(__Agent, Option<__Uuid>)> {
                let mut conn = self.pool.acquire().await?;
                load_agent_and_token(&mut conn, id, Some(token_hash)).await
            }

            async fn get_agent(&self, id: __Uuid) -> StoreResult<__Agent> {
                let mut conn = self.pool.acquire().await?;
                load_agent(&mut conn, id).await
            }

            async fn update_agent(&self, id: __Uuid, update: &AgentUpdate, wallet: __Address) -> StoreResult<__Agent> {
                let mut tx = self.begin_write().await?;
                lock_agent(&mut tx, id).await?;
                let mut agent = load_agent(&mut tx, id).await?;
                if let Some(name) = &update.name {
                    agent.name = name.clone();
                }
                if let Some(description) = &update.description {
                    agent.description = description.clone();
                }
                if let Some(chains) = &update.chains {
                    agent.chains = chains.clone();
                    add_wallet_addresses(&mut tx, id, chains, wallet).await?;
                }
                if let Some(capabilities) = &update.capabilities {
                    agent.capabilities = capabilities.clone();
                }
                if let Some(cap) = update.spending_cap_wei {
                    agent.spending_cap_wei = cap;
                }
                if let Some(owners) = &update.owner_addresses {
                    replace_owners(&mut tx, id, owners).await?;
                }
                let now: __DateTime<__Utc> = crate::domain::now();
                sqlx::query(
                    "UPDATE agents SET name = $1, description = $2, chains = $3, capabilities = $4, \
                     spending_cap_wei = $5, updated_at = $6 WHERE id = $7",
                )
                .bind(&agent.name)
                .bind(&agent.description)
                .bind(rows::chains_to_text(&agent.chains))
                .bind(rows::capabilities_to_text(&agent.capabilities))
                .bind(agent.spending_cap_wei.to_string())
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                let agent = load_agent(&mut tx, id).await?;
                tx.commit().await?;
                Ok(agent)
            }

            async fn deactivate_agent(&self, id: __Uuid) -> StoreResult<bool> {
                let done = sqlx::query("UPDATE agents SET is_active = $1, updated_at = $2 WHERE id = $3 AND is_active = $4")
                    .bind(false)
                    .bind(crate::domain::now())
                    .bind(id)
                    .bind(true)
                    .execute(&self.pool)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn agent_for_token(&self, token_hash: &str) -> StoreResult<Option<__Uuid>> {
                let row: Option<(__Uuid,)> =
                    sqlx::query_as("SELECT agent_id FROM access_tokens WHERE token_hash = $1 AND revoked_at IS NULL")
                        .bind(token_hash)
                        .fetch_optional(&self.pool)
                        .await?;
                Ok(row.map(|r| r.0))
            }

            async fn wallet_key(&self, agent_id: __Uuid) -> StoreResult<EncryptedKey> {
                let row = sqlx::query(
                    "SELECT address, ciphertext, nonce, key_version FROM wallet_keys WHERE agent_id = $1",
                )
                .bind(agent_id)
                .fetch_optional(&self.pool)
                .await?
                .ok_or(StoreError::AgentNotFound)?;
                Ok(EncryptedKey {
                    address: rows::address_from_text(&row.try_get::<String, _>("address")?)?,
                    ciphertext: row.try_get("ciphertext")?,
                    nonce: row.try_get("nonce")?,
                    key_version: row.try_get("key_version")?,
                })
            }

            async fn insert_challenge(&self, c: &Challenge) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO reissue_challenges (nonce, agent_id, message, expires_at, created_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(&c.nonce)
                .bind(c.agent_id)
                .bind(&c.message)
                .bind(c.expires_at)
                .bind(crate::domain::now())
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn get_challenge(&self, nonce: &str) -> StoreResult<Option<Challenge>> {
                let row = sqlx::query(
                    "SELECT nonce, agent_id, message, expires_at, used_at FROM reissue_challenges WHERE nonce = $1",
                )
                .bind(nonce)
                .fetch_optional(&self.pool)
                .await?;
                row.map(|row| {
                    Ok(Challenge {
                        nonce: row.try_get("nonce")?,
                        agent_id: row.try_get("agent_id")?,
                        message: row.try_get("message")?,
                        expires_at: row.try_get("expires_at")?,
                        used: row.try_get::<Option<__DateTime<__Utc>>, _>("used_at")?.is_some(),
                    })
                })
                .transpose()
            }

            async fn reissue_token(&self, agent_id: __Uuid, proof: ReissueProof<'_>, new_hash: &str) -> StoreResult<bool> {
                let now = crate::domain::now();
                let mut tx = self.begin_write().await?;
                let consumed = match proof {
                    ReissueProof::CurrentToken { token_hash } => sqlx::query(
                        "UPDATE access_tokens SET revoked_at = $1 \
                         WHERE token_hash = $2 AND agent_id = $3 AND revoked_at IS NULL",
                    )
                    .bind(now)
                    .bind(token_hash)
                    .bind(agent_id),
                    ReissueProof::Challenge { nonce } => sqlx::query(
                        "UPDATE reissue_challenges SET used_at = $1 \
                         WHERE nonce = $2 AND agent_id = $3 AND used_at IS NULL AND expires_at > $1",
                    )
                    .bind(now)
                    .bind(nonce)
                    .bind(agent_id),
                }
                .execute(&mut *tx)
                .await?;
                if consumed.rows_affected() != 1 {
                    return Ok(false);
                }
                sqlx::query("UPDATE access_tokens SET revoked_at = $1 WHERE agent_id = $2 AND revoked_at IS NULL")
                    .bind(now)
                    .bind(agent_id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("INSERT INTO access_tokens (token_hash, agent_id, created_at) VALUES ($1, $2, $3)")
                    .bind(new_hash)
                    .bind(agent_id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn insert_audit(&self, event: &AuditEvent) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO audit_events (agent_id, action, actor, detail, created_at) VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(event.agent_id)
                .bind(event.action)
                .bind(&event.actor)
                .bind(event.detail.to_string())
                .bind(crate::domain::now())
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn create_conversation(&self, c: &Conversation) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO conversations (id, agent_id, title, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(c.id)
                .bind(c.agent_id)
                .bind(&c.title)
                .bind(c.created_at)
                .bind(c.updated_at)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn get_conversation(&self, id: __Uuid) -> StoreResult<Conversation> {
                let row = sqlx::query(sqlx::AssertSqlSafe(format!("{CONVERSATION_SELECT} WHERE c.id = $1")))
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or(StoreError::ConversationNotFound)?;
                conversation_from_row(&row)
            }

            async fn list_conversations(&self, agent_id: __Uuid) -> StoreResult<Vec<Conversation>> {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "{CONVERSATION_SELECT} WHERE c.agent_id = $1 ORDER BY c.created_at DESC, c.id DESC"
                )))
                .bind(agent_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(conversation_from_row).collect()
            }

            async fn delete_conversation(&self, id: __Uuid) -> StoreResult<bool> {
                let mut tx = self.begin_write().await?;
                sqlx::query("DELETE FROM messages WHERE conversation_id = $1").bind(id).execute(&mut *tx).await?;
                let done = sqlx::query("DELETE FROM conversations WHERE id = $1").bind(id).execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(done.rows_affected() == 1)
            }

            async fn insert_message(&self, m: &Message) -> StoreResult<()> {
                let mut tx = self.begin_write().await?;
                insert_message_in(&mut tx, m).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn recent_messages(&self, conversation_id: __Uuid, limit: i64) -> StoreResult<Vec<Message>> {
                let rows = sqlx::query(
                    "SELECT id, conversation_id, role, content, chain_calls, tokens_used, created_at FROM messages \
                     WHERE conversation_id = $1 ORDER BY created_at DESC, role ASC LIMIT $2",
                )
                .bind(conversation_id)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                let mut messages = rows.iter().map(message_from_row).collect::<StoreResult<Vec<_>>>()?;
                messages.reverse();
                Ok(messages)
            }

            async fn list_transactions(
                &self,
                agent_id: __Uuid,
                chain: Option<&str>,
                limit: i64,
            ) -> StoreResult<Vec<crate::domain::transaction::StoredTx>> {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {TX_COLUMNS} FROM transactions WHERE agent_id = $1 AND ($2 IS NULL OR chain = $2) \
                     ORDER BY created_at DESC, nonce DESC LIMIT $3"
                )))
                .bind(agent_id)
                .bind(chain)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(tx_from_row).collect()
            }

            async fn spent_by_chain(&self, agent_id: __Uuid) -> StoreResult<__BTreeMap<String, alloy::primitives::U256>> {
                let rows: Vec<(String, String)> = sqlx::query_as("SELECT chain, spent_wei FROM spending WHERE agent_id = $1")
                    .bind(agent_id)
                    .fetch_all(&self.pool)
                    .await?;
                rows.into_iter().map(|(chain, wei)| Ok((chain, rows::wei_from_text(&wei, "spending.spent_wei")?))).collect()
            }

            async fn count_transactions_by_status(&self) -> StoreResult<Vec<(String, i64)>> {
                Ok(sqlx::query_as("SELECT status, COUNT(*) FROM transactions GROUP BY status ORDER BY status")
                    .fetch_all(&self.pool)
                    .await?)
            }

            async fn lock_sender(&self, agent_id: __Uuid, chain: &str) -> StoreResult<Box<dyn SendGuard>> {
                self.send_lock(&format!("send:{agent_id}:{chain}")).await
            }

            async fn try_lock_watcher(&self, chain: &str) -> StoreResult<Option<Box<dyn SendGuard>>> {
                self.try_lock(&format!("watch:{chain}")).await
            }

            async fn next_nonce(&self, agent_id: __Uuid, chain: &str) -> StoreResult<Option<u64>> {
                let row: Option<(i64,)> = sqlx::query_as("SELECT next_nonce FROM nonces WHERE agent_id = $1 AND chain = $2")
                    .bind(agent_id)
                    .bind(chain)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|(n,)| rows::u64_from(n, "next_nonce")).transpose()
            }

            async fn reserve_transfer(&self, r: &TransferRequest, sign: SignFn<'_>) -> StoreResult<Reservation> {
                let mut tx = self.begin_write().await?;
                lock_agent(&mut tx, r.agent_id).await?;
                let cap_row: (String,) = sqlx::query_as("SELECT spending_cap_wei FROM agents WHERE id = $1")
                    .bind(r.agent_id)
                    .fetch_one(&mut *tx)
                    .await?;
                let cap = rows::wei_from_text(&cap_row.0, "spending_cap_wei")?;
                let spent = spent_on_chain(&mut tx, r.agent_id, &r.chain).await?;
                if spent.saturating_add(r.reserved_wei) > cap {
                    return Ok(Reservation::CapExceeded { cap, spent });
                }
                let stored: Option<(i64,)> = sqlx::query_as("SELECT next_nonce FROM nonces WHERE agent_id = $1 AND chain = $2")
                    .bind(r.agent_id)
                    .bind(&r.chain)
                    .fetch_optional(&mut *tx)
                    .await?;
                let stored = stored.map(|(n,)| rows::u64_from(n, "next_nonce")).transpose()?;
                let nonce = stored.unwrap_or(0).max(r.node_nonce.unwrap_or(0));
                let signed = sign(nonce).map_err(StoreError::Signing)?;
                let now = crate::domain::now();
                let record = crate::domain::transaction::StoredTx {
                    id: r.id,
                    agent_id: r.agent_id,
                    chain: r.chain.clone(),
                    conversation_id: r.conversation_id,
                    nonce,
                    from: r.from,
                    to: r.to,
                    value_wei: r.value_wei,
                    gas_limit: r.gas_limit,
                    max_fee_per_gas: r.max_fee_per_gas,
                    reserved_wei: r.reserved_wei,
                    actual_cost_wei: None,
                    raw_tx: signed.raw,
                    tx_hash: signed.hash,
                    status: crate::domain::transaction::TxState::Signed,
                    block_number: None,
                    gas_used: None,
                    created_at: now,
                    updated_at: now,
                };
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO transactions ({TX_COLUMNS}) VALUES \
                     ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)"
                )))
                .bind(record.id)
                .bind(record.agent_id)
                .bind(&record.chain)
                .bind(record.conversation_id)
                .bind(nonce as i64)
                .bind(record.from.to_checksum(None))
                .bind(record.to.to_checksum(None))
                .bind(record.value_wei.to_string())
                .bind(record.gas_limit as i64)
                .bind(record.max_fee_per_gas.to_string())
                .bind(record.reserved_wei.to_string())
                .bind(Option::<String>::None)
                .bind(&record.raw_tx)
                .bind(&record.tx_hash)
                .bind(record.status.as_str())
                .bind(Option::<i64>::None)
                .bind(Option::<i64>::None)
                .bind(now)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO nonces (agent_id, chain, next_nonce) VALUES ($1, $2, $3) \
                     ON CONFLICT (agent_id, chain) DO UPDATE SET next_nonce = $3",
                )
                .bind(r.agent_id)
                .bind(&r.chain)
                .bind(nonce as i64 + 1)
                .execute(&mut *tx)
                .await?;
                adjust_spent(&mut tx, r.agent_id, &r.chain, r.reserved_wei, alloy::primitives::U256::ZERO).await?;
                tx.commit().await?;
                Ok(Reservation::Reserved(Box::new(record)))
            }

            async fn mark_broadcast(&self, id: __Uuid) -> StoreResult<()> {
                sqlx::query("UPDATE transactions SET status = 'pending', updated_at = $1 WHERE id = $2 AND status = 'signed'")
                    .bind(crate::domain::now())
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn discard_transfer(&self, id: __Uuid, resync_to: Option<u64>) -> StoreResult<()> {
                let mut tx = self.begin_write().await?;
                let row: Option<(__Uuid, String, i64, String)> =
                    sqlx::query_as("SELECT agent_id, chain, nonce, reserved_wei FROM transactions WHERE id = $1")
                        .bind(id)
                        .fetch_optional(&mut *tx)
                        .await?;
                let Some((agent_id, chain, nonce, reserved)) = row else {
                    return Ok(());
                };
                lock_agent(&mut tx, agent_id).await?;
                sqlx::query("DELETE FROM transactions WHERE id = $1").bind(id).execute(&mut *tx).await?;
                let reserved = rows::wei_from_text(&reserved, "reserved_wei")?;
                adjust_spent(&mut tx, agent_id, &chain, alloy::primitives::U256::ZERO, reserved).await?;
                // Give the nonce back only if nothing was allocated after it.
                sqlx::query("UPDATE nonces SET next_nonce = $1 WHERE agent_id = $2 AND chain = $3 AND next_nonce = $4")
                    .bind(nonce)
                    .bind(agent_id)
                    .bind(&chain)
                    .bind(nonce + 1)
                    .execute(&mut *tx)
                    .await?;
                if let Some(next) = resync_to {
                    sqlx::query("UPDATE nonces SET next_nonce = $1 WHERE agent_id = $2 AND chain = $3 AND next_nonce < $1")
                        .bind(next as i64)
                        .bind(agent_id)
                        .bind(&chain)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn open_transactions(&self, chain: &str) -> StoreResult<Vec<crate::domain::transaction::StoredTx>> {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {TX_COLUMNS} FROM transactions WHERE chain = $1 AND status IN ('signed', 'pending') \
                     ORDER BY agent_id, nonce"
                )))
                .bind(chain)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(tx_from_row).collect()
            }

            async fn settle_transaction(
                &self,
                id: __Uuid,
                s: &Settlement,
                event: serde_json::Value,
                message: Option<&Message>,
            ) -> StoreResult<Option<EventRecord>> {
                let mut tx = self.begin_write().await?;
                let now = crate::domain::now();
                let row: Option<(__Uuid, Option<__Uuid>, String, String)> =
                    sqlx::query_as("SELECT agent_id, conversation_id, chain, reserved_wei FROM transactions WHERE id = $1")
                        .bind(id)
                        .fetch_optional(&mut *tx)
                        .await?;
                let Some((agent_id, conversation_id, chain, reserved)) = row else {
                    return Ok(None);
                };
                // The agent first, as reservations do, so the spending row changes under one lock.
                lock_agent(&mut tx, agent_id).await?;
                let done = sqlx::query(
                    "UPDATE transactions SET status = $1, block_number = $2, gas_used = $3, actual_cost_wei = $4, \
                     updated_at = $5 WHERE id = $6 AND status IN ('signed', 'pending')",
                )
                .bind(s.status.as_str())
                .bind(s.block_number.map(|n| n as i64))
                .bind(s.gas_used.map(|n| n as i64))
                .bind(s.actual_cost_wei.map(|w| w.to_string()))
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() != 1 {
                    return Ok(None);
                }
                let reserved = rows::wei_from_text(&reserved, "reserved_wei")?;
                let actual = s.actual_cost_wei.unwrap_or(alloy::primitives::U256::ZERO);
                adjust_spent(&mut tx, agent_id, &chain, actual, reserved).await?;
                let row = (agent_id, conversation_id);
                let row = sqlx::query(
                    "INSERT INTO events (conversation_id, agent_id, kind, payload, created_at) VALUES ($1, $2, $3, $4, $5) \
                     RETURNING id, conversation_id, agent_id, kind, payload",
                )
                .bind(row.1)
                .bind(row.0)
                .bind("tx_confirmation")
                .bind(event.to_string())
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
                let record = event_from_row(&row)?;
                if let Some(message) = message {
                    // The conversation may have been deleted meanwhile; the event is stored all the same.
                    let exists: Option<(__Uuid,)> = sqlx::query_as("SELECT id FROM conversations WHERE id = $1")
                        .bind(message.conversation_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if exists.is_some() {
                        insert_message_in(&mut tx, message).await?;
                    }
                }
                notify_event(&mut tx, record.id).await?;
                tx.commit().await?;
                Ok(Some(record))
            }

            async fn events_after(&self, conversation_id: __Uuid, after_id: i64, limit: i64) -> StoreResult<Vec<EventRecord>> {
                let rows = sqlx::query(
                    "SELECT id, conversation_id, agent_id, kind, payload FROM events \
                     WHERE conversation_id = $1 AND id > $2 ORDER BY id LIMIT $3",
                )
                .bind(conversation_id)
                .bind(after_id)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(event_from_row).collect()
            }

            async fn event_by_id(&self, id: i64) -> StoreResult<Option<EventRecord>> {
                let row = sqlx::query("SELECT id, conversation_id, agent_id, kind, payload FROM events WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(event_from_row).transpose()
            }
        }
    };
}

pub(crate) use impl_store;
