//! The leaf process a driver starts (stopped when dropped), its status
//! RPC, and the wait until it reports ready.

use crate::cli::{ShapeArgs, Threads};
use crate::proto::leaf_client::LeafClient;
use crate::proto::{StatusReply, StatusRequest};
use anyhow::{Context, bail};
use harness::RunContext;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The leaf process this driver started; stopped (only it) on drop.
pub(crate) struct LeafProcess {
    pub(crate) child: Child,
    pub(crate) log: std::path::PathBuf,
}

impl LeafProcess {
    pub(crate) fn spawn(
        shape: &ShapeArgs,
        t: Threads,
        port: u16,
        cpus: Option<&[usize]>,
        ctx: &RunContext,
    ) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find the rackbench executable")?;
        // The leaf's log is one of the harness's artifacts; a direct run
        // (which writes only upstream's files) keeps it in the temp folder.
        let log = ctx
            .artifacts
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join(format!("feedsim_leaf_{port}.log"));
        let out = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut cmd = Command::new(exe);
        cmd.args([
            "feedsim",
            "leaf",
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args(shape.to_leaf_args(t))
        .env_remove("RACKBENCH_REPORT")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
        let cpus: Option<Vec<usize>> = cpus.map(<[usize]>::to_vec);
        // SAFETY: between fork and exec only async-signal-safe calls are
        // made: prctl and sched_setaffinity on a prepared set.
        unsafe {
            use std::os::unix::process::CommandExt;
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if let Some(c) = &cpus {
                for &cpu in c {
                    libc::CPU_SET(cpu, &mut set);
                }
            }
            let pin = cpus.is_some();
            cmd.pre_exec(move || {
                // The leaf dies with its driver, never outlives it.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                if pin
                    && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().context("cannot start the leaf process")?;
        Ok(LeafProcess { child, log })
    }

    /// Why the leaf is not running, if it is not.
    pub(crate) fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!(
                "the leaf process exited ({status}); its log {}:\n{}",
                self.log.display(),
                tail(&self.log, 12)
            )),
            _ => None,
        }
    }
}

impl Drop for LeafProcess {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(15) {
                if self.child.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

pub(crate) async fn status(
    client: &mut LeafClient<tonic::transport::Channel>,
) -> Result<StatusReply, tonic::Status> {
    client
        .status(StatusRequest {})
        .await
        .map(|r| r.into_inner())
}

/// Waits until the leaf at `addr` reports ready (no fixed sleep).
pub(crate) async fn wait_ready(
    addr: SocketAddr,
    leaf: &mut Option<LeafProcess>,
    ctx: &RunContext,
    println: &dyn Fn(&str),
    phase: &dyn Fn(&str),
) -> anyhow::Result<LeafClient<tonic::transport::Channel>> {
    let t = Instant::now();
    let mut last_note = Instant::now();
    // A leaf started elsewhere (`--leaf`) must at least accept a
    // connection: nothing listening there fails now, as upstream's driver
    // does, rather than after the wait for a leaf building its datasets.
    if leaf.is_none() {
        match tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
            .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => bail!(
                "cannot connect to the leaf at {addr}: {e} (is `rackbench feedsim leaf -p {}` running there?)",
                addr.port()
            ),
            Err(_) => bail!("cannot connect to the leaf at {addr}: no answer within 5 s"),
        }
    }
    loop {
        if let Some(p) = leaf.as_mut()
            && let Some(why) = p.exited()
        {
            bail!("{why}");
        }
        if ctx.cancel.is_stopped() {
            bail!("interrupted while waiting for the leaf");
        }
        // Each attempt is bounded: something else listening on the port may
        // accept the connection and never answer.
        let attempt = tokio::time::timeout(Duration::from_secs(2), async {
            let mut c = LeafClient::new(rpc::client::connect(addr).await.ok()?);
            let s = status(&mut c).await.ok()?;
            Some((c, s))
        });
        if let Ok(Some((c, s))) = attempt.await
            && s.ready
        {
            println(&format!(
                "leaf ready after {:.1} s (datasets built in {:.1} s, {:.0} MiB)",
                t.elapsed().as_secs_f64(),
                s.build_seconds,
                s.dataset_bytes as f64 / (1u64 << 20) as f64
            ));
            return Ok(c);
        }
        if last_note.elapsed() > Duration::from_secs(10) {
            phase(&format!(
                "waiting for the leaf to build its datasets ({:.0} s)",
                t.elapsed().as_secs_f64()
            ));
            last_note = Instant::now();
        }
        if t.elapsed() > Duration::from_secs(900) {
            bail!("the leaf at {addr} did not become ready within 15 minutes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
