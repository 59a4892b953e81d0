//! `rackbench serve`: the report page over HTTP, made afresh from the store
//! for each request, on one listener per address (loopback v4 and v6 by
//! default, on one port: with `--port 0` the first listener picks it and
//! the others take the same). Ctrl-C stops it with exit code 130.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use harness::Cancel;
use harness::cancel::StopReason;
use harness::store::Store;

use crate::cli::HtmlSelection;
use crate::html::html_page;

/// Seconds between the page's own reloads.
const REFRESH_SECS: u32 = 10;

pub fn serve(
    db: &Path,
    bind: &[IpAddr],
    port: u16,
    sel: &HtmlSelection,
) -> anyhow::Result<ExitCode> {
    // Fail early on a store that cannot be opened.
    Store::open(db)?;
    let addrs: Vec<IpAddr> = if bind.is_empty() {
        vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ]
    } else {
        bind.to_vec()
    };
    Cancel::set_interrupt_message("interrupted: stopping the server");
    let cancel = Cancel::global();
    let mut threads = Vec::new();
    for (server, local) in listen(&addrs, port)? {
        println!("listening on http://{local}/");
        let (db, sel, cancel) = (db.to_path_buf(), sel.clone(), cancel.clone());
        threads.push(std::thread::spawn(move || run(server, db, sel, cancel)));
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(if cancel.reason() == Some(StopReason::Interrupted) {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// How many times `--port 0` looks for a port free on every address.
const PORT_ZERO_TRIES: usize = 20;

/// One listener per address, all on one port. With port 0 the first
/// address picks a free port and the others take the same one; when one
/// of them has it taken already, the search starts again.
fn listen(addrs: &[IpAddr], port: u16) -> anyhow::Result<Vec<(tiny_http::Server, SocketAddr)>> {
    let bind = |ip: IpAddr, port: u16| {
        let at = SocketAddr::new(ip, port);
        let server = tiny_http::Server::http(at)
            .map_err(|e| anyhow::anyhow!("cannot listen on {at}: {e}"))?;
        let local = server
            .server_addr()
            .to_ip()
            .context("the server has no IP address")?;
        anyhow::Ok((server, local))
    };
    let tries = if port == 0 { PORT_ZERO_TRIES } else { 1 };
    let mut last = None;
    'again: for _ in 0..tries {
        let mut out = Vec::with_capacity(addrs.len());
        let mut chosen = port;
        for &ip in addrs {
            match bind(ip, chosen) {
                Ok((server, local)) => {
                    chosen = local.port();
                    out.push((server, local));
                }
                // The port the first address picked is taken here: pick again.
                Err(e) if port == 0 && !out.is_empty() => {
                    last = Some(e);
                    continue 'again;
                }
                Err(e) => return Err(e),
            }
        }
        return Ok(out);
    }
    let e = last.unwrap_or_else(|| anyhow::anyhow!("no free port on every address"));
    Err(e.context(format!(
        "no port free on all of {addrs:?} in {PORT_ZERO_TRIES} tries"
    )))
}

fn with_header(
    mut r: tiny_http::Response<std::io::Cursor<Vec<u8>>>,
    h: Result<tiny_http::Header, ()>,
) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    if let Ok(h) = h {
        r.add_header(h);
    }
    r
}

fn run(server: tiny_http::Server, db: PathBuf, sel: HtmlSelection, cancel: Cancel) {
    while !cancel.is_stopped() {
        let req = match server.recv_timeout(Duration::from_millis(200)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                eprintln!("rackbench serve: {e}");
                continue;
            }
        };
        let path = req.url().split('?').next().unwrap_or("/");
        let html = tiny_http::Header::from_bytes("Content-Type", "text/html; charset=utf-8");
        let text = tiny_http::Header::from_bytes("Content-Type", "text/plain; charset=utf-8");
        let version = || Store::open(&db).and_then(|s| s.version());
        let resp = if path == "/version" {
            match version() {
                Ok(v) => with_header(tiny_http::Response::from_string(v), text),
                Err(e) => with_header(
                    tiny_http::Response::from_string(format!("error: {e}\n")).with_status_code(500),
                    text,
                ),
            }
        } else if path == "/" || path == "/index.html" {
            // The page is the store's: unchanged store, unchanged page.
            let etag = version().ok().map(|v| format!("\"{v}\""));
            let fresh = etag.as_ref().is_some_and(|t| {
                req.headers()
                    .iter()
                    .any(|h| h.field.equiv("If-None-Match") && h.value.as_str() == t)
            });
            let page = if fresh {
                Ok(None)
            } else {
                Store::open(&db)
                    .map_err(anyhow::Error::from)
                    .and_then(|s| html_page(&s, &sel, Some(REFRESH_SECS)))
                    .map(Some)
            };
            match page {
                Ok(None) => tiny_http::Response::from_string("").with_status_code(304),
                Ok(Some(page)) => {
                    let mut r = with_header(tiny_http::Response::from_string(page), html);
                    if let Some(Ok(h)) = etag.map(|t| tiny_http::Header::from_bytes("ETag", t)) {
                        r.add_header(h);
                    }
                    r
                }
                Err(e) => {
                    let mut r = tiny_http::Response::from_string(format!("error: {e:#}\n"))
                        .with_status_code(500);
                    if let Ok(h) = text {
                        r.add_header(h);
                    }
                    r
                }
            }
        } else {
            tiny_http::Response::from_string("not found; the report is at /\n")
                .with_status_code(404)
        };
        if let Err(e) = req.respond(resp) {
            eprintln!("rackbench serve: cannot answer: {e}");
        }
    }
}
