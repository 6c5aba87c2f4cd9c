//! The few HTTP/1.1 requests signaling needs, over a plain TCP stream: one request per
//! connection (`Connection: close`), so the reply ends where the stream does and no chunked or
//! keep-alive handling is needed. The workspace has no HTTP client, and one POST, one DELETE
//! and one GET do not warrant one.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long one request may take end to end; the node answers in milliseconds.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A reply: the status, the lowercased header names with their values, the body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// The first header of that (lowercase) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One request to `addr`. `headers` come after Host, Connection and Content-Length.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse(&String::from_utf8_lossy(&raw))
}

fn parse(raw: &str) -> std::io::Result<Reply> {
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP reply");
    let (head, body) = raw.split_once("\r\n\r\n").ok_or_else(bad)?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_lowercase(), v.trim().to_owned()))
        .collect();
    Ok(Reply {
        status,
        headers,
        body: body.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_split_into_status_headers_and_body() {
        let reply =
            parse("HTTP/1.1 201 Created\r\nLocation: /whip/a/1\r\nContent-Type: x\r\n\r\nv=0\r\n")
                .expect("a reply");
        assert_eq!(reply.status, 201);
        assert_eq!(reply.header("location"), Some("/whip/a/1"));
        assert_eq!(reply.body, "v=0\r\n");
        assert!(parse("garbage").is_err());
    }
}
