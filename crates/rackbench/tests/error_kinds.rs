//! Each library's error says who can fix a failure (docs/layout.md):
//! `Input` for what the user gave, `Host` for the host, a device or a
//! peer. These cases hold the variant, not only the text, so a caller that
//! matches on it (retry a host failure, report a bad input) is served.

use std::path::Path;

#[test]
fn a_bad_value_is_the_users_to_fix() {
    let e = resctl::fmt::parse_size("12 furlongs").unwrap_err();
    assert!(matches!(e, resctl::Error::Input(_)), "{e:?}");
    let e = distbench::flags::parse_absl_duration("5 parsecs").unwrap_err();
    assert!(matches!(e, distbench::Error::Input(_)), "{e:?}");
    let e = adsim::kernels::concurrent_hash_map::parse_distribution(
        "frequency count\nmany keys\n",
        "dist.txt",
    )
    .unwrap_err();
    assert!(matches!(e, adsim::error::Error::Input(_)), "{e:?}");
    assert!(e.to_string().contains("dist.txt"), "{e}");
}

#[test]
fn a_file_the_user_names_that_is_not_one_is_the_users() {
    let dir = tempfile::tempdir().expect("tempdir");
    let short = dir.path().join("short.bin");
    std::fs::write(&short, b"abc").expect("write");
    let e = cachebench::replay::BinaryTrace::open(&short)
        .err()
        .expect("a 3-byte file is no binary trace");
    assert!(matches!(e, cachebench::Error::Input(_)), "{e:?}");
    let e =
        adsim::kernels::read_param_file("CHM", "dist_file", "/nonexistent/dist.txt").unwrap_err();
    assert!(matches!(e, adsim::error::Error::Input(_)), "{e:?}");
}

#[test]
fn a_host_file_that_cannot_be_written_is_the_hosts() {
    let e = resctl::sys::write_existing(Path::new("/nonexistent/cgroup.knob"), "1").unwrap_err();
    assert!(matches!(e, resctl::Error::Host(_)), "{e:?}");
    assert!(e.to_string().contains("/nonexistent/cgroup.knob"), "{e}");
}
