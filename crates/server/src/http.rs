//! The HTTP layer: one handler for every request. It checks the token, then serves
//! an embedded page or runs an API route on the blocking pool.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderValue, Method, Response, StatusCode};
use axum::Router;

use crate::api::{self, ApiError, Params};
use crate::{assets, token, App};

/// Pages may load only the server's own scripts, styles and data.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub async fn serve(listener: std::net::TcpListener, app: Arc<App>) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let router = Router::new().fallback(handle).with_state(app);
    axum::serve(listener, router).await?;
    Ok(())
}

fn respond(status: StatusCode, content_type: &str, body: impl Into<Body>) -> Response<Body> {
    let mut r = Response::new(body.into());
    *r.status_mut() = status;
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    r
}

/// The one answer to anything outside the token or not found: no detail.
fn not_found() -> Response<Body> {
    respond(StatusCode::NOT_FOUND, "text/plain; charset=utf-8", "not found\n")
}

fn api_error(e: ApiError) -> Response<Body> {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::json!({ "error": e.message }).to_string();
    respond(status, "application/json", body)
}

async fn handle(State(app): State<Arc<App>>, req: Request) -> Response<Body> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", "read-only\n");
    }
    // The raw (still percent-encoded) path: nothing below decodes it into a file name.
    let path = req.uri().path();
    let Some(rest) = path.strip_prefix('/') else { return not_found() };
    let (tok, rest) = rest.split_once('/').unwrap_or((rest, ""));
    if !token::same(tok, &app.token) {
        return not_found();
    }
    if !path[1..].contains('/') {
        // `/TOKEN` → `/TOKEN/`, so relative links resolve.
        let mut r = respond(StatusCode::PERMANENT_REDIRECT, "text/plain; charset=utf-8", "");
        if let Ok(v) = HeaderValue::from_str(&format!("/{}/", app.token)) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        return r;
    }
    if let Some(route) = rest.strip_prefix("api/") {
        let Some(handler) = api::route(route) else {
            return api_error(ApiError::not_found(format!("no API route {route:?} — see docs/api.md")));
        };
        let params = match Query::<Vec<(String, String)>>::try_from_uri(req.uri()) {
            Ok(Query(pairs)) => Params::new(pairs),
            Err(e) => return api_error(ApiError::bad(format!("bad query string: {e}"))),
        };
        let app = app.clone();
        return match tokio::task::spawn_blocking(move || handler(&app, &params)).await {
            Ok(Ok(body)) => respond(StatusCode::OK, "application/json", body),
            Ok(Err(e)) => api_error(e),
            Err(e) => api_error(ApiError { status: 500, message: format!("request failed: {e}") }),
        };
    }
    match assets::get(rest) {
        Some(bytes) => {
            let ct = if rest.is_empty() { "text/html; charset=utf-8" } else { assets::content_type(rest) };
            let mut r = respond(StatusCode::OK, ct, bytes);
            r.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
            r
        }
        None => not_found(),
    }
}
