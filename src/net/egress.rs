//! The guarded HTTP fetch every request to an address a caller chose goes through (an agent's paid or free request,
//! §16; a webhook delivery, §19): the URL and every address its host
//! resolves to are checked first (`guard`), and the connection goes to exactly those addresses (a client whose only
//! resolver is that answer, built once per host and checked answer and kept while the answer stays the same, so its
//! connections and TLS setup serve the next request); redirects are handed back, not followed; the body is cut at
//! `X402_MAX_RESPONSE_BYTES`; one deadline bounds the whole exchange; the caller's headers are filtered.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Url};
use tokio::time::Instant;

pub mod guard;

use crate::config::X402Config;
use guard::{NotAllowed, Target};

/// Header names a caller may not set: the fetch sets them itself, they belong to one connection (hop-by-hop), or
/// they would carry a payment the service did not decide.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];
const RESERVED_PREFIXES: &[&str] = &["payment-", "x-payment"];
/// Caller headers at most.
const MAX_HEADERS: usize = 50;
/// Methods a fetch may use.
const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Why a fetch did not give an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// 422 `url_not_allowed`.
    #[error("{0}")]
    UrlNotAllowed(#[from] NotAllowed),
    /// 422 `validation_failed` on `field`.
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    /// 502 `upstream_unavailable`: the host's name does not resolve.
    #[error("the url's host does not resolve")]
    HostNotFound,
    /// 502 `upstream_unavailable`: no connection, or the exchange broke off.
    #[error("the resource could not be reached")]
    Unavailable,
    /// 504 `upstream_timeout`: the deadline passed.
    #[error("the resource did not answer in time")]
    Timeout,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> FetchError {
    FetchError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// A request to send, its caller's parts checked.
#[derive(Debug, Clone)]
pub struct FetchRequest {
    pub method: Method,
    pub url: String,
    headers: HeaderMap,
    body: Option<String>,
}

impl FetchRequest {
    /// Checks the caller's method and headers: a reserved header name (`Host`, hop-by-hop, `Content-Length`,
    /// `Payment-*`, `X-Payment*`) is refused, not dropped, so the caller learns it was not sent.
    pub fn new(
        method: Option<&str>,
        url: &str,
        headers: &BTreeMap<String, String>,
        body: Option<String>,
    ) -> Result<Self, FetchError> {
        let method = method.unwrap_or("GET").trim().to_ascii_uppercase();
        if !METHODS.contains(&method.as_str()) {
            return Err(invalid("method", format!("must be one of {}", METHODS.join(", "))));
        }
        if headers.len() > MAX_HEADERS {
            return Err(invalid("headers", format!("at most {MAX_HEADERS} headers")));
        }
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let lower = name.trim().to_ascii_lowercase();
            if RESERVED_HEADERS.contains(&lower.as_str()) || RESERVED_PREFIXES.iter().any(|p| lower.starts_with(p)) {
                return Err(invalid("headers", format!("{name} cannot be set")));
            }
            let header_name = HeaderName::from_bytes(lower.as_bytes())
                .map_err(|_| invalid("headers", "a header name is malformed"))?;
            let header_value = HeaderValue::from_str(value)
                .map_err(|_| invalid("headers", format!("the value of {lower} is malformed")))?;
            map.append(header_name, header_value);
        }
        Ok(FetchRequest {
            method: Method::from_bytes(method.as_bytes()).map_err(|_| invalid("method", "is malformed"))?,
            url: url.to_owned(),
            headers: map,
            body,
        })
    }

    /// The same request carrying a payment header (set by the service, past the caller filter).
    pub fn with_payment(&self, name: &'static str, value: &str) -> Result<Self, FetchError> {
        let mut paid = self.clone();
        let malformed = || invalid("headers", "the payment header is malformed");
        let name = HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes()).map_err(|_| malformed())?;
        paid.headers
            .insert(name, HeaderValue::from_str(value).map_err(|_| malformed())?);
        Ok(paid)
    }
}

