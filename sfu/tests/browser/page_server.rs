//! A minimal HTTP server for the demo page alone, so the page and the driver can be tested
//! without a node: `/conference.js` is answered with the page's conference script, every other
//! GET with the page.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};

const DEMO: &str = include_str!("../../src/node/demo.html");
const CONFERENCE: &str = include_str!("../../src/node/conference.js");

/// Serves the page on a free loopback port until the test process ends; returns its URL.
pub fn serve_demo() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the page server");
    let url = format!("http://{}/", listener.local_addr().expect("local address"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = answer(stream);
        }
    });
    url
}

fn answer(mut stream: TcpStream) -> std::io::Result<()> {
    // Read the request head; the body of anything but a GET is not expected here.
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let (kind, body) = match request.split_whitespace().nth(1) {
        Some("/conference.js") => ("text/javascript", CONFERENCE),
        _ => ("text/html; charset=utf-8", DEMO),
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())
}
