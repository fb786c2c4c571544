//! `GET /`: the web console, a single page built from `web/` into `web/dist/` (committed, so building the binary
//! needs no Node) and embedded here at compile time. `web/build.sh` rebuilds it; CI checks the committed copy is current.

use axum::Router;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const INDEX_HTML: &str = include_str!("../../web/dist/index.html");
const CONSOLE_JS: &[u8] = include_bytes!("../../web/dist/assets/console.js");
const CONSOLE_CSS: &[u8] = include_bytes!("../../web/dist/assets/console.css");

/// The page loads only its own scripts and styles and talks only to this origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
/// index.html is revalidated on every load; it names the assets with `?v=<content hash>`, so they can be kept for good.
const NO_CACHE: &str = "no-cache";
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/assets/console.js", get(script))
        .route("/assets/console.css", get(style))
}

fn asset(body: &'static [u8], content_type: &'static str, cache: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (CACHE_CONTROL, HeaderValue::from_static(cache)),
            (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        body,
    )
        .into_response()
}

async fn index() -> Response {
    let mut response = asset(INDEX_HTML.as_bytes(), "text/html; charset=utf-8", NO_CACHE);
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(
        HeaderName::from_static("x-frame-options"),
        HeaderValue::from_static("DENY"),
    );
    response
}

async fn script() -> Response {
    asset(CONSOLE_JS, "text/javascript; charset=utf-8", IMMUTABLE)
}

async fn style() -> Response {
    asset(CONSOLE_CSS, "text/css; charset=utf-8", IMMUTABLE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    async fn get(path: &str) -> Response {
        router::<()>()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn serves_the_page_and_the_assets_it_names() {
        let page = get("/").await;
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(page.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(page.headers()[CACHE_CONTROL], "no-cache");
        assert!(page.headers().contains_key(CONTENT_SECURITY_POLICY));
        for (path, content_type) in [
            ("/assets/console.js", "text/javascript; charset=utf-8"),
            ("/assets/console.css", "text/css; charset=utf-8"),
        ] {
            assert!(INDEX_HTML.contains(&format!("\"{path}?v=")), "index.html names {path}");
            let response = get(path).await;
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(response.headers()[CONTENT_TYPE], content_type);
            assert_eq!(response.headers()[CACHE_CONTROL], IMMUTABLE);
        }
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for text in [INDEX_HTML, std::str::from_utf8(CONSOLE_CSS).unwrap()] {
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "no external URL"
            );
        }
    }
}
