//! A minimal HTTP/1.1 client for moto's control endpoints on loopback
//! (`/moto-api/...`): one request per connection, plain HTTP only.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends `method path` with `body` to `http://host:port` and returns (status, body).
pub(crate) async fn request(
    endpoint: &str,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let authority = endpoint
        .strip_prefix("http://")
        .ok_or_else(|| format!("{endpoint} is not a plain http:// endpoint"))?
        .trim_end_matches('/');
    let mut stream = TcpStream::connect(authority)
        .await
        .map_err(|e| format!("connecting to {authority}: {e}"))?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: text/plain\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("sending request: {e}"))?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .map_err(|e| format!("reading response: {e}"))?;
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| {
            format!(
                "malformed response: {:?}",
                text.chars().take(80).collect::<String>()
            )
        })?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}
