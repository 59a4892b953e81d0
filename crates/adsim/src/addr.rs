//! Server addresses as the client options give them. Below both the
//! client command and the `Client` kernels, which resolve the same way.

use std::net::{SocketAddr, ToSocketAddrs};

/// Resolves `server:port` (an IPv6 address needs no brackets). A name
/// that does not resolve is the user's to fix (`--server`).
pub fn resolve(server: &str, port: u16) -> crate::Result<SocketAddr> {
    let host = server.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (host, port)
        .to_socket_addrs()
        .map_err(|e| {
            crate::Error::Input(format!(
                "--server {server:?}: cannot resolve the host name: {e}"
            ))
        })?
        .next()
        .ok_or_else(|| {
            crate::Error::Input(format!("--server {server:?}: the host name has no address"))
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ipv6_and_names_resolve() {
        assert_eq!(resolve("::1", 10086).unwrap().to_string(), "[::1]:10086");
        assert_eq!(resolve("[::1]", 1).unwrap().port(), 1);
        assert_eq!(resolve("127.0.0.1", 2).unwrap().to_string(), "127.0.0.1:2");
        assert!(resolve("localhost", 3).is_ok());
    }
}
