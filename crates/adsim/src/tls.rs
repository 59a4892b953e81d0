//! TLS for the server and client (`--tls`), with rustls.
//!
//! The server uses `--cert/--key` when given, else generates a self-signed
//! pair for localhost and its addresses (written next to the report so a
//! client can pin it with `--ca`). The client verifies the server against
//! `--ca` when given; without it, it accepts the server's certificate
//! unverified, as upstream's client does with its bundled example pair:
//! the point is the cost of encryption, not authentication.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::{self, RootCertStore};
use tonic::transport::{Channel, Endpoint};

/// A PEM certificate chain and private key.
pub struct Pair {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    /// True when generated here.
    pub generated: bool,
}

/// The server's pair: the given files, or a fresh self-signed one valid for
/// localhost, the loopback addresses and `bind`.
pub fn server_pair(cert: Option<&Path>, key: Option<&Path>, bind: IpAddr) -> crate::Result<Pair> {
    if let (Some(c), Some(k)) = (cert, key) {
        let read = |p: &Path, what: &str| {
            std::fs::read(p).map_err(|e| {
                crate::Error::Input(format!("cannot read the TLS {what} {}: {e}", p.display()))
            })
        };
        let (cert_pem, key_pem) = (read(c, "certificate")?, read(k, "key")?);
        if CertificateDer::pem_slice_iter(&cert_pem).next().is_none() {
            return Err(crate::Error::Input(format!(
                "{}: no PEM certificate in the file (expected -----BEGIN CERTIFICATE-----)",
                c.display()
            )));
        }
        if rustls_pki_types::PrivateKeyDer::from_pem_slice(&key_pem).is_err() {
            return Err(crate::Error::Input(format!(
                "{}: no PEM private key in the file",
                k.display()
            )));
        }
        return Ok(Pair {
            cert_pem,
            key_pem,
            generated: false,
        });
    }
    let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    if !bind.is_unspecified() && !bind.is_loopback() {
        names.push(bind.to_string());
    }
    let ck = rcgen::generate_simple_self_signed(names).map_err(|e| {
        crate::Error::Host(format!("cannot generate a self-signed certificate: {e}"))
    })?;
    Ok(Pair {
        cert_pem: ck.cert.pem().into_bytes(),
        key_pem: ck.signing_key.serialize_pem().into_bytes(),
        generated: true,
    })
}

/// The client's TLS settings: trust `ca` (PEM file) or accept any server.
pub fn client_connector(ca: Option<&Path>) -> crate::Result<TlsConnector> {
    let provider = Arc::new(ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| crate::Error::Host(format!("TLS protocol versions: {e}")))?;
    let mut cfg = match ca {
        Some(p) => {
            let pem = std::fs::read(p).map_err(|e| {
                crate::Error::Input(format!("cannot read --ca {}: {e}", p.display()))
            })?;
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(&pem) {
                let c = c.map_err(|e| {
                    crate::Error::Input(format!(
                        "--ca {}: a certificate is not valid PEM: {e}",
                        p.display()
                    ))
                })?;
                roots.add(c).map_err(|e| {
                    crate::Error::Input(format!(
                        "--ca {}: a certificate cannot be used: {e}",
                        p.display()
                    ))
                })?;
            }
            if roots.is_empty() {
                return Err(crate::Error::Input(format!(
                    "--ca {}: no PEM certificate in the file",
                    p.display()
                )));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(harness::tls::AnyCertificate::new(
                &provider,
            )))
            .with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(TlsConnector::from(Arc::new(cfg)))
}

/// One HTTP/2 channel over TLS to `addr`, the certificate checked for
/// `name` (the --server host) when the connector verifies.
pub async fn connect(
    addr: SocketAddr,
    name: &str,
    tls: &TlsConnector,
) -> Result<Channel, tonic::transport::Error> {
    let server_name = ServerName::try_from(
        name.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
    )
    .unwrap_or_else(|_| ServerName::IpAddress(addr.ip().into()));
    let tls = tls.clone();
    let connector = tower::service_fn(move |_uri: tonic::codegen::http::Uri| {
        let (tls, server_name) = (tls.clone(), server_name.clone());
        async move {
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            tcp.set_nodelay(true)?;
            let stream = tls.connect(server_name, tcp).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    });
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("a socket address is a valid URI authority")
        .connect_timeout(std::time::Duration::from_secs(5))
        .connect_with_connector(connector)
        .await
}