/// The resource's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub status: u16,
    /// Lower-case names; repeated headers joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// At most `X402_MAX_RESPONSE_BYTES`.
    pub body: Vec<u8>,
    /// The body was longer and has been cut.
    pub truncated: bool,
}

impl Fetched {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(&name.to_ascii_lowercase()).map(String::as_str)
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Clients kept at most; past it they are all dropped and built again as asked (a cache, not a registry).
const MAX_CLIENTS: usize = 64;

/// What a client is built for: a host name with the checked addresses it resolved to (its only resolver), or a URL
/// that names an address itself (`None`).
type ClientKey = Option<(String, Vec<SocketAddr>)>;

/// The guarded fetch, configured once (`X402_*`).
#[derive(Debug, Clone)]
pub struct Fetcher {
    config: X402Config,
    /// One client per host and checked answer: building one (its TLS setup reads the trusted roots) costs more
    /// than a request, and a kept one keeps its connections alive for the next request.
    clients: Arc<std::sync::Mutex<std::collections::HashMap<ClientKey, reqwest::Client>>>,
}

impl Fetcher {
    pub fn new(config: X402Config) -> Self {
        Fetcher {
            config,
            clients: Default::default(),
        }
    }

    /// The deadline of an exchange starting now (`X402_TIMEOUT_MS`): pass it to every `send` of that exchange.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.config.timeout
    }

    /// Checks the request's URL (only its form: the cheap refusal before anything else is done).
    pub fn check_url(&self, url: &str) -> Result<Url, FetchError> {
        Ok(guard::check_url(url, self.config.allow_private)?.0)
    }

    /// Sends `request` once: check, resolve, check every address, connect to those, read the answer.
    pub async fn send(&self, request: &FetchRequest, deadline: Instant) -> Result<Fetched, FetchError> {
        let (url, target) = guard::check_url(&request.url, self.config.allow_private)?;
        tokio::time::timeout_at(deadline, self.exchange(request, url, target))
            .await
            .map_err(|_| FetchError::Timeout)?
    }

    async fn exchange(&self, request: &FetchRequest, url: Url, target: Target) -> Result<Fetched, FetchError> {
        let key = match &target {
            Target::Address(_) => None,
            Target::Name(name) => Some((name.clone(), self.resolve(name, &url).await?)),
        };
        let client = self.client(key)?;
        let mut builder = client
            .request(request.method.clone(), url)
            .headers(request.headers.clone());
        if let Some(body) = &request.body {
            builder = builder.body(body.clone());
        }
        let mut response = builder.send().await.map_err(|e| {
            tracing::info!(error = %e.without_url(), "x402 fetch: the resource could not be reached");
            FetchError::Unavailable
        })?;
        let status = response.status().as_u16();
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in response.headers() {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            headers
                .entry(name.as_str().to_owned())
                .and_modify(|v| {
                    v.push_str(", ");
                    v.push_str(&value);
                })
                .or_insert(value);
        }
        let limit = self.config.max_response_bytes;
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = response.chunk().await.map_err(|_| FetchError::Unavailable)? {
            let room = limit - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched {
            status,
            headers,
            body,
            truncated,
        })
    }

    /// The client for `key`: the one kept for it, or one built now (redirects not followed, no proxy, no referer,
    /// no resolver but the checked answer) and kept.
    fn client(&self, key: ClientKey) -> Result<reqwest::Client, FetchError> {
        let mut clients = self.clients.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .referer(false)
            .dns_resolver(Arc::new(NoResolver));
        let builder = match &key {
            None => builder,
            Some((name, addrs)) => builder.resolve_to_addrs(name, addrs),
        };
        let client = builder.build().map_err(|e| {
            tracing::warn!(error = %e, "x402 fetch: the HTTP client could not be built");
            FetchError::Unavailable
        })?;
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(key, client.clone());
        Ok(client)
    }

