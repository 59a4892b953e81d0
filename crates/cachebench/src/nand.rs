//! NAND bytes written (`cache_config.writeAmpDeviceList`): the SSDs' own
//! lifetime count of bytes written to flash, read as upstream's
//! `NandWrites` reads it, through the `nvme` command-line tool (nvme-cli):
//! `nvme list -o json` gives each device's model number, the model picks
//! the vendor's log (`nvme <vendor> vs-smart-add-log /dev/DEV` and the
//! like), and the first line of its output containing `ritten` holds the
//! count in a vendor-specific field and unit. A model no vendor matches,
//! or a vendor log that gives nothing, is tried with the OCP plug-in
//! (`nvme ocp smart-add-log`). The run's figure is the count at the end
//! less the count at the start, summed over the devices; as upstream, if
//! any device cannot be read the figure is 0 (and the device write
//! amplification with it), and the reason goes to stderr.

use std::process::Command;
use std::time::{Duration, Instant};

/// How a vendor's log is read: the `nvme` arguments before and after the
/// device path, the field of the `ritten` line (negative: from the end)
/// and the unit of the count in bytes.
struct Vendor {
    args: &'static [&'static str],
    after: &'static [&'static str],
    field: i32,
    factor: u64,
}

const SAMSUNG: Vendor = Vendor {
    args: &["samsung", "vs-smart-add-log"],
    after: &[],
    field: 3,
    factor: 1,
};
const LITEON: Vendor = Vendor {
    args: &["liteon", "vs-smart-add-log"],
    after: &[],
    field: 4,
    factor: 1,
};
const SEAGATE: Vendor = Vendor {
    args: &["seagate", "vs-smart-add-log"],
    after: &[],
    field: 5,
    factor: 500 * 1024,
};
const INTEL: Vendor = Vendor {
    args: &["intel", "smart-log-add"],
    after: &[],
    field: 4,
    factor: 32 * 1024 * 1024,
};
const WDC: Vendor = Vendor {
    args: &["wdc", "vs-smart-add-log"],
    after: &[],
    field: -1,
    factor: 1,
};
const MICRON: Vendor = Vendor {
    args: &["micron", "vs-smart-add-log"],
    after: &["-f normal"],
    field: 6,
    factor: 1,
};
const SKHMS: Vendor = Vendor {
    args: &["skhms", "vs-nand-stats"],
    after: &[],
    field: 7,
    factor: 1,
};
const OCP: Vendor = Vendor {
    args: &["ocp", "smart-add-log"],
    after: &[],
    field: -1,
    factor: 1,
};

/// Toshiba's line gives a value and a unit (`... : 1133997.9 GiB`).
const TOSHIBA: &[&str] = &["toshiba", "vs-smart-add-log"];

/// Model-number substrings and their vendors, in upstream's order (its
/// map's, sorted by the substring): the first that the lower-cased model
/// contains decides.
const MODELS: &[(&str, Option<&Vendor>)] = &[
    ("hfs512gde9x083n", Some(&SKHMS)),
    ("intel", Some(&INTEL)),
    ("liteon", Some(&LITEON)),
    ("micron", Some(&MICRON)),
    ("mz1lb960hbjr-", Some(&SAMSUNG)),
    ("mzol23t8hcls-", Some(&SAMSUNG)),
    ("samsung", Some(&SAMSUNG)),
    ("seagate", Some(&SEAGATE)),
    ("ssstc", Some(&LITEON)),
    // None: Toshiba's own parsing.
    ("toshiba", None),
    ("wus4bb019d4m9e7", Some(&WDC)),
    ("wus4bb019djese7", Some(&WDC)),
    ("wus4bb038djese7", Some(&WDC)),
    ("wus6a7619pjp8x7", Some(&WDC)),
    ("wus6a762tp9p8x7", Some(&WDC)),
    ("wus6a7638pjp8x7", Some(&WDC)),
    ("wus6a7676pjp8x7", Some(&WDC)),
    ("wus6a76a1pjp8x7", Some(&WDC)),
    ("xm1441-", Some(&SEAGATE)),
];

/// The `nvme` tool: upstream's default path, else the first on PATH.
fn nvme_tool() -> Option<std::path::PathBuf> {
    let mut candidates = vec![std::path::PathBuf::from("/usr/local/sbin/nvme")];
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("nvme")));
    }
    candidates.into_iter().find(|p| p.is_file())
}

