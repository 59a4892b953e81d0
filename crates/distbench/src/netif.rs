//! This host's network interfaces (for `--default_data_plane_device` and
//! the node manager's control device).

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};

/// `--prefer_ipv4`: pick a device's IPv4 address over its IPv6 one (the
/// default prefers IPv6, as upstream's).
static PREFER_IPV4: AtomicBool = AtomicBool::new(false);

/// Sets `--prefer_ipv4` for this process.
pub fn set_prefer_ipv4(on: bool) {
    PREFER_IPV4.store(on, Ordering::Relaxed);
}

/// Link-local addresses are never picked (upstream's test: `fe80:` and
/// `169.254.255` prefixes).
fn link_local(a: &IpAddr) -> bool {
    let s = a.to_string();
    s.starts_with("fe80:") || s.starts_with("169.254.255")
}

/// The address of network interface `dev`, chosen as upstream's
/// `GetBestAddress`: the first non-link-local address of the preferred
/// family (IPv6, or IPv4 with `--prefer_ipv4`), else the first
/// non-link-local address of the other family (with a warning on stderr).
pub fn device_address(dev: &str) -> crate::Result<IpAddr> {
    device_address_preferring(dev, PREFER_IPV4.load(Ordering::Relaxed))
}

/// [`device_address`] with the preference given.
pub fn device_address_preferring(dev: &str, prefer_ipv4: bool) -> crate::Result<IpAddr> {
    let ifaces = nix::ifaddrs::getifaddrs()
        .map_err(|e| crate::Error::Host(format!("cannot list network interfaces: {e}")))?;
    let mut mine: Vec<IpAddr> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for ifa in ifaces {
        let addr = ifa.address.as_ref().and_then(|a| {
            a.as_sockaddr_in()
                .map(|s| IpAddr::V4(s.ip()))
                .or_else(|| a.as_sockaddr_in6().map(|s| IpAddr::V6(s.ip())))
        });
        if ifa.interface_name == dev
            && let Some(a) = addr
            && !link_local(&a)
        {
            mine.push(a);
        }
        if !names.contains(&ifa.interface_name) {
            names.push(ifa.interface_name);
        }
    }
    if let Some(a) = mine.iter().find(|a| a.is_ipv4() == prefer_ipv4) {
        return Ok(*a);
    }
    if let Some(a) = mine.first() {
        eprintln!(
            "distbench: using {a} on {dev}, which is not of the preferred IP version ({})",
            if prefer_ipv4 { "v4" } else { "v6" }
        );
        return Ok(*a);
    }
    Err(crate::Error::Input(format!(
        "network interface '{dev}' not found or has no address (prefer_ipv4={prefer_ipv4}; \
         interfaces: {})",
        names.join(", ")
    )))
}

/// Every (device, address) of this host.
fn addresses() -> crate::Result<Vec<(String, IpAddr)>> {
    let ifaces = nix::ifaddrs::getifaddrs()
        .map_err(|e| crate::Error::Host(format!("cannot list network interfaces: {e}")))?;
    Ok(ifaces
        .filter_map(|ifa| {
            let a = ifa.address.as_ref()?;
            let ip = a
                .as_sockaddr_in()
                .map(|s| IpAddr::V4(s.ip()))
                .or_else(|| a.as_sockaddr_in6().map(|s| IpAddr::V6(s.ip())))?;
            Some((ifa.interface_name, ip))
        })
        .collect())
}

/// Upstream's notion of a private address (a prefix test on the text,
/// with 6to4 addresses unpacked): 10., 172.16, 192.168, fc00:, fd00:.
fn private(a: &IpAddr) -> bool {
    let text = match a {
        IpAddr::V6(v6) if v6.segments()[0] == 0x2002 => {
            let s = v6.segments();
            format!(
                "{}.{}.{}.{}",
                s[1] >> 8,
                s[1] & 0xff,
                s[2] >> 8,
                s[2] & 0xff
            )
        }
        _ => a.to_string(),
    };
    ["10.", "172.16", "192.168", "fc00:", "fd00:"]
        .iter()
        .any(|p| text.starts_with(p))
}

/// This host's primary address, chosen as upstream's `GetBestAddress`
/// without a device: link-local addresses never; otherwise the first
/// address of the highest score, one point for the preferred family
/// (IPv6, or IPv4 with `--prefer_ipv4`), one for a private address, two
/// for any device but `lo`.
pub fn best_address() -> crate::Result<IpAddr> {
    let prefer_ipv4 = PREFER_IPV4.load(Ordering::Relaxed);
    let mut best: Option<(i32, IpAddr)> = None;
    for (dev, a) in addresses()? {
        if link_local(&a) {
            continue;
        }
        let score = i32::from(a.is_ipv4() == prefer_ipv4)
            + i32::from(private(&a))
            + if dev == "lo" { 0 } else { 2 };
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, a));
        }
    }
    best.map(|(_, a)| a).ok_or_else(|| {
        crate::Error::Host(format!(
            "no address found on any network interface (prefer_ipv4={prefer_ipv4})"
        ))
    })
}

/// The address meaning "every interface" as upstream binds it without a
/// device: `0.0.0.0` when this host has no IPv6 address (link-local ones
/// aside) or IPv4 is preferred, else `::` (which takes IPv4 too).
pub fn every_interface() -> IpAddr {
    let only_v4 = addresses()
        .map(|all| all.iter().all(|(_, a)| a.is_ipv4() || link_local(a)))
        .unwrap_or(true);
    if only_v4 || PREFER_IPV4.load(Ordering::Relaxed) {
        IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_as_upstream() {
        for (a, want) in [
            ("10.1.2.3", true),
            ("172.16.0.1", true),
            ("172.17.0.1", false),
            ("192.168.1.1", true),
            ("8.8.8.8", false),
            ("fd00::1", true),
            ("2002:a00:1::1", true),
            ("2001:db8::1", false),
        ] {
            assert_eq!(private(&a.parse().unwrap()), want, "{a}");
        }
        // Some address: at least loopback's.
        assert!(best_address().is_ok());
        assert!(every_interface().is_unspecified());
    }

    #[test]
    fn loopback_has_its_address_and_unknown_devices_are_named() {
        assert_eq!(
            device_address_preferring("lo", true).unwrap(),
            IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
        );
        // IPv6 unless IPv4 is preferred (where lo has ::1).
        let v6 = device_address_preferring("lo", false).unwrap();
        assert!(
            v6 == IpAddr::V6(std::net::Ipv6Addr::LOCALHOST) || v6.is_ipv4(),
            "{v6}"
        );
        let e = device_address("nosuchdev0").unwrap_err().to_string();
        assert!(
            e.contains("'nosuchdev0' not found") && e.contains("lo"),
            "{e}"
        );
    }
}
