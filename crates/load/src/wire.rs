//! Byte accounting for requests and responses, and when a reply arrived.

use std::time::Instant;

/// Anything whose size on the wire can be counted (for `bytes_tx`/`bytes_rx`).
pub trait WireSize {
    /// Bytes this message occupies on the wire, framing included where known.
    fn wire_size(&self) -> u64;

    /// When a reply's last bytes reached this host, where the transport
    /// knows it (the kernel's receive timestamp): the driver ends the
    /// request's latency there rather than when the client's thread got
    /// round to reading it, so a client woken late is not charged to the
    /// server. `None` (the default) ends it when the reply is read.
    fn arrived(&self) -> Option<Instant> {
        None
    }
}

impl WireSize for () {
    fn wire_size(&self) -> u64 {
        0
    }
}

impl WireSize for Vec<u8> {
    fn wire_size(&self) -> u64 {
        self.len() as u64
    }
}

/// gRPC length-prefixed framing: 1 compression flag byte + 4 length bytes.
#[cfg(feature = "tonic")]
const GRPC_FRAME_HEADER: u64 = 5;

#[cfg(feature = "tonic")]
impl<T: prost::Message> WireSize for tonic::Request<T> {
    fn wire_size(&self) -> u64 {
        self.get_ref().encoded_len() as u64 + GRPC_FRAME_HEADER
    }
}

#[cfg(feature = "tonic")]
impl<T: prost::Message> WireSize for tonic::Response<T> {
    fn wire_size(&self) -> u64 {
        self.get_ref().encoded_len() as u64 + GRPC_FRAME_HEADER
    }
}

impl WireSize for u64 {
    fn wire_size(&self) -> u64 {
        8
    }
}

/// A pre-encoded request (e.g. a gRPC-framed message): its length.
impl WireSize for bytes::Bytes {
    fn wire_size(&self) -> u64 {
        self.len() as u64
    }
}