    /// Every address `name` resolves to, each checked; none at all is `HostNotFound`.
    async fn resolve(&self, name: &str, url: &Url) -> Result<Vec<SocketAddr>, FetchError> {
        let port = url.port_or_known_default().unwrap_or(80);
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name, port))
            .await
            .map_err(|_| FetchError::HostNotFound)?
            .collect();
        if addrs.is_empty() {
            return Err(FetchError::HostNotFound);
        }
        if !self.config.allow_private {
            for addr in &addrs {
                guard::check_address(addr.ip())?;
            }
        }
        Ok(addrs)
    }
}

/// The fetch client's resolver for any name it was not given: none. Only the checked addresses are reachable.
struct NoResolver;

impl reqwest::dns::Resolve for NoResolver {
    fn resolve(&self, _name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async { Err("names are resolved and checked before the request".into()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn reserved_caller_headers_are_refused() {
        for name in [
            "Host",
            "content-length",
            "Connection",
            "Keep-Alive",
            "Transfer-Encoding",
            "TE",
            "Trailer",
            "Upgrade",
            "Proxy-Authorization",
            "PAYMENT-SIGNATURE",
            "Payment-Required",
            "X-PAYMENT",
            "x-payment-response",
        ] {
            let err = FetchRequest::new(None, "https://a.example/", &headers(&[(name, "x")]), None).unwrap_err();
            assert!(
                matches!(err, FetchError::Invalid { field: "headers", .. }),
                "{name}: {err:?}"
            );
        }
    }

    #[test]
    fn ordinary_headers_and_methods_pass() {
        let request = FetchRequest::new(
            Some("post"),
            "https://a.example/",
            &headers(&[
                ("Accept", "application/json"),
                ("X-Api-Key", "k"),
                ("Authorization", "Bearer t"),
            ]),
            Some("{}".into()),
        )
        .unwrap();
        assert_eq!(request.method, Method::POST);
        assert_eq!(request.headers.len(), 3);
        assert!(FetchRequest::new(Some("CONNECT"), "https://a.example/", &BTreeMap::new(), None).is_err());
        assert!(FetchRequest::new(None, "https://a.example/", &headers(&[("bad name", "x")]), None).is_err());
        assert!(FetchRequest::new(None, "https://a.example/", &headers(&[("x-a", "line\nbreak")]), None).is_err());
        let paid = request.with_payment("PAYMENT-SIGNATURE", "abc").unwrap();
        assert_eq!(paid.headers.get("payment-signature").unwrap(), "abc");
    }

    /// A local HTTP server answering `ok` that counts the connections it accepted; returns its port.
    async fn counting_server(accepted: Arc<std::sync::atomic::AtomicUsize>) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buffer = [0u8; 4096];
                    let mut seen = Vec::new();
                    while let Ok(n) = socket.read(&mut buffer).await {
                        if n == 0 {
                            return;
                        }
                        seen.extend_from_slice(&buffer[..n]);
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            seen.drain(..end + 4);
                            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if socket.write_all(answer).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        port
    }

    #[tokio::test]
    async fn fetches_to_a_host_whose_checked_addresses_are_unchanged_share_a_client_and_its_connections() {
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let port = counting_server(accepted.clone()).await;
        let fetcher = Fetcher::new(X402Config {
            allow_private: true,
            ..X402Config::default()
        });
        for url in [
            format!("http://localhost:{port}/a"),
            format!("http://localhost:{port}/b"),
            format!("http://127.0.0.1:{port}/c"),
            format!("http://127.0.0.1:{port}/d"),
        ] {
            let request = FetchRequest::new(None, &url, &BTreeMap::new(), None).unwrap();
            let answer = fetcher.send(&request, fetcher.deadline()).await.unwrap();
            assert_eq!((answer.status, answer.text().as_str()), (200, "ok"), "{url}");
        }
        // One connection for the name, one for the address: each kept alive for the next request.
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