fn run(tool: &std::path::Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`{} {}` failed ({}): {}",
            tool.display(),
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The model number of `/dev/<dev>` in `nvme list -o json`'s output (the
/// nested layout of nvme-cli 2, or the flat one of 1.x).
pub fn model_number(json: &str, dev: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let name = dev.strip_prefix("/dev/").unwrap_or(dev);
    for d in v.get("Devices")?.as_array()? {
        if let Some(subsystems) = d.get("Subsystems").and_then(|s| s.as_array()) {
            for s in subsystems {
                for c in s
                    .get("Controllers")
                    .and_then(|c| c.as_array())
                    .into_iter()
                    .flatten()
                {
                    let has = c
                        .get("Namespaces")
                        .and_then(|n| n.as_array())
                        .into_iter()
                        .flatten()
                        .any(|n| n.get("NameSpace").and_then(|x| x.as_str()) == Some(name));
                    if has {
                        return c
                            .get("ModelNumber")
                            .and_then(|m| m.as_str())
                            .map(str::to_string);
                    }
                }
            }
        } else if d.get("DevicePath").and_then(|p| p.as_str()) == Some(&format!("/dev/{name}")) {
            return d
                .get("ModelNumber")
                .and_then(|m| m.as_str())
                .map(str::to_string);
        }
    }
    None
}

/// The space-separated fields of the first line containing `ritten`.
fn written_line(out: &str) -> Option<Vec<&str>> {
    out.lines()
        .find(|l| l.contains("ritten"))
        .map(|l| l.split(' ').filter(|f| !f.is_empty()).collect())
}

/// An integer as C's `strtoll` with base 0 reads it: decimal, `0x` hex or
/// `0` octal, up to the first character that does not belong.
fn parse_c_integer(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    let end = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    u64::from_str_radix(&digits[..end], radix).ok()
}

/// The count from a vendor log's output.
pub fn parse_vendor(out: &str, field: i32, factor: u64) -> Option<u64> {
    let fields = written_line(out)?;
    let at = if field < 0 {
        fields.len().checked_sub(field.unsigned_abs() as usize)?
    } else {
        field as usize
    };
    let f = fields.get(at)?.replace(',', "");
    parse_c_integer(&f)?.checked_mul(factor)
}

/// Toshiba's count: eight fields, a value and its unit (KiB to TiB).
pub fn parse_toshiba(out: &str) -> Option<u64> {
    let fields = written_line(out)?;
    if fields.len() != 8 {
        return None;
    }
    let value = parse_c_integer(fields[6].split('.').next()?)?;
    let unit: u64 = match fields[7] {
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => return None,
    };
    value.checked_mul(unit)
}

/// The lifetime NAND bytes written of device `dev` (`nvme1n1`).
fn device_bytes(tool: &std::path::Path, dev: &str) -> Result<u64, String> {
    let path = format!("/dev/{dev}");
    let list = run(tool, &["list", "-o", "json"])?;
    let model = model_number(&list, &path)
        .ok_or_else(|| format!("Failed to get device info for device {dev}"))?
        .to_lowercase();
    let vendor_log = |v: &Vendor| -> Option<u64> {
        let mut args: Vec<&str> = v.args.to_vec();
        args.push(&path);
        args.extend_from_slice(v.after);
        parse_vendor(&run(tool, &args).ok()?, v.field, v.factor)
    };
    let ocp = || vendor_log(&OCP);
    match MODELS.iter().find(|(m, _)| model.contains(m)) {
        Some((_, vendor)) => {
            let got = match vendor {
                Some(v) => vendor_log(v),
                None => {
                    let mut args = TOSHIBA.to_vec();
                    args.push(&path);
                    run(tool, &args).ok().as_deref().and_then(parse_toshiba)
                }
            };
            got.or_else(ocp)
                .ok_or_else(|| format!("Failed to get bytes written for device {dev}"))
        }
        None => ocp().ok_or_else(|| format!("Vendor not recogized in device model number {model}")),
    }
}

/// The NAND bytes written of `writeAmpDeviceList` over a run.
pub struct NandCounter {
    devices: Vec<String>,
    begin: u64,
    /// The last reading and when it was taken (readings run `nvme`, so
    /// they are kept a few seconds).
    last: std::sync::Mutex<Option<(Instant, u64)>>,
}

/// How long a reading is reused.
const REUSE: Duration = Duration::from_secs(5);

impl NandCounter {
    /// Reads the devices' counts at the start; `None` (with the reason on
    /// stderr) when the list is empty or a device cannot be read.
    pub fn start(devices: &[String]) -> Option<NandCounter> {
        if devices.is_empty() {
            return None;
        }
        match total(devices) {
            Ok(begin) => Some(NandCounter {
                devices: devices.to_vec(),
                begin,
                last: std::sync::Mutex::new(None),
            }),
            Err(e) => {
                eprintln!(
                    "warning: cache_config.writeAmpDeviceList: NAND bytes written cannot be read \
                     ({e}), so `NVM bytes written (nand)` and `NVM dev write amplification` print 0, \
                     as upstream's do then"
                );
                None
            }
        }
    }

    /// The NAND bytes written since the start (0 when a device cannot be
    /// read now, as upstream).
    pub fn written(&self) -> u64 {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, v)) = *last
            && at.elapsed() < REUSE
        {
            return v;
        }
        let v = total(&self.devices).map_or(0, |now| now.saturating_sub(self.begin));
        *last = Some((Instant::now(), v));
        v
    }
}

