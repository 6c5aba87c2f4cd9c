//! A minimal HTTP server for the demo page alone, so the page and the driver can be tested
//! without a node: every GET is answered with the page.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};

const DEMO: &str = include_str!("../../src/node/demo.html");

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
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        DEMO.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(DEMO.as_bytes())
}
