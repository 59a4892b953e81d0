//! Reads from a TCP socket with the kernel's receive timestamp
//! (`SO_TIMESTAMPNS`), so a reply's latency can end when it reached the
//! host rather than when the client's thread woke to read it.
//!
//! Why: on a VM a halted vCPU can take milliseconds to wake (issue 47's
//! perf sched traces: the client runnable 4 ms on an idle CPU), and that
//! lateness landed in the server's tail. The stamp is taken in the receive
//! path (for loopback, on the sending CPU as the packet is queued), so it
//! does not wait for the client. A read that copies several segments gets
//! the last one's stamp (`tcp_recvmsg`), so a reply read together with a
//! later one is charged up to that later arrival: never less than the
//! truth, and never more than reading it when the thread woke. The kernel
//! turns stamping on in a deferred work item when the first socket asks,
//! so the first segments can come unstamped: their replies end when read.
//!
//! Kept here rather than in a crate: nix's `recvmsg` wants initialised
//! buffers, and the read goes into the read buffer's spare room.

use bytes::BytesMut;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Asks the kernel to stamp what `socket` receives; false where it cannot
/// (replies then end when read).
pub fn enable(socket: &impl AsFd) -> bool {
    nix::sys::socket::setsockopt(socket, nix::sys::socket::sockopt::ReceiveTimestampns, &true)
        .is_ok()
}

/// One `recvmsg` into `buf`'s spare room (at least one byte of it): the
/// bytes read (0 at the end of the stream) and, when the kernel gave one,
/// when the last of them arrived.
pub fn recv(socket: &impl AsRawFd, buf: &mut BytesMut) -> io::Result<(usize, Option<Instant>)> {
    let spare = buf.spare_capacity_mut();
    let mut iov = libc::iovec {
        iov_base: spare.as_mut_ptr().cast(),
        iov_len: spare.len(),
    };
    // Room for one SCM_TIMESTAMPNS message (a header and a timespec), and
    // aligned as a cmsghdr must be.
    let mut control = [0u64; 8];
    // SAFETY: msghdr is a plain C struct; all-zero is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: the iovec points at `spare`, owned by `buf` and valid for
    // `spare.len()` bytes; the control buffer outlives the call; recvmsg
    // writes no more than either length.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    // SAFETY: recvmsg initialised the first `n` bytes of the spare room.
    unsafe { buf.set_len(buf.len() + n) };
    let mut stamp = None;
    // SAFETY: `msg` is the header recvmsg filled; CMSG_FIRSTHDR and
    // CMSG_NXTHDR stay within its control buffer and return null past it.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !c.is_null() {
        // SAFETY: `c` is non-null and points at a whole cmsghdr inside
        // `control` (CMSG_FIRSTHDR/CMSG_NXTHDR check the length).
        let h = unsafe { &*c };
        if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_TIMESTAMPNS {
            // SAFETY: an SCM_TIMESTAMPNS message carries one timespec; its
            // data may be unaligned for it, so it is read unaligned.
            let ts: libc::timespec = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast()) };
            stamp = to_instant(ts);
        }
        // SAFETY: as for CMSG_FIRSTHDR, with `c` one of its messages.
        c = unsafe { libc::CMSG_NXTHDR(&msg, c) };
    }
    Ok((n, stamp))
}

/// A CLOCK_REALTIME stamp as an `Instant`: as far before now as it is
/// before the wall clock's now (neither is after now).
fn to_instant(ts: libc::timespec) -> Option<Instant> {
    let at = std::time::Duration::new(
        u64::try_from(ts.tv_sec).ok()?,
        u32::try_from(ts.tv_nsec).ok()?,
    );
    let now = Instant::now();
    let wall = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    Some(now.checked_sub(wall.saturating_sub(at)).unwrap_or(now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    #[test]
    fn a_reply_read_late_keeps_the_time_it_arrived() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut tx =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (rx, _) = listener.accept().expect("accept");
        assert!(enable(&rx), "SO_TIMESTAMPNS refused on a TCP socket");
        // The kernel turns receive stamping on in a deferred work item, so
        // the first segments after the first socket asks can come
        // unstamped: wait until a byte comes stamped (a reply read then
        // ends when it was read, as without stamps).
        let mut stamped = false;
        for _ in 0..500 {
            tx.write_all(b"x").expect("write");
            std::thread::sleep(Duration::from_millis(2));
            let mut scratch = BytesMut::with_capacity(64);
            let (n, at) = recv(&rx, &mut scratch).expect("recvmsg");
            assert_eq!(n, 1, "{scratch:?}");
            if at.is_some() {
                stamped = true;
                break;
            }
        }
        assert!(stamped, "no receive timestamp within a second of asking");
        let before = Instant::now();
        tx.write_all(b"reply").expect("write");
        // The reader is late: the bytes wait in the socket meanwhile.
        std::thread::sleep(Duration::from_millis(300));
        let woke = Instant::now();
        let mut buf = BytesMut::with_capacity(64);
        let (n, at) = recv(&rx, &mut buf).expect("recvmsg");
        assert_eq!((n, &buf[..]), (5, &b"reply"[..]));
        let at = at.expect("no receive timestamp");
        assert!(
            at >= before - Duration::from_millis(5),
            "stamped before it was sent"
        );
        assert!(
            woke.duration_since(at) >= Duration::from_millis(200),
            "stamped {:?} before the late read, not when it arrived",
            woke.duration_since(at)
        );
    }
}