fn total(devices: &[String]) -> Result<u64, String> {
    let tool = nvme_tool().ok_or_else(|| {
        "the nvme tool (nvme-cli) is not installed: upstream runs /usr/local/sbin/nvme".to_string()
    })?;
    let mut sum = 0u64;
    for d in devices {
        sum = sum.saturating_add(device_bytes(&tool, d).map_err(|e| format!("{d}: {e}"))?);
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vendor lines upstream's NandWrites documents, parsed with the
    /// field and unit it uses for each.
    #[test]
    fn vendor_lines() {
        let samsung =
            "[015:000] PhysicallyWrittenBytes                            : 5357954930143232\n";
        assert_eq!(parse_vendor(samsung, 3, 1), Some(5_357_954_930_143_232));
        let liteon = "Physical(NAND) bytes written                  : 157,035,510,104,064\n";
        assert_eq!(parse_vendor(liteon, 4, 1), Some(157_035_510_104_064));
        let seagate = "Physical (NAND) bytes written           60137           0x000000000000000000000002d0cdc01b\n";
        assert_eq!(
            parse_vendor(seagate, 5, 500 * 1024),
            Some(0x2_d0cd_c01b * 500 * 1024)
        );
        let intel = "nand_bytes_written              : 100%       sectors: 224943088\n";
        assert_eq!(
            parse_vendor(intel, 4, 32 << 20),
            Some(224_943_088 * (32 << 20))
        );
        let wdc = "Physical media units written -   \t        0 2068700589752320\n";
        assert_eq!(parse_vendor(wdc, -1, 1), Some(2_068_700_589_752_320));
        assert_eq!(
            parse_vendor("Written : 0xd848690000 x\n", 2, 1),
            Some(0xd8_4869_0000)
        );
        let toshiba = "Vendor Log Page 0xCA for NVME device:nvme0 namespace-id:ffffffff\nTotal data written to NAND               : 1133997.9 GiB\n";
        assert_eq!(parse_toshiba(toshiba), Some(1_133_997 << 30));
        assert_eq!(parse_vendor("no such line\n", 3, 1), None);
    }

    #[test]
    fn model_numbers_of_both_list_layouts() {
        let v2 = r#"{"Devices":[{"HostNQN":"x","Subsystems":[{"Subsystem":"nvme-subsys0",
            "Controllers":[{"Controller":"nvme0","ModelNumber":"SAMSUNG MZ1L21T9",
            "Namespaces":[{"NameSpace":"nvme0n1"}]}]}]}]}"#;
        assert_eq!(
            model_number(v2, "/dev/nvme0n1").as_deref(),
            Some("SAMSUNG MZ1L21T9")
        );
        assert_eq!(model_number(v2, "/dev/nvme1n1"), None);
        let v1 =
            r#"{"Devices":[{"DevicePath":"/dev/nvme1n1","ModelNumber":"INTEL SSDPE2KX040T8"}]}"#;
        assert_eq!(
            model_number(v1, "nvme1n1").as_deref(),
            Some("INTEL SSDPE2KX040T8")
        );
        // The vendor table: the first substring (in upstream's order) wins.
        let pick = |m: &str| MODELS.iter().position(|(k, _)| m.contains(k));
        assert_eq!(pick("samsung mz1lb960hbjr-000fb"), Some(4));
        assert_eq!(pick("unknown model"), None);
    }
}
