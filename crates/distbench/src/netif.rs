//! This host's network interfaces (for `--default_data_plane_device` and
//! the node manager's control device).

use std::net::IpAddr;

/// The IPv4 (else IPv6) address of network interface `dev`.
pub fn device_address(dev: &str) -> anyhow::Result<IpAddr> {
    let ifaces = nix::ifaddrs::getifaddrs()
        .map_err(|e| anyhow::anyhow!("cannot list network interfaces: {e}"))?;
    let mut found: Option<IpAddr> = None;
    let mut names: Vec<String> = Vec::new();
    for ifa in ifaces {
        let addr = ifa.address.as_ref().and_then(|a| {
            a.as_sockaddr_in()
                .map(|s| IpAddr::V4(s.ip()))
                .or_else(|| a.as_sockaddr_in6().map(|s| IpAddr::V6(s.ip())))
        });
        if ifa.interface_name == dev
            && let Some(a) = addr
            && (found.is_none() || (a.is_ipv4() && !found.is_some_and(|f| f.is_ipv4())))
        {
            found = Some(a);
        }
        if !names.contains(&ifa.interface_name) {
            names.push(ifa.interface_name);
        }
    }
    found.ok_or_else(|| {
        anyhow::anyhow!(
            "network interface '{dev}' not found or has no address (interfaces: {})",
            names.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_its_address_and_unknown_devices_are_named() {
        assert_eq!(
            device_address("lo").unwrap(),
            IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
        );
        let e = device_address("nosuchdev0").unwrap_err().to_string();
        assert!(
            e.contains("'nosuchdev0' not found") && e.contains("lo"),
            "{e}"
        );
    }
}
