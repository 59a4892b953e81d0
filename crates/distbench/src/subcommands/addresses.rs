//! Where the sequencer and a node manager listen and what their service
//! instances advertise, from their flags (devices, `--bind`,
//! `--data_plane_address`).

use super::cli::{NodeManagerArgs, SequencerArgs};
use crate::node_manager::Addresses;
use std::net::IpAddr;

/// The address a control service listens on, as upstream's: the device's
/// address, else `--bind` (rackbench's), else every interface; and the
/// address it names, when it names one.
fn control_address(
    device: Option<&str>,
    bind: Option<IpAddr>,
) -> anyhow::Result<(IpAddr, Option<IpAddr>)> {
    let named = match (device, bind) {
        (Some(dev), _) => Some(crate::netif::device_address(dev)?),
        (None, Some(ip)) if !ip.is_unspecified() => Some(ip),
        _ => None,
    };
    let listen = named.or(bind).unwrap_or_else(crate::netif::every_interface);
    Ok((listen, named))
}

/// Where a node manager's instances listen, what they advertise and where
/// they serve their traffic, from its flags, as upstream's node manager
/// chooses: the endpoints listen with the control service and advertise
/// its named address (else this host's primary address); the traffic goes
/// on the data-plane device's address (else this host's primary address).
/// rackbench's `--bind` and `--data_plane_address` name them directly.
fn instance_addresses(
    listen: IpAddr,
    named: Option<IpAddr>,
    bind_named: bool,
    data_plane_address: Option<IpAddr>,
    data_device: Option<&str>,
) -> anyhow::Result<Addresses> {
    let data = match (data_plane_address, data_device) {
        (Some(ip), _) => ip,
        (None, Some(dev)) => crate::netif::device_address(dev)?,
        // --bind (ours) keeps everything on its address.
        (None, None) if bind_named => named.unwrap_or(listen),
        (None, None) => crate::netif::best_address()?,
    };
    let endpoint = match named.or(data_plane_address) {
        Some(ip) => ip,
        None => crate::netif::best_address()?,
    };
    Ok(Addresses {
        listen,
        endpoint,
        data,
    })
}

/// The sequencer's listening address and its local node managers'
/// addresses, from its flags.
pub fn sequencer_addresses(a: &SequencerArgs) -> anyhow::Result<(IpAddr, Addresses)> {
    let (listen, named) = control_address(a.control_plane_device.as_deref(), a.bind)?;
    let bind_named = a.control_plane_device.is_none() && named.is_some();
    let nodes = instance_addresses(
        listen,
        named,
        bind_named,
        None,
        a.default_data_plane_device.as_deref(),
    )?;
    Ok((listen, nodes))
}

/// The control address and the instances' addresses of a node manager's
/// flags.
pub fn node_addresses(a: &NodeManagerArgs) -> anyhow::Result<(IpAddr, Addresses)> {
    let (listen, named) = control_address(a.control_plane_device.as_deref(), a.bind)?;
    let bind_named = a.control_plane_device.is_none() && named.is_some();
    let addrs = instance_addresses(
        listen,
        named,
        bind_named,
        a.data_plane_address,
        a.default_data_plane_device.as_deref(),
    )?;
    Ok((listen, addrs))
}
